"""autograd's ``util``: small helpers its users import."""
import warnings

from .core import getval  # noqa: F401
from .test_util import check_grads
from .wrap_util import subvals  # noqa: F401

__all__ = ["subvals", "subval", "toposort", "func", "quick_grad_check", "getval"]


def subval(x, i, v):
    out = list(x)
    out[i] = v
    return tuple(out)


def func(f):
    return f


def toposort(end_node, parents=lambda n: n.parents):
    """Nodes from ``end_node`` back, each after every node that depends on it."""
    child_counts, stack = {}, [end_node]
    while stack:
        node = stack.pop()
        if node in child_counts:
            child_counts[node] += 1
        else:
            child_counts[node] = 1
            stack.extend(parents(node))
    childless = [end_node]
    while childless:
        node = childless.pop()
        yield node
        for parent in parents(node):
            if child_counts[parent] == 1:
                childless.append(parent)
            else:
                child_counts[parent] -= 1


def quick_grad_check(fun, arg0, extra_args=(), kwargs={}, verbose=True, eps=1e-4,
                     rtol=1e-4, atol=1e-6, rs=None):
    """autograd's deprecated check: ``check_grads`` in reverse mode, first order."""
    warnings.warn("quick_grad_check is deprecated: use autograd.test_util.check_grads",
                  DeprecationWarning, stacklevel=2)
    check_grads(lambda x: fun(x, *extra_args, **kwargs), modes=["rev"], order=1)(arg0)

