"""hello: square and its derivative (GradBench's protocol check)."""
import wengert as wg

from ._common import maybe_compile, to_float


def square(x):
    return x * x


def functions(options):
    sq = maybe_compile(options, square)
    double = maybe_compile(options, wg.grad(square))
    return {"square": (lambda x: (float(x),), sq, to_float),
            "double": (lambda x: (float(x),), double, to_float)}
