"""GradBench's stock ``jax`` tool, with every timed call waiting for its result.

JAX dispatches asynchronously: the stock tool stops its clock when the call returns, before
the result exists (issue 32 saw 27 µs reported for a 14.6 ms log-sum-exp).  This launcher
wraps each timed function in ``jax.block_until_ready`` and then runs the stock tool
unchanged.  Usage (cwd: a GradBench clone): ``python jax_blocking.py [--multithreaded]``.
"""
import os
import runpy
import sys

import jax

import gradbench.wrap as wrap

_multiple_runs, _function = wrap.multiple_runs, wrap.function


def _blocking(decorate):
    def make(**kwargs):
        def decorator(function):
            wrapped = decorate(**kwargs)(lambda x: jax.block_until_ready(function(x)))
            wrapped.function = function
            return wrapped
        return decorator
    return make


wrap.multiple_runs = _blocking(_multiple_runs)
wrap.function = _blocking(_function)

if __name__ == "__main__":
    tool = os.path.join("python", "gradbench", "gradbench", "tools", "jax", "run.py")
    sys.path.insert(0, os.path.dirname(os.path.abspath(tool)))
    sys.argv = [tool, *sys.argv[1:]]
    runpy.run_path(tool, run_name="__main__")
