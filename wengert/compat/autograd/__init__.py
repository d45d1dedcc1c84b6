"""autograd's public module tree on wengert's engines (issue 30; API.md §14).

``import wengert.compat.autograd as autograd`` is autograd's top-level namespace; after
``wengert.compat.autograd.install()`` (or under ``python -m wengert.compat.autograd script.py``)
``import autograd``, ``import autograd.numpy as np`` and every submodule resolve here, so a
program written for autograd runs unchanged. Each name maps onto wengert's own transforms and
rule record; where autograd's meaning differs from wengert's, autograd's is kept: an output of
size 1 is a scalar, the gradient in a complex input is the conjugate of ``wg.grad``'s steepest
ascent, and ``misc.flatten`` sorts dict keys (docs/coming-from-autograd.md).
"""
from . import builtins, core, differential_operators, extend, misc, numpy, scipy, \
    test_util, tracer, util, wrap_util  # noqa: F401
from ._install import install, installed, uninstall  # noqa: F401
from .builtins import dict, isinstance, list, tuple, type  # noqa: F401
from .core import primitive  # noqa: F401
from .differential_operators import (checkpoint, deriv, elementwise_grad, grad,  # noqa: F401
                                     grad_and_aux, grad_named, hessian, hessian_tensor_product,
                                     hessian_vector_product, holomorphic_grad, jacobian,
                                     make_ggnvp, make_hvp, make_jvp, make_vjp, multigrad_dict,
                                     tensor_jacobian_product, value_and_grad,
                                     vector_jacobian_product)
from .misc import fixed_points, optimizers  # noqa: F401

__version__ = "1.9.1"  # the autograd release whose public API this tree follows
