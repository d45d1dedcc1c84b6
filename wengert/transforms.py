"""The transforms users call: thin layers over the two engines.

``grad``, ``value_and_grad``, ``vjp`` and the reverse ``jacobian`` open a
``Tape``; ``derivative``, ``jvp``, ``hvp`` and the forward ``jacobian`` open a
``ForwardTrace``.  Every call opens a fresh level, so transforms nest to any
depth without confusing their perturbations.  Several directions at once (``jacobian``,
``hessian``, ``jvp(batched=True)``) are ``wg.vmap`` over one direction's pass
(``wengert.directions``): tangents and cotangents never carry batch axes.
"""
from __future__ import annotations

import functools
import inspect
import numbers

import numpy as np

from . import _collector, _progress, complex_ad, numpy as wnp
from .arrays import asarray, ndim_of, ones, shape_of, zeros, zeros_like_value
from .core import (Tracer, check_differentiable, check_live, leaf_dtype as _leaf_dtype,
                   new_level, plain as _plain, plain_store_errors)
from .batching import vmap
from .directions import pull_directions, pull_stacked, push_directions
from .forward import Dual, ForwardTrace
from .jet import taylor_coefficients
from .reverse import Tape, Var
from .rules.shape import as_float
from ._pickling import travels
from ._validate import check_argnums, check_callable, check_output
from .tree import flatten, unflatten

__all__ = ["grad", "value_and_grad", "derivative", "jvp", "vjp", "jacobian", "hessian", "hvp",
           "taylor"]


# -- input checks (check_differentiable is core's: engines check their inputs too) ------------
def _arg_name(f, i):
    try:
        params = list(inspect.signature(f).parameters.values())
        if i < len(params) and params[i].kind in (params[i].POSITIONAL_ONLY,
                                                   params[i].POSITIONAL_OR_KEYWORD):
            return f"argument {i} ('{params[i].name}')"
    except (TypeError, ValueError):
        pass
    return f"argument {i}"


def _argnums_tuple(argnums, nargs, fname):
    argnums = check_argnums(argnums, fname)
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    for i in nums:
        if not -nargs <= i < nargs:
            raise ValueError(f"{fname}: argnums={argnums!r} but the function got {nargs} "
                             "positional argument(s)")
    return tuple(i % nargs for i in nums)


def _check_args(f, args, nums, fname):
    for i in nums:
        v = args[i]
        if type(v) is float or (type(v) is np.ndarray and v.dtype.kind == "f"):
            continue  # the common cases, quickly
        _check_leaves(f, i, [v] if isinstance(v, Tracer) else flatten(v)[0], fname)


def _check_leaves(f, i, leaves, fname):
    """``check_differentiable`` on the leaves of argument ``i``; tracers must be live."""
    for x in leaves:
        if isinstance(x, Tracer):  # nested transforms: an outer tracer, which must be live
            check_live(x, lambda: f"passed to wg.{fname} as {_arg_name(f, i)}")
            while isinstance(x, Tracer):  # what is underneath is checked
                x = x.value
        if type(x) is float or (type(x) is np.ndarray and x.dtype.kind == "f"):
            continue  # the common cases, quickly
        check_differentiable(x, lambda: f"{fname}: {_arg_name(f, i)}")


def _value_in(x, trace, transform="the transform"):
    """The primal of ``x`` as seen outside ``trace``; any other tracer must be live."""
    if isinstance(x, Tracer):
        if x._trace is trace:
            return x.value
        check_live(x, lambda: f"returned by the function given to {transform}")
    return x


def _strip(tree, trace, transform="the transform"):
    leaves, d = flatten(tree)
    return unflatten(d, [_value_in(x, trace, transform) for x in leaves])


def _fit(g, like):
    """Give a derivative the type and dtype of the input it is taken with respect to."""
    if type(g) is np.ndarray and not g.flags.writeable:
        g = g.copy()  # a broadcast view (the gradient of a sum): users expect an array to own
    if type(g) is np.ndarray and type(like) is np.ndarray and g.dtype == like.dtype:
        return g  # the common case, quickly
    if isinstance(g, Tracer) and isinstance(like, Tracer):  # nested: compare what is underneath
        pg, pl = _plain(g), _plain(like)
        if type(pg) is np.ndarray and type(pl) is np.ndarray and pg.dtype == pl.dtype:
            return g
    if isinstance(g, (np.ndarray, np.generic)) and g.dtype.kind == "c" and \
            np.dtype(_leaf_dtype(like) or float).kind != "c":
        g = g.real  # a real input's cotangent is real (complex intermediates, JAX's convention)
    if type(_plain(like)) is float:  # (like may be traced, e.g. into a graph)
        if isinstance(g, (np.generic, np.ndarray)) and np.ndim(g) == 0:
            return float(g)
        if isinstance(g, Tracer) and type(_plain(g)) is not float and np.ndim(_plain(g)) == 0:
            return as_float(g)  # traced: the same conversion, recorded
        return g
    if type(like) is complex and isinstance(g, (np.generic, np.ndarray, float, int)) and \
            np.ndim(g) == 0:
        return complex(g)
    if type(g) in (float, int) and isinstance(like, (np.ndarray, np.generic)) and \
            like.dtype.kind == "c":
        g = np.asarray(g, like.dtype)  # a rule's real number for a complex input: complex
        if type(like) is not np.ndarray:
            g = g[()]
    if isinstance(g, (np.ndarray, np.generic)):
        dt = _leaf_dtype(like)
        if dt is not None and g.dtype != dt:
            g = g.astype(dt)
    elif isinstance(g, Tracer):  # traced (e.g. into a graph): the same cast, recorded
        dt, gd = _leaf_dtype(like), _leaf_dtype(g)
        if dt is not None and gd is not None and gd != dt:
            g = wnp.astype(g, dt)
    return g


# -- reverse mode ------------------------------------------------------------------------
def value_and_grad(f, argnums=0, *, has_aux=False, holomorphic=False):
    """``(value, gradient)`` of a scalar function, by one reverse sweep.

    >>> import wengert as wg, wengert.numpy as wnp
    >>> v, g = wg.value_and_grad(lambda x, y: x * y + wnp.sin(x), argnums=(0, 1))(0.5, 4.2)
    >>> print(round(float(v), 12), [round(float(d), 12) for d in g])
    2.579425538604 [5.07758256189, 0.5]
    """
    check_callable(f, "wg.value_and_grad")
    argnums = check_argnums(argnums, "value_and_grad")

    @plain_store_errors
    @functools.wraps(f)
    def value_and_grad_f(*args, **kwargs):
        return _value_and_grad(f, argnums, has_aux, args, kwargs, "wg.value_and_grad",
                               holomorphic)
    return travels(value_and_grad_f, value_and_grad, f, argnums, has_aux=has_aux,
                   holomorphic=holomorphic)


def _check_real_output(out, transform):
    """A bool or an integer (a comparison, a count) has no gradient: asking for one is a
    mistake a zero would hide (JAX raises too)."""
    p = _plain(out)
    if type(p) is float:
        return
    kind = np.asarray(p).dtype.kind if isinstance(p, (bool, int, np.generic, np.ndarray)) else ""
    if kind in "biu" and kind:
        raise TypeError(
            f"{transform[3:]} needs a function with a float output, but it returned "
            f"{type(p).__name__} {p!r}: {'a bool' if kind == 'b' else 'an integer'} has no "
            f"derivative. Return the float quantity to differentiate (e.g. a loss, not a "
            f"comparison of it).")


def _value_and_grad(f, argnums, has_aux, args, kwargs, transform="wg.grad", holomorphic=False):
    """One reverse sweep: the body of every ``value_and_grad(f)`` call.

    ``transform`` names the caller in the message a Var that escapes ``f`` raises; complex
    inputs: see ``complex_ad`` (``holomorphic``: ``f'(z)``, else the steepest ascent).
    The cyclic collector waits meanwhile (``_collector``: it would walk the whole tape).
    """
    with _collector.paused():
        return _taped_value_and_grad(f, argnums, has_aux, args, kwargs, transform,
                                     holomorphic)


def _taped_value_and_grad(f, argnums, has_aux, args, kwargs, transform, holomorphic):
    tape = Tape()
    try:
        if type(argnums) is int and 0 <= argnums < len(args):
            nums = (argnums,)  # the common case, quickly
        else:
            nums = _argnums_tuple(argnums, len(args), transform[3:])
        args = list(args)
        inputs = {}  # each position once: argnums=(0, 0) gives its gradient twice, as JAX
        for i in nums:
            if i in inputs:
                continue
            leaves, d = flatten(args[i])
            _check_leaves(f, i, leaves, transform[3:])  # "grad" of "wg.grad"
            if holomorphic:
                complex_ad.check_inputs(leaves, True, transform,
                                        lambda _, i=i: _arg_name(f, i))
            vs = [tape._leaf(x) for x in leaves]
            inputs[i] = (leaves, d, [v.index for v in vs])  # f may rebind a Var (x[i] = v)
            args[i] = unflatten(d, vs)
        with tape.active():
            out = f(*args, **kwargs)
        aux = None
        if has_aux:
            if not (isinstance(out, (tuple, list)) and len(out) == 2):
                raise ValueError("with has_aux=True the function must return (output, aux)")
            out, aux = out
            aux = _strip(aux, tape, transform)
        if type(out) is not Var:
            check_output(out, transform)
        if shape_of(out) != () or isinstance(out, (tuple, list, dict)):
            got = type(out).__name__ if isinstance(out, (tuple, list, dict)) else shape_of(out)
            if got != () and not isinstance(got, str) and all(n == 1 for n in got):
                raise ValueError(  # a size-1 array is not a scalar (as in JAX)
                    f"{transform[3:]} needs a function with a scalar output (shape ()), but it "
                    f"returned shape {got}: a size-1 array is not a scalar. Return out.sum() "
                    f"or index it, out[{', '.join('0' * len(got))}].")
            raise ValueError(
                f"{transform[3:]} needs a function with a scalar output, but it returned shape {got}. "
                "Use wg.jacobian or wg.vjp for non-scalar outputs, or reduce it (e.g. wnp.sum).")
        # a Var holding a float (the common scalar case; NumPy's from a reduction) is real:
        # no check to make
        real = type(out) is Var and (type(out.value) is float or type(out.value) is np.float64)
        if not real:
            _check_real_output(out, transform)
        if type(out) is Var and out._trace is tape:
            seed = 1.0 if real or isinstance(_plain(out.value), float) else \
                ones((), _leaf_dtype(out.value), like=out.value)  # in its array library
            adj = tape.sweep({out.index: seed}, leaves_only=True, last=True)
        else:
            adj = None
        if not holomorphic and type(out) is not float and not real:  # after the sweep: a
            complex_ad.check_output(out, False, transform)  # rule's refusal comes first
        grads = {}
        for i, (leaves, d, vs) in inputs.items():
            gs = []
            for x, k in zip(leaves, vs):
                g = adj[k] if adj is not None else None
                g = _fit(g, x) if g is not None else zeros_like_value(x)
                if not holomorphic and type(x) is not float and complex_ad.is_complex(x):
                    g = complex_ad.steepest(g)  # ∂f/∂x + i ∂f/∂y: see complex_ad
                gs.append(g)
            grads[i] = unflatten(d, gs)
        g = grads[nums[0]] if type(argnums) is int or isinstance(argnums, numbers.Integral) else \
            tuple(grads[i] for i in nums)
        value = _value_in(out, tape, transform)
        return ((value, aux), g) if has_aux else (value, g)
    finally:
        tape.finish(transform, f)  # its Vars are dead from now on


def grad(f, argnums=0, *, has_aux=False, holomorphic=False):
    """The gradient of a scalar function, by one reverse sweep of a tape.

    For a complex ``z`` and a real ``f`` it is ``∂f/∂x + i ∂f/∂y`` (steepest ascent); with
    ``holomorphic=True`` it is ``f'(z)`` of a holomorphic ``f`` (docs/complex.md).

    >>> import wengert as wg, wengert.numpy as wnp
    >>> float(wg.grad(lambda x: x * wnp.sin(x))(0.0))
    0.0
    """
    check_callable(f, "wg.grad")
    argnums = check_argnums(argnums, "grad")

    @plain_store_errors
    @functools.wraps(f)
    def grad_f(*args, **kwargs):
        value, g = _value_and_grad(f, argnums, has_aux, args, kwargs, "wg.grad", holomorphic)
        return (g, value[1]) if has_aux else g
    return travels(grad_f, grad, f, argnums, has_aux=has_aux, holomorphic=holomorphic)


@plain_store_errors
def vjp(f, *primals):
    """``(out, pullback)``: ``pullback(cotangent)`` gives one cotangent per primal.

    The tape is kept, so the pullback can be called any number of times. On complex values
    the pullback is the plain transpose of the linear map (no conjugate): ``pullback(1)`` of
    a holomorphic ``f`` is ``f'(z)``, and of a real ``f`` it is ``∂f/∂x - i ∂f/∂y``, the
    conjugate of ``wg.grad`` (docs/complex.md).
    """
    return _vjp(f, primals)


def _vjp(f, primals, once=False):
    """``vjp``'s body. ``once``: the caller pulls back exactly one cotangent (autograd's
    ``grad``), so the sweep frees the tape as it goes (``Tape.sweep``'s ``last``)."""
    check_callable(f, "wg.vjp")
    nums = tuple(range(len(primals)))
    _check_args(f, primals, nums, "vjp")
    tape = Tape()
    inputs = []
    args = []
    for p in primals:
        leaves, d = flatten(p)
        vs = [tape._leaf(x) for x in leaves]
        inputs.append((leaves, d, [v.index for v in vs]))  # f may rebind a Var (x[i] = v)
        args.append(unflatten(d, vs))
    try:
        with tape.active(), _collector.paused():
            out = f(*args)
        check_output(out, "wg.vjp")
        out_leaves, out_def = flatten(out)
        out_vals = [_value_in(o, tape, "wg.vjp") for o in out_leaves]
    finally:
        tape.finish("wg.vjp", f)  # its Vars are dead; the pullback sweeps the tape itself

    swept = []

    def pullback(cotangent):
        if once and swept:
            raise RuntimeError("this pullback was made for one call and has been called")
        ct_leaves, ct_def = flatten(cotangent)
        if ct_def != out_def:
            raise ValueError("the cotangent must have the structure of the output "
                             f"({out_def!r}), got {ct_def!r}")
        seeds = {}
        batch = None
        for o, c in zip(out_leaves, ct_leaves):
            if isinstance(o, Var) and o._trace is tape:
                cs, os_ = shape_of(c), shape_of(o)
                if cs != os_:
                    b = cs[:len(cs) - len(os_)]
                    if len(cs) <= len(os_) or cs[len(b):] != os_ or batch not in (None, b):
                        raise ValueError(f"cotangent of shape {cs} for an output of shape "
                                         f"{os_}")
                    batch = b
                seeds[o.index] = c if o.index not in seeds else seeds[o.index] + c
        if batch is not None:  # several cotangents on leading axes: vmap over the sweep
            return pull_stacked(pullback, out_leaves, ct_leaves, out_def, batch)
        if once:
            swept.append(True)
        adj = _sweep_finished(tape, seeds, last=once) if seeds else None
        res = []
        for leaves, d, vs in inputs:
            gs = []
            for x, k in zip(leaves, vs):
                g = adj[k] if adj is not None else None
                gs.append(_fit(g, x) if g is not None else zeros_like_value(x))
            res.append(unflatten(d, gs))
        return tuple(res)

    return unflatten(out_def, out_vals), pullback


def _sweep_finished(tape, seeds, last=False):
    """Sweep the tape of a transform that has returned (``vjp``'s pullback, called later);
    only the inputs' adjoints are read. ``last``: no other sweep follows.

    The tape lives again while it is swept: a checkpointed region's pullback runs the
    user's function once more on a sub-tape of it, reading Vars of this tape.
    """
    by = tape.revive()
    try:
        with _collector.paused():
            return tape.sweep(seeds, leaves_only=True, last=last)
    finally:
        if by is not None:
            tape.finish(*by)


# -- forward mode --------------------------------------------------------------------------
@plain_store_errors
def jvp(f, primals, tangents, *, batched=False):
    """``(out, out_tangent)``: the Jacobian-vector product in one forward pass.

    With ``batched=True`` every tangent carries a leading axis of ``k`` directions (shape
    ``(k,) + primal.shape``), all pushed in the same pass, and each output tangent has shape
    ``(k,) + out.shape``: ``k`` JVPs for the price of one pass over ``f``.

    >>> import numpy as np, wengert as wg, wengert.numpy as wnp
    >>> out, t = wg.jvp(lambda x, y: x * y + wnp.sin(x), (0.5, 4.2), (1.0, 0.0))
    >>> print(round(float(t), 12))
    5.07758256189
    >>> wg.jvp(lambda x: x ** 2, (np.array([1.0, 3.0]),), (np.eye(2),), batched=True)[1]
    array([[2., 0.],
           [0., 6.]])
    """
    return _jvp(f, primals, tangents, "wg.jvp", batched)


def _jvp(f, primals, tangents, transform, batched=False):
    check_callable(f, transform)
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise TypeError(
            f"{transform[3:]} takes the primals and the tangents as tuples (or lists), one "
            f"entry per argument of the function, e.g. wg.jvp(f, (x,), (dx,)); got "
            f"{type(primals).__name__} and {type(tangents).__name__}")
    primals, tangents = tuple(primals), tuple(tangents)
    if len(primals) != len(tangents):
        raise ValueError("jvp needs one tangent per primal")
    _check_args(f, primals, tuple(range(len(primals))), transform[3:])
    batch = None
    for p, t in zip(primals, tangents):
        pl, pd = flatten(p)
        tl, td = flatten(t)
        if pd != td:
            raise ValueError(f"tangent structure {td!r} does not match primal {pd!r}")
        for x, dx in zip(pl, tl):
            if type(dx) is not float and complex_ad.is_complex(dx) and \
                    not complex_ad.is_complex(x):
                raise TypeError("a complex tangent for a real primal: a real input moves "
                                "along the reals only; pass the primal as complex (x + 0j) "
                                "to move it off them")
            ts, xs = shape_of(dx), shape_of(x)
            if batched and ts[1:] == xs and batch in (None, ts[:1]):
                batch = ts[:1]
                continue
            if batched:
                raise ValueError(
                    f"with batched=True each tangent has shape (k,) + its primal's shape, with "
                    f"the same k for all; got {ts} for a primal of shape {xs}"
                    + (f" where another had k = {batch[0]}" if batch else ""))
            if ts != xs:
                raise ValueError(
                    f"tangent of shape {ts} for a primal of shape {xs}"
                    + (". For several directions at once, stack them on a leading axis and "
                       "pass batched=True" if ts[1:] == xs else ""))
    if batched:  # vmap over jvp: every direction in one pass, each tangent one direction
        return vmap(lambda *ts: _jvp_one(f, primals, ts, transform),
                    out_axes=(None, 0))(*tangents)
    return _jvp_one(f, primals, tangents, transform)


def _jvp_one(f, primals, tangents, transform):
    trace = ForwardTrace(new_level())
    args = []
    for p, t in zip(primals, tangents):
        pl, pd = flatten(p)
        args.append(unflatten(pd, [Dual(x, dx, trace) for x, dx in zip(pl, flatten(t)[0])]))
    try:
        out = f(*args)
        check_output(out, transform)
        return _split_dual(out, trace, transform=transform)
    finally:
        trace.finish(transform, f)  # its Duals are dead from now on


def _split_dual(out, trace, transform="the transform"):
    leaves, d = flatten(out)
    vals, tans = [], []
    for o in leaves:
        if isinstance(o, Dual) and o._trace is trace:
            vals.append(o.value)
            t = o._tangent
            if t is None:
                t = zeros(shape_of(o.value), _leaf_dtype(o.value), like=o.value)
            elif type(t) is np.ndarray and not t.flags.writeable:
                t = t.copy()  # a broadcast view (x + c): an array of its own, as users expect
            tans.append(t)
        else:
            vals.append(_value_in(o, trace, transform))  # an outer tracer must be live
            tans.append(zeros(shape_of(o), _leaf_dtype(o) or float, like=o))
    return unflatten(d, vals), unflatten(d, tans)


def derivative(f, order=1):
    """``f'`` (or the ``order``-th derivative) of a function of one float, by forward mode.

    >>> import wengert as wg
    >>> def babylonian(x, n=10):
    ...     t = (1 + x) / 2
    ...     for _ in range(n):
    ...         t = (t + x / t) / 2
    ...     return t
    >>> wg.derivative(babylonian)(2.0)
    0.35355339059327373
    """
    check_callable(f, "wg.derivative")
    if not isinstance(order, int) or order < 0:
        raise ValueError("order must be a non-negative integer")
    if order == 0:
        return f
    if order > 1:
        return derivative(derivative(f, order - 1))

    @plain_store_errors
    @functools.wraps(f)
    def df(x, *args, **kwargs):
        if type(x) is float:  # the common case, checked quickly
            one = 1.0
        else:
            check_differentiable(x, lambda: f"derivative: {_arg_name(f, 0)}")
            if ndim_of(x) != 0:
                raise ValueError("derivative takes a function of one scalar; use wg.jacobian "
                                 "or wg.jvp for arrays")
            one = 1.0 if isinstance(_plain(x), float) else ones((), _leaf_dtype(x), like=x)
        trace = ForwardTrace(new_level())
        try:
            out = f(Dual(x, one, trace), *args, **kwargs)
            if isinstance(out, Dual) and out._trace is trace:  # the common case, quickly
                t = out._tangent
                return t if t is not None else zeros_like_value(out.value)
            check_output(out, "wg.derivative")
            return _split_dual(out, trace, transform="wg.derivative")[1]
        finally:
            trace.finish("wg.derivative", f)  # its Duals are dead from now on
    return travels(df, derivative, f)


# -- Jacobians -------------------------------------------------------------------------------
def _size(x):
    return int(np.prod(shape_of(x), dtype=int))


def jacobian(f, argnums=0, *, mode="auto", progress=False, holomorphic=False):
    """The Jacobian, shaped ``out.shape + in.shape`` (pytrees: out-tree of in-trees).

    ``mode="forward"`` pushes every input direction at once (``vmap`` over ``jvp``);
    ``mode="reverse"`` pulls every output row back in one sweep (``vmap`` over the
    pullback); ``"auto"`` picks forward when the input has fewer elements.
    ``progress=True`` shows tqdm bars on stderr: the columns pushed forward, or the
    recording (forward sweep) and the rows pulled back; so that a bar can move, the
    work is then done in up to a hundred pieces (forward mode runs ``f`` once per piece).
    Complex values: ``holomorphic=True`` gives ``df/dz`` of a holomorphic ``f``; real inputs
    may have complex outputs; complex inputs need ``holomorphic=True`` (docs/complex.md).
    """
    return travels(_jacobian(f, argnums, mode, "wg.jacobian", progress, holomorphic), jacobian,
                   f, argnums, mode=mode, progress=progress, holomorphic=holomorphic)


def _jacobian(f, argnums, mode, transform, progress=False, holomorphic=False):
    """``jacobian``; ``transform`` names the caller in the message of an escaped tracer."""
    check_callable(f, transform)
    if mode not in ("auto", "forward", "reverse"):
        raise ValueError("mode must be 'auto', 'forward' or 'reverse'")
    argnums = check_argnums(argnums, transform[3:])
    progress = _progress.check(progress, transform)

    @plain_store_errors
    @functools.wraps(f)
    def jacobian_f(*args, **kwargs):
        nums = _argnums_tuple(argnums, len(args), transform[3:])
        _check_args(f, args, nums, "jacobian")
        uniq = tuple(dict.fromkeys(nums))  # argnums=(0, 0): one input, its Jacobian twice
        widen = tuple(uniq.index(i) for i in nums) if uniq != nums else None
        nums = uniq
        in_tree = tuple(args[i] for i in nums) if not isinstance(argnums, int) else args[nums[0]]
        in_leaves, in_def = flatten(in_tree)
        complex_ad.check_jacobian(in_leaves, holomorphic, transform)
        n_in = sum(_size(x) for x in in_leaves)
        m = mode
        one = isinstance(argnums, int)
        if m == "auto":
            # one plain run to learn the output size, on copies: f may update its input in
            # place (x[0] = v), which must not reach the caller's array
            copies = [x.copy() if type(x) is np.ndarray else x for x in in_leaves]
            out_probe = f(*_place_inputs(args, nums, in_def, copies, one), **kwargs)
            check_output(out_probe, transform)
            n_out = sum(_size(o) for o in flatten(out_probe)[0])
            m = "forward" if n_in < n_out else "reverse"
        jac = _jac_forward if m == "forward" else _jac_reverse
        return jac(f, args, kwargs, nums, in_leaves, in_def, n_in, one, transform, progress,
                   widen)
    return jacobian_f


def _row(in_def, blocks, widen):
    """One output leaf's Jacobian blocks as the input tree; ``widen`` repeats positions."""
    row = unflatten(in_def, blocks)
    return row if widen is None else tuple(row[k] for k in widen)


def _place_inputs(args, nums, in_def, wrapped, one):
    args = list(args)
    tree = unflatten(in_def, wrapped)
    if one:
        args[nums[0]] = tree
    else:
        for i, sub in zip(nums, tree):
            args[i] = sub
    return args


def _chunks(total, progress):
    """Ranges of columns (rows): all at once, or about a hundred pieces for a moving bar."""
    if not progress or total <= 1:
        return [(0, total)]
    size = -(-total // 100)
    return [(lo, min(lo + size, total)) for lo in range(0, total, size)]


def _concat(parts):
    if all(type(p) is np.ndarray for p in parts):
        return np.concatenate(parts)
    return wnp.concatenate(parts, axis=0)


def _jac_forward(f, args, kwargs, nums, in_leaves, in_def, n, one, transform, progress=False,
                 widen=None):
    parts = []
    with _progress.bar(progress, n, f"{transform} forward", "column") as bar:
        for lo, hi in _chunks(n, progress):
            shapes, out_def, ts = _forward_columns(f, args, kwargs, nums, in_leaves, in_def,
                                                   one, transform, lo, hi)
            parts.append(ts)
            bar.update(hi - lo)
    tangents = parts[0] if len(parts) == 1 else \
        [_concat([p[j] for p in parts]) for j in range(len(shapes))]
    rows = []
    for t, os_ in zip(tangents, shapes):
        # (n, *out) -> (*out, n), then split n into the input leaves' shapes
        nd = len(os_)
        t = wnp.transpose(t, tuple(range(1, nd + 1)) + (0,)) if nd else t
        blocks = []
        off = 0
        for x in in_leaves:
            k = _size(x)
            blk = t[..., off:off + k] if (len(in_leaves) > 1) else t
            blocks.append(_fit_block(wnp.reshape(blk, os_ + shape_of(x)), x))  # as reverse
            off += k
        rows.append(_row(in_def, blocks, widen))
    return unflatten(out_def, rows)


def _forward_columns(f, args, kwargs, nums, in_leaves, in_def, one, transform, lo, hi):
    """Columns ``lo:hi`` of the identity pushed forward: the output shapes, its treedef,
    and per output leaf the tangents, ``(hi - lo, *out)``."""
    c = hi - lo
    seeds = []
    off = 0
    for x in in_leaves:
        s = shape_of(x)
        k = _size(x)
        dt = _leaf_dtype(x)
        if c == k and lo == off:
            seed = np.eye(k, dtype=dt)
        else:
            seed = np.zeros((c, k), dtype=dt)
            a, b = max(lo, off), min(hi, off + k)  # this leaf's columns among lo:hi
            if a < b:
                seed[np.arange(a - lo, b - lo), np.arange(a - off, b - off)] = 1
        # the identity's columns, in x's array library (a NumPy seed is moved there)
        seeds.append(asarray(seed.reshape((c,) + s), like=x))
        off += k
    return push_directions(lambda w: f(*_place_inputs(args, nums, in_def, w, one), **kwargs),
                           in_leaves, seeds, transform, f)


def _jac_reverse(f, args, kwargs, nums, in_leaves, in_def, n, one, transform, progress=False,
                 widen=None):
    tape = Tape()
    try:
        return _jac_reverse_on(tape, f, args, kwargs, nums, in_leaves, in_def, n, one,
                               transform, progress, widen)
    finally:
        tape.finish(transform, f)  # its Vars are dead from now on


def _jac_reverse_on(tape, f, args, kwargs, nums, in_leaves, in_def, n, one, transform,
                    progress=False, widen=None):
    wrapped = [tape._leaf(x) for x in in_leaves]
    in_index = [v.index for v in wrapped]  # f may rebind a Var (x[i] = v)
    with _progress.bar(progress, 1, f"{transform} forward sweep", "pass") as bar:
        with tape.active():
            out = f(*_place_inputs(args, nums, in_def, wrapped, one), **kwargs)
        bar.set_postfix_str(f"{len(tape)} tape entries")
        bar.update()
    check_output(out, transform)
    out_leaves, out_def = flatten(out)
    for o in out_leaves:
        if not (isinstance(o, Var) and o._trace is tape):
            _value_in(o, tape, transform)  # an outer tracer must be live
    m = sum(_size(o) for o in out_leaves)
    # a complex output of a real input: a real input's cotangent keeps only the real part of
    # the row, so the imaginary part is the row pulled back times -i, a second sweep
    phases = (1.0, -1j) if any(complex_ad.is_complex(o) for o in out_leaves) and \
        not all(complex_ad.is_complex(x) for x in in_leaves) else (1.0,)
    parts = []
    with _progress.bar(progress, m * len(phases), f"{transform} reverse", "row") as bar:
        for lo, hi in _chunks(m, progress):
            cs = [_reverse_rows(tape, out_leaves, in_leaves, in_index, lo, hi, ph)
                  for ph in phases]
            if len(cs) > 1:
                cs = [[c if complex_ad.is_complex(x) else c + 1j * d
                       for x, c, d in zip(in_leaves, *cs)]]
            parts.append(cs[0])
            bar.update((hi - lo) * len(phases))
    # adjoint of input leaf j: (m, *in_j); split m into the outputs' shapes
    cols = parts[0] if len(parts) == 1 else \
        [_concat([p[j] for p in parts]) for j in range(len(in_leaves))]
    rows = []
    off = 0
    for o in out_leaves:
        os_ = shape_of(o)
        k = _size(o)
        blocks = []
        for x, g in zip(in_leaves, cols):
            blk = g[off:off + k] if m != k else g
            blocks.append(_fit_block(wnp.reshape(blk, os_ + shape_of(x)), x))
        rows.append(_row(in_def, blocks, widen))
        off += k
    return unflatten(out_def, rows)


def _fit_block(blk, x):
    """A Jacobian block, as ``_fit``; but d(complex output)/d(real input) stays complex."""
    if complex_ad.is_complex(blk) and not complex_ad.is_complex(x):
        return blk
    return _fit(blk, x)


def _reverse_rows(tape, out_leaves, in_leaves, in_index, lo, hi, phase=1.0):
    """One sweep of ``tape`` pulling rows ``lo:hi`` of the identity (times ``phase``) back:
    per input leaf its adjoints, ``(hi - lo, *in)``."""
    c = hi - lo
    seeds = {}
    off = 0
    for o in out_leaves:
        os_ = shape_of(o)
        k = _size(o)
        if isinstance(o, Var) and o._trace is tape:
            dt = _leaf_dtype(o.value)
            seed = np.zeros((c, k), dtype=dt)
            a, b = max(lo, off), min(hi, off + k)  # this leaf's rows among lo:hi
            if a < b:
                seed[a - lo:b - lo, a - off:b - off] = np.eye(b - a, dtype=dt)
            seed = seed.reshape((c,) + os_)
            if phase != 1.0:
                seed = seed * phase
            seed = asarray(seed, like=o.value)  # in o's array library
            seeds[o.index] = seed if o.index not in seeds else seeds[o.index] + seed
        off += k
    if not seeds:
        return [zeros((c,) + shape_of(x), _leaf_dtype(x), like=x) for x in in_leaves]
    return pull_directions(tape, seeds, in_index, in_leaves)


def hessian(f, argnums=0, *, progress=False, holomorphic=False):
    """The Hessian of a scalar function, ``in.shape + in.shape``: forward over reverse.

    For a float ``x`` it is a float, as ``grad(grad(f))(x)``.  ``progress=True``: a tqdm
    bar of the columns done (see ``jacobian``). ``holomorphic=True``: ``f''(z)``; a real
    ``f`` of complex ``z`` has no complex Hessian matrix (``wg.hvp`` works: docs/complex.md).
    """
    check_callable(f, "wg.hessian")
    argnums = check_argnums(argnums, "hessian")

    @functools.wraps(f)
    def grad_f(*args, **kwargs):
        return _value_and_grad(f, argnums, False, args, kwargs, "wg.hessian", holomorphic)[1]
    return travels(_jacobian(grad_f, argnums, "forward", "wg.hessian", progress, holomorphic),
                   hessian, f, argnums, progress=progress, holomorphic=holomorphic)


_CURRIED = object()


def hvp(f, x=_CURRIED, v=_CURRIED):
    """H(x)·v without forming H: one forward pass over the reverse sweep.

    Each leaf gets the type and dtype of ``x``'s, as ``grad`` gives them (a float for a float).
    ``wg.hvp(f)`` is the function ``(x, v) -> H(x)·v`` (the habit of autograd and JAX users).

    >>> import numpy as np, wengert as wg, wengert.numpy as wnp
    >>> wg.hvp(lambda x: wnp.sum(x ** 3))(np.array([1.0, 2.0]), np.array([1.0, 0.0]))
    array([6., 0.])
    """
    check_callable(f, "wg.hvp")
    if x is _CURRIED and v is _CURRIED:
        @plain_store_errors
        @functools.wraps(f)
        def hvp_f(x, v):
            return hvp(f, x, v)
        return travels(hvp_f, hvp, f)
    if x is _CURRIED or v is _CURRIED:
        raise TypeError("wg.hvp takes (f, x, v), or f alone for the function (x, v) -> H(x)·v")
    hv = _jvp(lambda y: _value_and_grad(f, 0, False, (y,), {}, "wg.hvp")[1], (x,), (v,),
              "wg.hvp")[1]
    if type(hv) is np.ndarray and type(x) is np.ndarray and hv.dtype == x.dtype:
        return hv  # the common case, quickly
    leaves, d = flatten(hv)
    return unflatten(d, [_fit(g, like) for g, like in zip(leaves, flatten(x)[0])])


@plain_store_errors
def taylor(f, x, v, order):
    """Taylor coefficients ``[c0, ..., c_order]`` of ``t -> f(x + t v)`` at 0.

    ``c_k`` is the k-th directional derivative divided by k!.
    """
    if not isinstance(order, int) or order < 0:
        raise ValueError("order must be a non-negative integer")

    @functools.wraps(f)  # escaped-tracer messages name the user's function
    def checked(y):
        out = f(y)
        check_output(out, "wg.taylor")
        return out
    return taylor_coefficients(checked, x, v, order)
