"""``wengert.scipy.optimize``: SciPy's root finders and minimisers, differentiable.

Each function is SciPy's own call, with SciPy's signature and result; when an argument, an
entry of ``args`` or a value a function closes over is traced, the solution (``x``,
``root``) and the objective (``fun``, ``cost``) come back traced.  Derivatives come from the
equation the solution satisfies, never from SciPy's iterations: for a root of ``F(x, θ)``,
``dx = -J⁻¹ ∂F/∂θ dθ`` (the implicit function theorem, one linear solve with the Jacobian at
the root); for a minimum, the same on the optimality condition ``∇f = 0``, with active
bounds and constraints in the Karush-Kuhn-Tucker system; ``fun`` then follows by the chain
rule, which at an optimum is the envelope theorem.  Forward, reverse, nested, ``vmap`` and
``compile`` all read these rules (``wengert.implicit_diff``).  Functions must be written with
``wengert.numpy`` (they are differentiated at the solution).  Where SciPy reports failure
a ``wg.SolverWarning`` says so and the derivative is taken at the point SciPy returned.

This module is on the floor built on transforms (6): its rules call ``wg.grad``/``wg.jvp``.

>>> import numpy as np, wengert as wg, wengert.numpy as wnp
>>> from wengert.scipy import optimize
>>> sqrt = lambda a: optimize.brentq(lambda x: x * x - a, 0.0, 10.0, xtol=1e-14)
>>> print(round(float(wg.grad(sqrt)(2.0)), 10), round(1 / (2 * np.sqrt(2.0)), 10))
0.3535533906 0.3535533906
"""
from __future__ import annotations

import numpy as np
import scipy.optimize as _so

from ..numpy import _passthrough
from ._solving import SciPyProblem, first, solved, vector, warn_failure, with_fields
from ._optima import least_squares, linprog, minimize, minimize_scalar

__all__ = ["root", "fsolve", "root_scalar", "brentq", "brenth", "ridder", "bisect", "toms748",
           "newton", "fixed_point", "minimize", "least_squares", "minimize_scalar", "linprog"]


# -- root -----------------------------------------------------------------------------------------
def root(fun, x0, args=(), method="hybr", jac=None, tol=None, callback=None, options=None):
    """``scipy.optimize.root``; ``.x`` and ``.fun`` traced (every method; ``.fun``, zero
    along the solution, has zero derivatives: under a first ``wg.grad`` it is SciPy's)."""
    args = args if isinstance(args, tuple) else (args,)

    def run(objs):
        f, x0_, a, j = objs
        res = _so.root(f, x0_, args=a, method=method, jac=j, tol=tol, callback=callback,
                       options=options)
        if not res.success:
            warn_failure(f"root(method={method!r})", res.message)
        return res.x, res, None

    def equation(objs, z, active):
        f, _, a, _ = objs
        return vector(first(f(problem.unravel(z), *a)))
    problem = SciPyProblem("root", (fun, x0, args, jac), run, equation, cache=True,
                           reads=(0, 2))
    x, traced = solved(problem)
    if not traced:
        return problem.result
    if problem.taped:
        # F(x(θ), θ) = 0 along the implicit solution, so .fun's derivatives are zero, to
        # every order and at any point SciPy returns (dx is -J⁻¹ ∂F/∂θ dθ at that point):
        # a first reverse derivative keeps SciPy's own value rather than record F again
        return with_fields(problem.result, x=x)
    f, _, a, _ = problem.captured.build(problem.captured.leaves)
    return with_fields(problem.result, x=x, fun=first(f(x, *a)))


def fsolve(func, x0, args=(), fprime=None, full_output=0, col_deriv=0, xtol=1.49012e-08,
           maxfev=0, band=None, epsfcn=None, factor=100, diag=None):
    """``scipy.optimize.fsolve``; the solution traced."""
    args = args if isinstance(args, tuple) else (args,)

    def run(objs):
        f, x0_, a, fp = objs
        x, info, ier, msg = _so.fsolve(f, x0_, args=a, fprime=fp, full_output=True,
                                       col_deriv=col_deriv, xtol=xtol, maxfev=maxfev,
                                       band=band, epsfcn=epsfcn, factor=factor, diag=diag)
        if ier != 1:
            warn_failure("fsolve", msg)
        return x, (x, info, ier, msg), None

    def equation(objs, z, active):
        f, _, a, _ = objs
        return vector(f(problem.unravel(z), *a))
    problem = SciPyProblem("fsolve", (func, x0, args, fprime), run, equation,
                           cache=True, reads=(0, 2))
    x, traced = solved(problem)
    out = problem.result
    if traced:
        out = (x,) + out[1:]
    return out if full_output else out[0]


# -- scalar roots -----------------------------------------------------------------------------------
def _scalar_root(name, run_root, f, objs_rest, args, flag_ok):
    """A scalar root ``f(x, *args) = 0``: ``run_root(f, rest, args) -> (x, result)``."""
    args = args if isinstance(args, tuple) else (args,)

    def run(objs):
        fn, rest, a = objs
        x, res = run_root(fn, rest, a)
        if not flag_ok(res):
            info = res[1] if isinstance(res, tuple) else res
            warn_failure(name, getattr(info, "flag", "not converged"))
        return np.asarray(x, dtype=float), res, None

    def equation(objs, z, active):
        fn, _, a = objs
        return vector(first(fn(problem.unravel(z), *a)))
    problem = SciPyProblem(name, (f, objs_rest, args), run, equation, cache=True,
                           reads=(0, 2))
    x, traced = solved(problem)
    return x, traced, problem.result


def _converged(res):
    return getattr(res, "converged", True)


def root_scalar(f, args=(), method=None, bracket=None, fprime=None, fprime2=None, x0=None,
                x1=None, xtol=None, rtol=None, maxiter=None, options=None):
    """``scipy.optimize.root_scalar``; ``.root`` traced."""
    def run_root(fn, rest, a):
        br, fp, fp2, x0_, x1_ = rest
        res = _so.root_scalar(fn, args=a, method=method, bracket=br, fprime=fp, fprime2=fp2,
                              x0=x0_, x1=x1_, xtol=xtol, rtol=rtol, maxiter=maxiter,
                              options=options)
        return res.root, res
    x, traced, res = _scalar_root("root_scalar", run_root, f,
                                  (bracket, fprime, fprime2, x0, x1), args, _converged)
    return with_fields(res, root=x) if traced else res


def _bracketing(name):
    scipy_fn = getattr(_so, name)

    def wrapper(f, a, b, args=(), **kwargs):
        full = kwargs.pop("full_output", False)

        def run_root(fn, rest, ar):
            x, r = scipy_fn(fn, rest[0], rest[1], args=ar, full_output=True, **kwargs)
            return x, (x, r)
        x, traced, res = _scalar_root(name, run_root, f, (a, b), args,
                                      lambda r: _converged(r[1]))
        value = x if traced else res[0]
        return (value, res[1]) if full else value
    wrapper.__name__ = wrapper.__qualname__ = name
    wrapper.__doc__ = (f"``scipy.optimize.{name}(f, a, b, args=(), ...)``; the root traced "
                       "(the bracket gets no derivative: the root does not depend on it).")
    return wrapper


brentq = _bracketing("brentq")
brenth = _bracketing("brenth")
ridder = _bracketing("ridder")
bisect = _bracketing("bisect")
toms748 = _bracketing("toms748")


def newton(func, x0, fprime=None, args=(), tol=1.48e-08, maxiter=50, fprime2=None, x1=None,
           rtol=0.0, full_output=False, disp=True):
    """``scipy.optimize.newton`` (scalar or elementwise over an array ``x0``); the root traced."""
    def run_root(fn, rest, a):
        x0_, fp, fp2, x1_ = rest
        out = _so.newton(fn, x0_, fprime=fp, args=a, tol=tol, maxiter=maxiter, fprime2=fp2,
                         x1=x1_, rtol=rtol, full_output=True, disp=disp)
        return out[0], out

    def ok(out):
        conv = out[1].converged if hasattr(out[1], "converged") else out[1]
        return bool(np.all(conv))
    x, traced, res = _scalar_root("newton", run_root, func, (x0, fprime, fprime2, x1), args, ok)
    if traced:
        res = (x,) + tuple(res[1:]) if not hasattr(res, "_fields") else res._replace(root=x)
    if full_output:
        return res
    return res[0]


def fixed_point(func, x0, args=(), xtol=1e-08, maxiter=500, method="del2"):
    """``scipy.optimize.fixed_point``: ``x = func(x, *args)``; the fixed point traced
    (the implicit function theorem on ``func(x) - x = 0``)."""
    args = args if isinstance(args, tuple) else (args,)

    def run(objs):
        f, x0_, a = objs
        try:
            x = _so.fixed_point(f, x0_, args=a, xtol=xtol, maxiter=maxiter, method=method)
        except RuntimeError as e:  # SciPy raises where it does not converge
            raise RuntimeError(f"fixed_point: {e}") from e
        return x, x, None

    def equation(objs, z, active):
        f, _, a = objs
        x = problem.unravel(z)
        return vector(f(x, *a) - x)
    problem = SciPyProblem("fixed_point", (func, x0, args), run, equation, cache=True,
                           reads=(0, 2))
    x, traced = solved(problem)
    return x if traced else problem.result


def __getattr__(name):
    # SciPy's other names (Bounds, OptimizeResult, LinearConstraint...) pass through
    if name.startswith("__"):
        raise AttributeError(name)
    fn = getattr(_so, name)
    return _passthrough(f"scipy.optimize.{name}", fn) if callable(fn) and \
        not isinstance(fn, type) else fn




for _f in (root, fsolve, root_scalar, brentq, brenth, ridder, bisect, toms748, newton,
           fixed_point):
    _f._wengert_solver = True  # wengert.coverage: SciPy's solver, differentiated
