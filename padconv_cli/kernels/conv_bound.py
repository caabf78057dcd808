"""The dot-product error bound that judges a Conv output element by element.

Each Conv output element is a sum of ``n = C/group * prod(kernel_shape)`` products (plus the
bias).  Summed in floating point with unit roundoff ``u = eps/2``, in any order, its error is
at most ``gamma_n * S`` with ``gamma_n = n*u / (1 - n*u)`` and ``S = sum(|x| * |w|)`` over its
receptive field (Higham, *Accuracy and Stability of Numerical Algorithms*, section 3.1).  Two
correct implementations that add in different orders (BLAS blocking, im2col, direct
loops) can therefore differ by up to about ``2 * gamma_n * S ~= n * eps * S``, which
for a 576-term sum that cancels is far more than ``rtol * |y|``: a bare relative tolerance
calls correct results wrong next to zero.  The rule used for Conv is

    ``|a - b| <= atol + rtol * |ref| + c * n * eps * S``

with ``c = CONV_BOUND_C`` (2: twice the two-sided worst case, covering the bias term and the
``1/(1 - n*u)`` factor), ``S = conv(|X|, |W|) + |B|`` computed in float64 with the same
attributes, and ``eps`` the machine epsilon of the element type.  For float16 and bfloat16
that is the honest rule, though loose: the specification does not say in which type sums are
accumulated, and onnxruntime's float16 Conv keeps partial sums in float16 on some paths
(padconv and onnx.reference accumulate in float32); a wrong tap or a missing product is
still of the order of ``S / n``.
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
                     c: float = CONV_BOUND_C, dtype: Any = None, plan: Any = None,
                     **attributes: Any) -> np.ndarray:
    """``c * n * eps * S`` per output element (module docstring); ``dtype`` (default: X's)
    selects ``eps`` through :func:`accumulation_eps`; ``S`` comes from Conv's ``attributes``
    or, when given, the call's ``plan`` (:func:`magnitude_sums`)."""
    x = np.asarray(x)
    eps = accumulation_eps(x.dtype if dtype is None else dtype)
    n = terms_per_output(np.asarray(w).shape)
    return c * n * eps * magnitude_sums(x, w, b, plan=plan, **attributes)
