"""What the eval modules share: eager or compiled, and JSON conversions."""
import numpy as np

import wengert as wg


def maybe_compile(options, f, **kwargs):
    """``f`` itself (eager) or ``wg.compile(f)`` (``--compile``)."""
    return wg.compile(f, **kwargs) if options.compile else f


def array(x):
    return np.asarray(x, dtype=np.float64)


def to_float(x):
    return float(np.asarray(x))


def to_list(x):
    return np.asarray(x, dtype=np.float64).tolist()
