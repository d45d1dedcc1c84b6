"""autograd's ``unary_to_nary``: an operator on one-argument functions made an operator on
functions of many, differentiating with respect to ``argnum`` (an int or a tuple of them)."""
import functools

__all__ = ["unary_to_nary", "wraps", "subvals"]


def subvals(args, pairs):
    """``args`` (a tuple) with ``args[i] = v`` for each ``(i, v)`` in ``pairs``."""
    out = list(args)
    for i, v in pairs:
        out[i] = v
    return tuple(out)


def unary_to_nary(unary_operator):
    """``op(fun, x, *extra)`` -> ``nary_op(fun, argnum=0, *extra)(*args, **kwargs)``."""
    @functools.wraps(unary_operator)
    def nary_operator(fun, argnum=0, *nary_op_args, **nary_op_kwargs):
        named = _named_like(fun)

        def nary_f(*args, **kwargs):
            if isinstance(argnum, int):
                x = args[argnum]

                def unary_f(x):
                    return fun(*subvals(args, ((argnum, x),)), **kwargs)
            else:
                x = tuple(args[i] for i in argnum)

                def unary_f(x):
                    return fun(*subvals(args, zip(argnum, x)), **kwargs)
            named(unary_f)  # fun's name, in check_grads' reports
            return unary_operator(unary_f, x, *nary_op_args, **nary_op_kwargs)
        op, name = _name(unary_operator), _name(fun)
        nary_f.__name__ = f"{op}_of_{name}_wrt_argnum_{argnum}"
        nary_f.__doc__ = (f"    {op} of function {name} with respect to argument number "
                          f"{argnum}, called with {name}'s arguments.\n")
        return nary_f
    return nary_operator


def _named_like(fun):
    """``functools.update_wrapper(g, fun)``, its attributes read once: it runs on every call
    of a differential operator."""
    template = functools.update_wrapper(lambda: None, fun)
    names = [(a, getattr(template, a)) for a in functools.WRAPPER_ASSIGNMENTS
             if a != "__type_params__" and hasattr(fun, a)]
    extra = dict(template.__dict__)

    def name(g):
        for a, v in names:
            setattr(g, a, v)
        g.__dict__.update(extra)
        return g
    return name


def _name(f):
    return getattr(f, "__name__", "[unknown name]")


def wraps(fun, namestr="{fun}", docstr="{doc}", **kwargs):
    """A decorator naming the wrapper after ``fun`` (autograd's formatting keywords)."""
    def _wraps(f):
        try:
            f.__name__ = namestr.format(fun=getattr(fun, "__name__", "fun"), **kwargs)
            f.__doc__ = docstr.format(fun=getattr(fun, "__name__", "fun"),
                                      doc=getattr(fun, "__doc__", "") or "", **kwargs)
        except (AttributeError, KeyError, IndexError):
            pass
        return f
    return _wraps
