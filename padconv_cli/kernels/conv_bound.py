"""The dot-product error bound that judges a Conv output element by element.

An output element sums ``n = C/group * prod(kernel_shape)`` products; in any order its error
is at most ``gamma_n * S``, ``gamma_n = n*u / (1 - n*u)``, ``u = eps/2``, ``S = sum(|x| * |w|)``
over its receptive field (Higham, *Accuracy and Stability of Numerical Algorithms*, 3.1), so
two correct orders differ by up to about ``n * eps * S``: far more than ``rtol * |y|`` next to
zero.  The rule: ``|a - b| <= atol + rtol * |ref| + c * n * eps * S``, ``c = CONV_BOUND_C``
(2: covering the bias and the ``1/(1 - n*u)`` factor), ``S = conv(|X|, |W|) + |B|`` in float64,
``eps`` the element type's.  Loose but honest for float16/bfloat16, whose accumulation type the
spec leaves open (onnxruntime keeps float16 partial sums on some paths); a wrong tap is still
of the order of ``S / n``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from padconv_cli.dtypes import element_kind, float_info

CONV_BOUND_C = 2.0


def accumulation_eps(dtype: Any) -> float:
    """Machine epsilon of the element type (float16 9.8e-4, bfloat16 7.8e-3, float32 1.2e-7,
    float64 2.2e-16); any other type counts as float32."""
    dtype = np.dtype(dtype)
    if element_kind(dtype) not in ("float", "complex"):
        dtype = np.dtype(np.float32)
    return float(float_info(dtype).eps)


def terms_per_output(w_shape: tuple[int, ...], group: int = 1) -> int:
    """``n = C/group * prod(kernel_shape)`` = ``W.shape[1] * prod(W.shape[2:])``."""
    return int(w_shape[1]) * math.prod(int(k) for k in w_shape[2:])


def magnitude_sums(x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None, *,
                   plan: Any = None, **attributes: Any) -> np.ndarray:
    """``S = conv(|X|, |W|) + |B|`` in float64: per output element, ``sum(|x| * |w|)`` over
    its receptive field (plus ``|b|``), with Conv's ``attributes`` (or the call's ``plan``)."""
    from padconv_cli.kernels.conv import conv, conv_planned

    wide = [None if a is None else np.abs(np.asarray(a).astype(np.float64)) for a in (x, w, b)]
    with np.errstate(invalid="ignore", over="ignore"):
        return conv(*wide, **attributes) if plan is None else conv_planned(plan, *wide)


def conv_error_bound(x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None, *,
                     plan: Any = None, **attributes: Any) -> np.ndarray:
    """``c * n * eps * S`` per output element (module docstring), ``eps`` of X's type
    (:func:`accumulation_eps`), ``S`` from Conv's ``attributes`` or the call's ``plan``."""
    eps = accumulation_eps(np.asarray(x).dtype)
    n = terms_per_output(np.asarray(w).shape)
    return CONV_BOUND_C * n * eps * magnitude_sums(x, w, b, plan=plan, **attributes)
