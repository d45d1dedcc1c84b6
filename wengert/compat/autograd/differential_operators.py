"""autograd's differential operators, each one line onto wengert's transforms.

autograd's semantics are kept where they differ from ``wg.grad``'s: any output of size 1 is a
scalar (a ``(1,)`` array too), a gradient is the pullback of ones (for complex inputs the
conjugate of ``wg.grad``'s steepest ascent, as autograd), and operators take ``argnum``.
"""
import inspect
import warnings
from collections import OrderedDict

import numpy as np

from ... import numpy as wnp, transforms as _tf
from ...checkpoint import checkpoint as _wg_checkpoint
from ...tree import flatten, unflatten
from ...core import plain
from .core import as_float, make_jvp as _make_jvp, make_vjp as _make_vjp, vspace
from .wrap_util import unary_to_nary

__all__ = ["grad", "elementwise_grad", "value_and_grad", "grad_and_aux", "jacobian", "hessian",
           "hessian_tensor_product", "hessian_vector_product", "make_hvp", "make_ggnvp",
           "make_jvp", "make_vjp", "vector_jacobian_product", "tensor_jacobian_product",
           "multigrad_dict", "holomorphic_grad", "deriv", "checkpoint", "grad_named",
           "make_jvp_reversemode"]

_FLOAT = np.dtype(float)

make_vjp = unary_to_nary(_make_vjp)
make_jvp = unary_to_nary(_make_jvp)


def _scalar_seed(ans, who, real=False):
    """The cotangent 1 for an output of size 1 (autograd: a scalar, whatever its shape)."""
    t = type(ans)
    if t is float:
        return np.ones((), _FLOAT)  # what vspace(ans).ones() gives, without building it
    if (t is np.ndarray or t is np.float64) and ans.dtype.kind == "f" and ans.size == 1:
        return np.ones(ans.shape, ans.dtype)
    kind = np.result_type(plain(ans)).kind if not isinstance(ans, (tuple, list, dict)) else "O"
    if kind not in "fc" or (real and kind == "c"):
        raise TypeError(f"{who} only applies to real scalar-output functions; this one returned "
                        f"{'a complex' if kind == 'c' else 'a non-differentiable'} value "
                        f"({type(plain(ans)).__name__}). Try holomorphic_grad for a complex "
                        "output.")
    vs = vspace(ans)
    if vs.size != 1:
        raise TypeError(f"{who} only applies to real scalar-output functions (this one returned "
                        f"shape {vs.shape}). Try jacobian, elementwise_grad or holomorphic_grad.")
    return vs.ones()


@unary_to_nary
def grad(fun, x):
    """
    Returns a function which gives the gradient of ``fun`` in its argument ``argnum``, with
    that argument's structure; ``fun``'s output must have one element (any shape)."""
    ans, pullback = _tf._vjp(fun, (as_float(x),), once=True)  # one sweep: freed as it goes
    return pullback(_scalar_seed(ans, "grad", real=True))[0]


@unary_to_nary
def value_and_grad(fun, x):
    """``(value, gradient)``: for ``scipy.optimize.minimize(..., jac=True)``."""
    ans, pullback = _tf._vjp(fun, (as_float(x),), once=True)  # one sweep: freed as it goes
    return ans, pullback(_scalar_seed(ans, "value_and_grad", real=True))[0]


@unary_to_nary
def elementwise_grad(fun, x):
    """The pullback of ones: the sum of the Jacobian's rows (its diagonal when it is one)."""
    ans, pullback = _tf._vjp(fun, (as_float(x),), once=True)  # one sweep: freed as it goes
    vs = vspace(ans)
    if vs.iscomplex:
        raise TypeError("Elementwise_grad only applies to real-output functions.")
    return pullback(vs.ones())[0]


@unary_to_nary
def deriv(fun, x):
    """The tangent of the output along ones: ``f'(x)`` for a scalar ``x``."""
    return _tf.jvp(fun, (as_float(x),), (vspace(x).ones(),))[1]


@unary_to_nary
def jacobian(fun, x):
    """``out.shape + x.shape``, by reverse mode, one pass for all the rows."""
    return _tf.jacobian(fun, mode="reverse")(as_float(x))


@unary_to_nary
def holomorphic_grad(fun, x):
    """``f'(z)`` of a holomorphic ``f``."""
    if not vspace(x).iscomplex:
        warnings.warn("Input to holomorphic_grad is not complex")
    return grad(lambda z: wnp.real(fun(z)))(x)


def grad_named(fun, argname):
    """The gradient with respect to the argument called ``argname``."""
    return grad(fun, inspect.getfullargspec(fun).args.index(argname))


@unary_to_nary
def hessian(fun, x):
    """The Hessian, ``x.shape + x.shape`` (a Jacobian of the Jacobian, as autograd)."""
    return jacobian(jacobian(fun))(x)


@unary_to_nary
def make_hvp(fun, x):
    """``(hvp, grad)`` at ``x``: ``hvp(v)`` many times for one forward pass."""
    return _make_vjp(grad(fun), x)


def hessian_tensor_product(fun, argnum=0):
    """``f(*args, v)``: the Hessian (in ``args[argnum]``) contracted with ``v``."""
    fun_grad = grad(fun, argnum)

    def vector_dot_grad(*args, **kwargs):
        args, vector = args[:-1], args[-1]
        return wnp.tensordot(fun_grad(*args, **kwargs), vector, np.ndim(vector))
    return grad(vector_dot_grad, argnum)


hessian_vector_product = hessian_tensor_product


def tensor_jacobian_product(fun, argnum=0):
    """``f(*args, v)``: ``v`` contracted with the Jacobian (in ``args[argnum]``)."""
    def vector_dot_fun(*args, **kwargs):
        args, vector = args[:-1], args[-1]
        return wnp.tensordot(vector, fun(*args, **kwargs), axes=np.ndim(vector))
    return jacobian(vector_dot_fun, argnum)


vector_jacobian_product = tensor_jacobian_product


@unary_to_nary
def make_jvp_reversemode(fun, x):
    """The JVP as the pullback of a pullback (linear in its cotangent)."""
    vjp, y = _make_vjp(fun, x)
    return _make_vjp(vjp, vspace(y).zeros())[0]


def make_ggnvp(f, g=lambda x: 0.5 * wnp.sum(x ** 2, axis=-1), f_argnum=0):
    """Generalised Gauss-Newton-vector products of ``g(f(x))``: ``J_f' H_g J_f v``."""
    @unary_to_nary
    def _make_ggnvp(f, x):
        f_vjp, f_x = _make_vjp(f, x)
        g_hvp, grad_g_x = _make_vjp(grad(g), f_x)
        f_jvp = lambda v: _tf.jvp(f, (x,), (v,))[1]  # noqa: E731
        return lambda v: f_vjp(g_hvp(f_jvp(v)))
    return _make_ggnvp(f, f_argnum)


@unary_to_nary
def grad_and_aux(fun, x):
    """``(gradient of the first output, the second output)``."""
    def split(v):
        ans, aux = fun(v)
        _scalar_seed(ans, "grad_and_aux")
        return (wnp.reshape(ans, ()) if np.ndim(ans) else ans), aux
    g, aux = _tf.grad(split, has_aux=True)(as_float(x))
    leaves, d = flatten(g)  # wg.grad's steepest ascent; autograd's is its conjugate
    return unflatten(d, [np.conj(v) if np.iscomplexobj(v) else v for v in leaves]), aux


def multigrad_dict(fun):
    """The gradients in every argument at once, as an ``OrderedDict`` by argument name."""
    sig = inspect.signature(fun)

    def gradfun(*args, **kwargs):
        bound = sig.bind(*args, **kwargs)
        bound.apply_defaults()
        arguments = OrderedDict(bound.arguments)

        def newfun(dct):
            b = inspect.BoundArguments(sig, OrderedDict(dct))
            return fun(*b.args, **b.kwargs)
        grads = grad(newfun)(dict(arguments))
        return OrderedDict((name, grads[name]) for name in arguments)
    return gradfun


def checkpoint(fun):
    """``fun``, its intermediates recomputed in the backward sweep (``wg.checkpoint``)."""
    return _wg_checkpoint(fun)
