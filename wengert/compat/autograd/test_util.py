"""autograd's ``test_util``: derivatives checked against central differences along random
directions, in forward mode (``"fwd"``: the JVP) and reverse mode (``"rev"``: the VJP, by the
dot-product test ``<u, J v> = <J' u, v>``), recursively for higher orders."""
import itertools

from .core import make_jvp, make_vjp, vspace
from .wrap_util import unary_to_nary

__all__ = ["check_grads", "check_vjp", "check_jvp", "check_equivalent", "combo_check",
           "scalar_close", "make_numerical_jvp", "TOL", "RTOL", "EPS"]

TOL = RTOL = 1e-6   # absolute, relative
EPS = 1e-6          # the central difference's step


def scalar_close(a, b):
    d = abs(a - b)
    return d < TOL or d / abs(a + b) < RTOL


def _name(f):
    return getattr(f, "__name__", repr(f))


def make_numerical_jvp(f, x):
    """``v -> (f(x + eps v / 2) - f(x - eps v / 2)) / eps``."""
    xs, ys = vspace(x), vspace(f(x))

    def jvp(v):
        hi = f(xs.add(x, xs.scalar_mul(v, EPS / 2)))
        lo = f(xs.add(x, xs.scalar_mul(v, -EPS / 2)))
        return ys.scalar_mul(ys.add(hi, ys.scalar_mul(lo, -1.0)), 1.0 / EPS)
    return jvp


def check_vjp(f, x):
    vjp, y = make_vjp(f, x)
    xs, ys = vspace(x), vspace(y)
    u, w = xs.randn(), ys.randn()
    pulled = xs.covector(vjp(ys.covector(w)))
    assert vspace(pulled) == xs, f"the VJP of {_name(f)} gave {vspace(pulled)}, not {xs}"
    exact = xs.inner_prod(u, pulled)
    numeric = ys.inner_prod(w, make_numerical_jvp(f, x)(u))
    assert scalar_close(numeric, exact), (
        f"Derivative (VJP) check of {_name(f)} failed at {x!r}:\nanalytic: {exact}\n"
        f"numeric:  {numeric}")


def check_jvp(f, x):
    u = vspace(x).randn()
    exact, numeric = make_jvp(f, x)(u)[1], make_numerical_jvp(f, x)(u)
    try:
        check_equivalent(exact, numeric)
    except AssertionError as e:
        raise AssertionError(f"Derivative (JVP) check of {_name(f)} failed at {x!r}: "
                             f"{e}") from None


def check_equivalent(x, y):
    xs, ys = vspace(x), vspace(y)
    assert xs == ys, f"VSpace mismatch:\nx: {xs}\ny: {ys}"
    v = xs.randn()
    assert scalar_close(xs.inner_prod(x, v), xs.inner_prod(y, v)), \
        f"value mismatch:\nx: {x}\ny: {y}"


@unary_to_nary
def check_grads(f, x, modes=("fwd", "rev"), order=2):
    """``check_grads(f, argnum=0, modes=["fwd", "rev"], order=2)(*args)``."""
    if any(m not in ("fwd", "rev") for m in modes):
        raise ValueError(f"modes are 'fwd' and 'rev', got {modes!r}")
    if "fwd" in modes:
        check_jvp(f, x)
        if order > 1:
            def jvp_f(x, v):
                return make_jvp(f, x)(v)[1]
            jvp_f.__name__ = f"jvp_{_name(f)}"
            check_grads(jvp_f, (0, 1), modes, order=order - 1)(x, vspace(x).randn())
    if "rev" in modes:
        check_vjp(f, x)
        if order > 1:
            def vjp_f(x, v):
                return make_vjp(f, x)[0](v)
            vjp_f.__name__ = f"vjp_{_name(f)}"
            check_grads(vjp_f, (0, 1), modes, order=order - 1)(x, vspace(f(x)).randn())


def combo_check(fun, *args, **kwargs):
    """``combo_check(fun, argnums, ...)(arg_choices..., kw=choices...)``: every combination."""
    def run(*choices, **kw_choices):
        kw_pairs = [[(k, v) for v in vs] for k, vs in kw_choices.items()]
        for a in itertools.product(*choices):
            for kw in itertools.product(*kw_pairs):
                check_grads(fun, *args, **kwargs)(*a, **dict(kw))
    return run
