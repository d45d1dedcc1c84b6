"""The complex elementwise functions: real, imag, conj, angle.

Complex convention (JAX's): a cotangent ``g`` of a complex value ``z`` pairs with
a tangent as ``Re(sum(g * dz))``.  So the pullback of a complex-linear map is its
plain transpose, holomorphic functions pull back by ``g * f'(z)`` (what every
``partials`` rule already does), and ``grad`` of a real loss with respect to a
complex ``z`` is ``dL/dx - i dL/dy``.  Where a real input becomes complex the
pullback keeps the real part: the cotangent of a real input is real.
"""
import numpy as np

from ..core import primitive
from ..arrays import dtype_of
from . import patterns

__all__ = ["COMPLEX", "angle", "angle_jvp", "angle_vjp", "conj", "conj_jvp", "conj_vjp",
           "conjugate", "imag", "imag_jvp", "imag_vjp", "real", "real_jvp", "real_vjp"]


def _is_complex(x):
    return np.issubdtype(dtype_of(x), np.complexfloating)


# real, imag and conj are real-linear (for real coefficients), angle is not; on real input
# graph simplification may drop real
@primitive(linear=True, sparsity=patterns.ELEMENTWISE, batch="elementwise",
           identity_when=True)
def real(val):
    return np.real(val)


@real.frule(symbolic_zeros=True)
def real_jvp(primals, tangents):
    (z,), (dz,) = primals, tangents
    return real(z), None if dz is None else real(dz)


@real.rrule
def real_vjp(z):
    return real(z), lambda g: (g,)  # Re(g dz) = g Re(dz) for real g



@primitive(linear=True, sparsity=patterns.ELEMENTWISE, batch="elementwise")
def imag(val):
    return np.imag(val)


@imag.frule(symbolic_zeros=True)
def imag_jvp(primals, tangents):
    (z,), (dz,) = primals, tangents
    return imag(z), None if dz is None or not _is_complex(z) else imag(dz)


@imag.rrule
def imag_vjp(z):
    cplx = _is_complex(z)
    return imag(z), lambda g: ((-1j) * g if cplx else None,)  # Im(dz) = Re(-i dz)


@primitive(linear=True, sparsity=patterns.ELEMENTWISE, batch="elementwise")
def conj(x):
    return np.conjugate(x)


conjugate = conj


@conj.frule(symbolic_zeros=True)
def conj_jvp(primals, tangents):
    (z,), (dz,) = primals, tangents
    return conj(z), None if dz is None else conj(dz)


@conj.rrule
def conj_vjp(z):
    return conj(z), lambda g: (conj(g),)


@primitive(sparsity=patterns.ELEMENTWISE, batch="elementwise")
def angle(z, deg=False):
    return np.angle(z, deg=deg)


@angle.frule(symbolic_zeros=True)
def angle_jvp(primals, tangents, deg=False):
    (z,), (dz,) = primals, tangents
    ans = angle(z, deg=deg)
    if dz is None or not _is_complex(z):
        return ans, None  # piecewise constant on the reals
    t = imag(dz / z)  # d arg z = Im(dz / z)
    return ans, t * (180.0 / np.pi) if deg else t


@angle.rrule
def angle_vjp(z, deg=False):
    ans = angle(z, deg=deg)
    cplx = _is_complex(z)

    def pullback(g):
        if not cplx:
            return (None,)
        gz = (-1j) * g / z
        return (gz * (180.0 / np.pi) if deg else gz,)
    return ans, pullback


COMPLEX = {p.name: p for p in (real, imag, conj, angle)}
