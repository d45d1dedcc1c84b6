"""lse: log-sum-exp by the max trick, written from its primitives, and its gradient."""
import wengert as wg
import wengert.numpy as wnp

from ._common import array, maybe_compile, to_float, to_list


def logsumexp(x):
    a = wnp.max(x)
    return wnp.log(wnp.sum(wnp.exp(x - a))) + a


def functions(options):
    prep = lambda raw: (array(raw["x"]),)
    return {"primal": (prep, maybe_compile(options, logsumexp), to_float),
            "gradient": (prep, maybe_compile(options, wg.grad(logsumexp)), to_list)}
