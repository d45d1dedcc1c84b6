"""One lowering fact per primitive (issue 31 part 2): ``prim.lowering``, declared with the
primitive, is what every code writer reads -- no flags assigned after declaration, no
``getattr`` probes, no closure inspection to find an operator -- and one table
(``OPERATOR_FORMS``) says how each Python operator is written."""
import importlib
import operator
import pathlib
import pkgutil
import re

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp
from wengert.core import Primitive
import wengert.rules
from wengert.rules import arithmetic, indexing, logic, shape, special_base
from wengert.rules.lowering import OPERATOR_FORMS, Lowering, lowering_of, python_operator

PKG = pathlib.Path(wg.__file__).resolve().parent
OLD_FACTS = ("numba_scalar", "numba_form", "gather_at_index", "scatter_into_zeros",
             "gather_flat", "flat_view", "python_operator")


def test_no_lowering_flag_is_an_attribute_any_more():
    """The old facts are gone as attributes (set after declaration or probed by getattr)."""
    pat = re.compile(r"(\.(%s)\b\s*(=|,))|getattr\([^)]*[\"'](%s)[\"']" % (
        "|".join(OLD_FACTS), "|".join(OLD_FACTS)))
    hits = [f"{p.relative_to(PKG)}:{k + 1}" for p in PKG.rglob("*.py")
            for k, line in enumerate(p.read_text().splitlines()) if pat.search(line)]
    assert hits == []


def test_every_lowering_is_a_record_and_declared_with_its_primitive():
    mods = [importlib.import_module(f"wengert.rules.{m.name}")
            for m in pkgutil.iter_modules(wengert.rules.__path__)]
    prims = {id(p): p for m in mods for p in vars(m).values() if isinstance(p, Primitive)}
    prims = list(prims.values()) + list(logic.LOGIC.values())
    assert len(prims) > 100
    for p in prims:
        assert p.lowering is None or type(p.lowering) is Lowering, p.name


def test_roles_and_forms_are_where_the_rules_are():
    assert shape.reshape.lowering.role == "flat_view"
    assert indexing.getitem_basic.lowering.role == "gather_at_index"
    assert indexing.scatter_basic.lowering.role == "scatter_into_zeros"
    assert indexing.gather.lowering.role == "gather_flat"
    for p in (shape.reshape, shape.sum_, shape.transpose, shape.broadcast_to, shape.as_float,
              indexing.getitem_basic, indexing.scatter_basic):
        assert callable(p.lowering.array), p.name
    assert special_base.erf.lowering.scalar("x") == "math.erf(x)"
    assert special_base.xlogy.lowering.scalar("a", "b").endswith("a * np.log(b))")
    assert wnp.sin.lowering is None and lowering_of(wnp.sin) == Lowering()  # its ufunc is enough


def test_operators_are_declared_not_read_off_closures():
    # the implementation is the operator itself, or tries it first and falls back to NumPy
    assert python_operator(arithmetic.add) is operator.add is arithmetic.add.impl
    assert python_operator(arithmetic.divide) is operator.truediv
    assert arithmetic.divide.impl is not operator.truediv
    assert python_operator(arithmetic.absolute) is abs
    assert python_operator(logic.LOGIC["lt"]) is operator.lt
    assert python_operator(wnp.sin) is None
    for op, form in OPERATOR_FORMS.items():
        assert form.arity in (1, 2)
        if form.ufunc is not None:  # NumPy runs the operator on an ndarray as this ufunc
            a = np.array([1.5, -2.0, 3.0])
            args = (a,) if form.arity == 1 else (a, np.array([0.5, 2.0, -1.0]))
            np.testing.assert_array_equal(op(*args), form.ufunc(*args))


def test_a_closure_over_an_operator_is_a_call_not_an_operator():
    """A user's implementation that closes over ``operator.truediv`` and ``np.divide`` is not
    taken for division (the old closure inspection wrote it ``a / b``): it is called."""
    def make(op, np_op):
        def impl(x, y):
            return np_op(x, y) + 0.0 * op(1.0, 1.0)
        return impl
    p = wg.primitive(make(operator.truediv, np.divide), name="mydiv", broadcasting=True)
    assert p.lowering is None
    src = wg.compile(lambda x, y: p(x, y) + 1.0, fuse=False).source(1.5, 2.0)
    assert "mydiv(" in src and " / " not in src


def test_bad_lowerings_raise_at_declaration():
    with pytest.raises(ValueError, match="OPERATOR_FORMS"):
        Lowering(operator=np.add)
    with pytest.raises(ValueError, match="roles"):
        Lowering(role="gather")


def test_a_user_primitive_fuses_by_its_scalar_form():
    """A SciPy ufunc declared with a scalar form runs inside the kernel, by that form."""
    pytest.importorskip("numba")
    import scipy.special as sp
    from wengert.rules.elementwise import elementwise
    p = elementwise(sp.cbrt, lambda ans, x: (1.0 / (3.0 * ans * ans),), name="my_cbrt",
                    registry={}, lowering=Lowering(scalar=lambda x: f"np.cbrt({x})"))
    x = np.linspace(0.5, 2.0, 30)
    f = wg.compile(lambda x: wnp.sum(wnp.sin(p(x * 2.0) + x) * 2.0), fuse=True)
    np.testing.assert_allclose(f(x), np.sum(np.sin(np.cbrt(x * 2.0) + x) * 2.0), rtol=1e-13)
    assert "np.cbrt(" in " ".join(f.program(x).kernel_sources)
