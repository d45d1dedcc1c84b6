"""``wg.check_grad``: every derivative checked against central finite differences.

On a floor of its own above the transforms it checks (forward mode as J v, reverse mode as
u^T J, to any order), so that the transforms never depend on their own test.
"""
from __future__ import annotations

import numpy as np

from . import complex_ad
from .arrays import shape_of
from .core import check_differentiable, leaf_dtype as _leaf_dtype
from .transforms import _arg_name, grad, jvp, vjp
from .tree import flatten, unflatten

__all__ = ["check_grad"]


def _to_vec(tree):
    """A pytree as one float64 vector; a complex leaf as its real, then imaginary parts."""
    leaves = flatten(tree)[0]
    if not leaves:
        return np.zeros(0)
    return np.concatenate([complex_ad.split(x) for x in leaves])



def _like(tree, vec, dtype_from=None):
    """A pytree shaped like ``tree`` from a flat vector (keeping dtypes)."""
    leaves, d = flatten(tree)
    out, off = [], 0
    for x in leaves:
        part, k = complex_ad.join(vec[off:], x)
        part = part.reshape(shape_of(x))
        dt = _leaf_dtype(x)
        if isinstance(x, (float, complex)):
            out.append(type(x)(part))
        else:
            out.append(part.astype(dt))
        off += k
    return unflatten(d, out)


def _upcast(tree):
    leaves, d = flatten(tree)
    return unflatten(d, [np.asarray(x, np.complex128 if x.dtype.kind == "c" else np.float64)
                         if isinstance(x, np.ndarray) else x for x in leaves])


def check_grad(f, *args, order=1, modes=("forward", "reverse"), rtol=1e-5, atol=1e-6, eps=None,
               _seed=0):
    """Check ``f``'s derivatives at ``args`` against central finite differences.

    Returns ``None`` or raises ``AssertionError`` with a report.  Forward mode is
    checked as J·v, reverse mode as uᵀJ, for random v and u; ``order=2`` checks
    the derivatives of the derivatives too. A complex number counts as two reals (its
    real and imaginary parts, perturbed separately); for a real scalar ``f`` of complex
    inputs ``wg.grad``'s steepest-ascent convention is checked too.
    """
    rng = np.random.default_rng(_seed)
    args = tuple(args)
    for a_i in range(len(args)):
        for leaf in flatten(args[a_i])[0]:
            check_differentiable(leaf, lambda: f"check_grad: {_arg_name(f, a_i)}")
    x_vec = _to_vec(args)
    n = x_vec.size
    low_precision = any(_leaf_dtype(x) in (np.float32, np.complex64) for x in flatten(args)[0])
    if low_precision:  # finite differences in float64; compare with float32 tolerance
        rtol, atol = max(rtol, 2e-3), max(atol, 2e-4)
    h = eps if eps is not None else 1e-6 * max(1.0, float(np.max(np.abs(x_vec))) if n else 1.0)
    fx = f(*args)
    out_vec = _to_vec(fx)
    v = rng.standard_normal(n)
    u = rng.standard_normal(out_vec.size)
    hi_args = _upcast(args)

    def f_at(vec):
        return _to_vec(f(*_like(hi_args, vec)))

    fd = (f_at(x_vec + h * v) - f_at(x_vec - h * v)) / (2 * h)
    problems = []
    if "forward" in modes:
        out, t = jvp(f, args, _like(args, v))
        jv = _to_vec(t)
        if not np.allclose(jv, fd, rtol=rtol, atol=atol):
            problems.append(_report("forward (J v)", jv, fd))
    if "reverse" in modes:
        out, pb = vjp(f, *args)
        # the pullback is a transpose: Re(sum(conj(u) w)) is the dot product of the parts
        ct_leaves, ct_def = flatten(_like(fx, u))
        cts = pb(unflatten(ct_def, complex_ad.pairing_conj(ct_leaves)))
        ujv = float(np.dot(_to_vec(complex_ad.pairing_conj(flatten(cts)[0])), v))
        ref = float(np.dot(u, fd))
        if not np.isclose(ujv, ref, rtol=rtol, atol=atol * max(1.0, np.sqrt(n))):
            problems.append(_report("reverse (u^T J v)", np.array([ujv]), np.array([ref])))
        if isinstance(fx, (float, np.ndarray, np.generic)) and np.ndim(fx) == 0 and \
                not complex_ad.is_complex(fx) and \
                any(complex_ad.is_complex(x) for x in flatten(args)[0]):
            g = grad(f, argnums=tuple(range(len(args))))(*args)  # ∂f/∂x + i ∂f/∂y
            gv = float(np.dot(_to_vec(g), v))
            if not np.isclose(gv, float(fd[0]), rtol=rtol, atol=atol * max(1.0, np.sqrt(n))):
                problems.append(_report("wg.grad, steepest ascent (g . v)", np.array([gv]),
                                        np.array([fd[0]])))
    if problems:
        raise AssertionError(f"check_grad({getattr(f, '__name__', f)!s}) at order {order}: "
                             "derivatives differ from central finite differences:\n"
                             + "\n".join(problems))
    if order > 1:
        # each mode checks its own derivatives' derivatives: a reverse-only rule (no frule) is
        # checked to any order with modes=("reverse",)
        if "forward" in modes:
            def directional(*xs):  # the derivative of f in direction v, of the inputs
                return jvp(f, xs, _like(xs, v))[1]
            check_grad(directional, *args, order=order - 1, modes=modes, rtol=rtol * 10,
                       atol=atol * 10, eps=eps, _seed=_seed + 1)
        if "reverse" in modes:
            ct = unflatten(ct_def, complex_ad.pairing_conj(ct_leaves))
            if all(np.dtype(_leaf_dtype(c) or float).kind in "fc" for c in flatten(ct)[0]):
                # the pullback of the inputs and of the cotangent: a pullback's own rules are
                # checked in both of their arguments (as autograd's check_grads does)
                def pulled(*xs_ct):
                    return vjp(f, *xs_ct[:-1])[1](xs_ct[-1])
                check_grad(pulled, *args, ct, order=order - 1, modes=modes, rtol=rtol * 10,
                           atol=atol * 10, eps=eps, _seed=_seed + 2)
            else:
                def pulled(*xs):
                    return vjp(f, *xs)[1](ct)
                check_grad(pulled, *args, order=order - 1, modes=modes, rtol=rtol * 10,
                           atol=atol * 10, eps=eps, _seed=_seed + 2)


def _report(mode, got, want):
    if got.shape != want.shape:  # e.g. a complex tangent of a real output: a rule's bug
        return (f"  {mode}: AD gives {got.size} real number(s), finite differences "
                f"{want.size} (a complex derivative of a real value, or the reverse?)")
    err = np.abs(got - want)
    i = int(np.argmax(err)) if err.size else 0
    return (f"  {mode}: max abs error {err.max() if err.size else 0:.3g} at entry {i}: "
            f"AD gives {got.ravel()[i] if got.size else 'nothing'}, "
            f"finite differences give {want.ravel()[i] if want.size else 'nothing'}")
