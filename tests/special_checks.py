"""Checks shared by the scipy.special test modules."""
import pytest

import wengert as wg


def assert_not_differentiated(name, arg, f, at=2.0):
    """Differentiating ``f`` in ``scipy.special.<name>``'s argument ``arg`` raises, naming
    both, in every engine: an order or a shape parameter never gets a silent zero."""
    msg = rf"scipy\.special\.{name} has no wengert derivative with respect to its argument '{arg}'"
    for run in (wg.grad(f), wg.derivative(f), wg.hessian(f), wg.compile(wg.grad(f))):
        with pytest.raises(NotImplementedError, match=msg):
            run(at)
