"""Module-level functions for tests/test_pickling.py: a child process made by 'spawn' finds
them by name (plain pickle saves a function by reference)."""
import cloudpickle
import numpy as np

import wengert as wg
import wengert.numpy as wnp


@wg.primitive(broadcasting=True)
def user_primitive(x):
    return np.tanh(x) * 2.0


@user_primitive.partials
def _(x):
    return (2.0 * (1.0 - wnp.tanh(x) ** 2),)


def loss(x):
    return wnp.sum(wnp.sin(x) * x)


def vec(x):
    return wnp.sin(x) * 2.0 + x[0]


def two(a, b):
    return wnp.sum(a * b) + wnp.sum(a ** 2)


def scalar(x):
    return wnp.sin(x) * x


@wg.custom_vjp
def clipped(x):
    return wnp.sin(x)


def _clipped_fwd(x):
    return wnp.sin(x), x


def _clipped_bwd(x, g):
    return (wnp.clip(g * wnp.cos(x), -0.5, 0.5),)


clipped.defvjp(_clipped_fwd, _clipped_bwd)


@wg.custom_jvp
def softplus(x):
    return wnp.log(1.0 + wnp.exp(x))


@softplus.defjvp
def _softplus_jvp(primals, tangents):
    (x,), (dx,) = primals, tangents
    return softplus(x), dx / (1.0 + wnp.exp(-x))


@wg.compile
def compiled_decorated(x):
    return wnp.sin(x) * 2.0 + x


def sum_clipped(x):
    return wnp.sum(clipped(x))


def sum_softplus(x):
    return wnp.sum(softplus(x))


X = np.array([0.3, -1.2, 2.0])


def cases():
    """name -> (the transformed function, its arguments): every transform that returns a
    function, over module-level functions."""
    return {
        "grad": (wg.grad(loss), (X,)),
        "grad argnums": (wg.grad(two, argnums=(1, 0)), (X, X + 1.0)),
        "value_and_grad": (wg.value_and_grad(loss), (X,)),
        "grad has_aux": (wg.grad(aux_loss, has_aux=True), (X,)),
        "jacobian": (wg.jacobian(vec), (X,)),
        "jacobian reverse": (wg.jacobian(vec, mode="reverse"), (X,)),
        "jacfwd": (wg.jacfwd(vec), (X,)),
        "jacrev": (wg.jacrev(vec), (X,)),
        "hessian": (wg.hessian(loss), (X,)),
        "hvp": (wg.hvp(loss), (X, X[::-1].copy())),
        "derivative": (wg.derivative(scalar, order=2), (0.7,)),
        "vmap": (wg.vmap(vec), (np.stack([X, X * 2.0]),)),
        "vmap of grad": (wg.vmap(wg.grad(loss)), (np.stack([X, X * 2.0]),)),
        "checkpoint": (wg.checkpoint(vec), (X,)),
        "grad of checkpoint": (wg.grad(checkpointed_loss), (X,)),
        "custom_vjp": (wg.grad(sum_clipped), (X,)),
        "custom_vjp itself": (clipped, (X,)),
        "custom_jvp": (wg.grad(sum_softplus), (X,)),
        "custom_jvp itself": (softplus, (X,)),
        "source.grad": (wg.source.grad(scalar), (0.7,)),
        "sparse_jacobian": (wg.sparse_jacobian(vec), (X,)),
        "compile of sparse_jacobian": (wg.compile(wg.sparse_jacobian(vec)), (X,)),
        "compile": (wg.compile(vec), (X,)),
        "compile of grad": (wg.compile(wg.grad(loss)), (X,)),
        "compile decorated": (compiled_decorated, (X,)),
        "compile unfused": (wg.compile(vec, fuse=False, max_traces=3), (X,)),
    }


def aux_loss(x):
    return wnp.sum(x ** 2), x[0]


_checkpointed_vec = wg.checkpoint(vec)


def checkpointed_loss(x):
    return wnp.sum(_checkpointed_vec(x) ** 2)


def closures():
    """name -> (a transform of a closure, its arguments): these travel by cloudpickle."""
    w = np.array([1.5, -0.5, 2.0])

    def model(x):
        return wnp.sum(wnp.tanh(w * x))

    return {
        "grad of a closure": (wg.grad(model), (X,)),
        "grad of a lambda": (wg.grad(lambda x: wnp.sum(x ** 3)), (X,)),
        "hessian of a closure": (wg.hessian(model), (X,)),
        "vmap of a lambda": (wg.vmap(lambda x: x * w), (np.stack([X, X]),)),
        "compile of a closure": (wg.compile(wg.grad(model)), (X,)),
        "checkpoint of a lambda": (wg.grad(lambda x: wnp.sum(wg.checkpoint(
            lambda y: wnp.sin(y) * w)(x))), (X,)),
        "custom_vjp of a closure": (_local_custom(w), (X,)),
    }


def _local_custom(w):
    @wg.custom_vjp
    def scaled(x):
        return x * w

    scaled.defvjp(lambda x: (x * w, None), lambda res, g: (g * w * 2.0,))
    return wg.grad(lambda x: wnp.sum(scaled(x)))


def run_all(blobs_and_args):
    """In a child process: unpickle each function and call it on its arguments."""
    import pickle
    out = {}
    for name, (blob, args) in blobs_and_args.items():
        out[name] = pickle.loads(blob)(*args)
    return out


def run_cloudpickled(blob, args):
    """In a worker of a process pool: a function that travelled by cloudpickle, called."""
    return cloudpickle.loads(blob)(*args)
