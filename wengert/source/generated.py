"""The home of generated derivative functions, so they pickle by reference.

``wg.source.grad(f)`` registers its function here under a name that says how to
build it again (``grad__<module>__<qualname>__<argnums>``); unpickling in a fresh
process imports the user's module, finds ``f`` and transforms it once more.  This
works for functions defined at the top level of an importable module.

The transforms that rebuild a function are registered in ``BUILDERS`` by the package
(``wengert.source`` imports this module; this module imports nothing of it).  Importing
``wengert.source.generated`` imports the package first, so they are always there.
"""
import importlib

__all__ = ["BUILDERS", "decode", "encode"]

BUILDERS = {}   # "grad" -> grad(f, argnums), "jvp" -> jvp(f): set by wengert.source

_SEP = "__"
_DOT = "_DOT_"


def encode(kind, f, argnums):
    if isinstance(argnums, int):
        nums = str(argnums)
    else:
        nums = "t" + "_".join(str(i) for i in argnums)
    mod = f.__module__.replace(".", _DOT)
    qual = f.__qualname__.replace(".", _DOT)
    return f"{kind}{_SEP}{mod}{_SEP}{qual}{_SEP}{nums}"


def decode(name):
    kind, mod, qual, nums = name.split(_SEP)
    mod = mod.replace(_DOT, ".")
    qual = qual.replace(_DOT, ".")
    if nums.startswith("t"):
        argnums = tuple(int(i) for i in nums[1:].split("_") if i)
    else:
        argnums = int(nums)
    return kind, mod, qual, argnums


def __getattr__(name):
    # an unpickled reference to a function not generated yet in this process
    if not name.startswith(("grad" + _SEP, "jvp" + _SEP)):
        raise AttributeError(f"module 'wengert.source.generated' has no attribute {name!r}")
    try:
        kind, mod, qual, argnums = decode(name)
        obj = importlib.import_module(mod)
        for part in qual.split("."):
            obj = getattr(obj, part)
    except (ValueError, ImportError, AttributeError) as e:
        raise AttributeError(f"cannot rebuild {name!r}: {e}") from None
    return BUILDERS["grad"](obj, argnums) if kind == "grad" else BUILDERS["jvp"](obj)
