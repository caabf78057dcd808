"""The dot-product error bound that judges a ConvTranspose output element by element.

Each ConvTranspose output element is a sum of at most ``n = C/group * prod(kernel_shape)``
products (only the taps whose input position exists contribute) plus the bias. As for Conv
(:mod:`padconv_cli.kernels.conv_bound`), two correct implementations summing in different
orders differ by at most about ``2 * gamma_n * S``, so the rule is

    ``|a - b| <= atol + rtol * |ref| + c * n * eps * S``

with ``S = conv_transpose(|X|, |W|) + |B|`` in float64 with the same attributes, ``eps`` the
machine epsilon of the element type, and ``c = CONV_BOUND_C``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from padconv_cli.kernels.conv_bound import CONV_BOUND_C, accumulation_eps


def terms_per_output(x_shape: tuple[int, ...], w_shape: tuple[int, ...], group: int = 1) -> int:
    """``n = C/group * prod(kernel_shape)`` = ``X.shape[1] / group * prod(W.shape[2:])``."""
    return int(x_shape[1]) // int(group) * math.prod(int(k) for k in w_shape[2:])


def magnitude_sums(x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None, *,
                   plan: Any = None, **attributes: Any) -> np.ndarray:
    """``S = conv_transpose(|X|, |W|) + |B|`` in float64, per output element, with the call's
    ``attributes`` or its ``plan``."""
    from padconv_cli.kernels.conv_transpose import conv_transpose, conv_transpose_planned

    wide = [None if t is None else np.abs(np.asarray(t).astype(np.float64)) for t in (x, w, b)]
    with np.errstate(invalid="ignore", over="ignore"):
        if plan is not None:
            return conv_transpose_planned(plan, *wide)
        return conv_transpose(*wide, **attributes)


def conv_transpose_error_bound(x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None, *,
                               c: float = CONV_BOUND_C, dtype: Any = None, plan: Any = None,
                               **attributes: Any) -> np.ndarray:
    """``c * n * eps * S`` per output element (module docstring); ``dtype`` (default: X's)
    selects ``eps``."""
    x = np.asarray(x)
    eps = accumulation_eps(x.dtype if dtype is None else dtype)
    group = plan.group if plan is not None else attributes.get("group", 1)
    n = terms_per_output(x.shape, np.asarray(w).shape, group)
    return c * n * eps * magnitude_sums(x, w, b, plan=plan, **attributes)
