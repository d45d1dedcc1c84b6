"""``autograd.scipy.integrate``: ``odeint`` is ``wengert.scipy.integrate.odeint`` (adjoint
derivatives in ``y0``, the times, ``args`` and what the right-hand side closes over)."""

__all__ = ["odeint"]


def odeint(func, y0, t, args=(), **kwargs):
    """``scipy.integrate.odeint``, differentiable (wengert's own solver rule)."""
    try:
        from ....scipy import integrate  # lazy: SciPy's integrators load on first use
    except ImportError as e:
        raise NotImplementedError(
            "autograd.scipy.integrate.odeint needs wengert.scipy.integrate, which this "
            "wengert does not have yet; upgrade wengert, or integrate with a fixed-step "
            "method written in autograd.numpy") from e
    return integrate.odeint(func, y0, t, args=args, **kwargs)
