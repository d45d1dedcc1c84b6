"""One module per GradBench eval, each written as a wengert user would write it."""
