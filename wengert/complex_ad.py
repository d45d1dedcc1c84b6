"""Complex numbers at the transforms' boundary: the conventions of API.md §9, in one place.

Inside, every engine and rule keeps one convention, the transpose one (JAX's): a cotangent
``g`` of a complex value pairs with a tangent ``dz`` as ``Re(sum(g * dz))``, so a
holomorphic rule pulls back by ``g * f'(z)``, a complex-linear map by its plain transpose,
and ``vjp``'s pullback with ``g = 1`` gives ``f'(z)``. At the boundary:

* ``grad`` of a real ``f`` with respect to a complex ``z`` is that cotangent conjugated:
  ``∂f/∂x + i ∂f/∂y``, the direction of steepest ascent (PyTorch's; JAX and
  autograd return its conjugate);
* ``grad(f, holomorphic=True)`` is the cotangent itself: ``f'(z)``;
* a complex output without ``holomorphic=True`` has no gradient (it is not a real number
  to climb): ``TypeError``, saying what to write instead.
"""
import numpy as np

from . import numpy as wnp
from .core import leaf_dtype, plain

__all__ = ["is_complex", "steepest", "check_inputs", "check_output", "check_jacobian",
           "split", "join", "pairing_conj"]


def is_complex(x):
    """Whether ``x`` (a value, an array, a tracer) holds complex numbers."""
    t = type(x)
    if t is float:
        return False
    if t is np.ndarray:  # the common cases, quickly: grad asks of every input
        return x.dtype.kind == "c"
    dt = leaf_dtype(x)
    return dt is not None and dt.kind == "c"


def steepest(g):
    """The gradient of a real function from the cotangent of a complex input: its conjugate."""
    if type(g) is complex:
        return g.conjugate()
    if isinstance(g, (np.ndarray, np.generic)):
        return np.conj(g)
    return wnp.conj(g)  # traced (forward over reverse, a graph): recorded


def check_inputs(leaves, holomorphic, transform, name):
    """``holomorphic=True`` needs complex inputs (``f'(z)`` of a real ``x`` is ambiguous);
    ``name(i)`` names the i-th leaf's argument."""
    if not holomorphic:
        return
    for i, x in enumerate(leaves):
        if not is_complex(x):
            raise TypeError(
                f"{transform}(..., holomorphic=True) takes complex inputs, but {name(i)} is "
                f"of dtype {leaf_dtype(x)}: pass it as complex (e.g. x + 0j or "
                f"np.asarray(x, complex)), or drop holomorphic=True for a real input.")


def check_output(out, holomorphic, transform):
    """A complex output needs ``holomorphic=True``: a real function is what has a gradient."""
    if holomorphic or not is_complex(out):
        return
    raise TypeError(
        f"{transform} needs a real-valued function, but it returned a complex value "
        f"(dtype {leaf_dtype(out)}). For a holomorphic function pass holomorphic=True "
        f"(the result is f'(z)); otherwise differentiate a real number made from it, e.g. "
        f"wnp.real(f(z)) or wnp.abs(f(z))**2, or use wg.vjp for the complex cotangent.")


def check_jacobian(in_leaves, holomorphic, transform):
    """What a Jacobian of complex values is: the holomorphic ``df/dz`` (``holomorphic=True``),
    or ``d out / dx`` for real inputs; a complex input otherwise has none as a matrix."""
    if holomorphic:
        check_inputs(in_leaves, True, transform, lambda i: f"input leaf {i}")
        return
    if any(is_complex(x) for x in in_leaves):
        raise TypeError(
            f"{transform} of a function of complex inputs: its derivative is a complex matrix "
            f"only for a holomorphic function; pass holomorphic=True for one (the result is "
            f"df/dz). Otherwise the derivative is real-linear, not complex-linear: use "
            f"wg.grad for a real output (∂f/∂x + i ∂f/∂y), wg.hvp for a Hessian's products, "
            f"wg.jvp / wg.vjp, or pass the real and imaginary parts as separate real "
            f"arguments.")


# -- check_grad: complex numbers as pairs of reals -------------------------------------------
def split(x):
    """A leaf as a flat float64 vector; a complex one as its real parts, then its imaginary."""
    v = np.ravel(np.asarray(plain(x)))
    if v.dtype.kind == "c":
        return np.concatenate([v.real, v.imag]).astype(np.float64)
    return v.astype(np.float64)


def join(part, like):
    """Inverse of ``split`` for a leaf shaped like ``like``: (values, how many were read)."""
    k = int(np.size(plain(like)))
    if is_complex(like):
        return (part[:k] + 1j * part[k:2 * k]), 2 * k
    return part[:k], k


def pairing_conj(tree_leaves):
    """Conjugated leaves: ``Re(sum(conj(u) * w))`` is the real dot product of ``split(u)``
    and ``split(w)``, which is how ``check_grad`` reads a transposed pullback."""
    return [np.conj(x) if is_complex(x) else x for x in tree_leaves]
