"""``python -m wengert.compat.autograd script.py [args]`` or ``-m module [args]``: run a
program with ``import autograd`` resolved to wengert (``-m pytest ...`` runs a test suite)."""
import os
import runpy
import sys

from ._install import install

USAGE = ("usage: python -m wengert.compat.autograd script.py [args...]\n"
         "       python -m wengert.compat.autograd -m module [args...]\n"
         "runs the program with `import autograd` resolved to wengert.compat.autograd")


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE, file=sys.stderr if not argv else sys.stdout)
        return 2 if not argv else 0
    install()
    if argv[0] == "-m":
        if len(argv) < 2:
            print(USAGE, file=sys.stderr)
            return 2
        module = argv[1]
        sys.argv = [module] + argv[2:]
        sys.path.insert(0, os.getcwd())
        runpy.run_module(module, run_name="__main__", alter_sys=True)
        return 0
    script = argv[0]
    if not os.path.exists(script):
        print(f"python -m wengert.compat.autograd: can't open file {script!r}", file=sys.stderr)
        return 2
    sys.argv = argv
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    runpy.run_path(script, run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main())
