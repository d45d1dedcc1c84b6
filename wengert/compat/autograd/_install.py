"""``import autograd`` resolved to ``wengert.compat.autograd`` for this process: a finder at
the front of ``sys.meta_path`` that answers for ``autograd`` and ``autograd.*`` with the compat
modules themselves (the same module objects, so ``autograd.numpy is
wengert.compat.autograd.numpy``). Packages built on autograd's ``extend`` (``autograd_gamma``)
then run unchanged: their primitives and rules become wengert's."""
import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings

__all__ = ["install", "uninstall", "installed"]

ALIASES = {"autograd": "wengert.compat.autograd"}


def _target(fullname):
    top, dot, rest = fullname.partition(".")
    base = ALIASES.get(top)
    return None if base is None else base + dot + rest


class _Loader(importlib.abc.Loader):
    def __init__(self, target):
        self.target = target

    def create_module(self, spec):
        return importlib.import_module(self.target)

    def exec_module(self, module):
        pass  # the compat module ran when it was imported under its own name


class AutogradFinder(importlib.abc.MetaPathFinder):
    """Finds ``autograd`` and its submodules in wengert.compat."""

    def find_spec(self, fullname, path=None, target=None):
        real = _target(fullname)
        if real is None:
            return None
        try:
            found = importlib.util.find_spec(real)
        except ModuleNotFoundError:
            found = None
        if found is None:
            return None  # not part of autograd's public tree: ModuleNotFoundError as usual
        spec = importlib.machinery.ModuleSpec(fullname, _Loader(real),
                                              is_package=found.submodule_search_locations
                                              is not None)
        return spec


_FINDER = AutogradFinder()


def installed():
    """Whether ``import autograd`` resolves to wengert in this process."""
    return _FINDER in sys.meta_path


def install():
    """Make ``import autograd`` (and its submodules) give wengert's compat tree in this
    process. A real autograd imported before is dropped from
    ``sys.modules`` (with a warning): modules that already hold it keep it."""
    if installed():
        return
    stale = [m for m in sys.modules if _target(m) is not None
             and not getattr(sys.modules[m], "__name__", "").startswith("wengert.")]
    if stale:
        warnings.warn("autograd was imported before wengert.compat.autograd.install(): modules "
                      "that imported it keep the real one; install first", stacklevel=2)
        for m in stale:
            del sys.modules[m]
    sys.meta_path.insert(0, _FINDER)


def uninstall():
    """Undo ``install``: ``import autograd`` finds the real one again (if installed)."""
    if installed():
        sys.meta_path.remove(_FINDER)
    for m in [m for m in sys.modules if _target(m) is not None]:
        if getattr(sys.modules[m], "__name__", "").startswith("wengert."):
            del sys.modules[m]
