"""ONNX ``Conv`` (opsets 1, 11 and 22): the public kernel.

:func:`conv` checks the element types, plans (:mod:`padconv_cli.kernels.conv_plan`, re-exported
here: ``plan_conv`` and ``ConvPlan`` are public API) and hands the numbers to
:mod:`padconv_cli.kernels.conv_paths`; :func:`conv_planned` runs a plan made beforehand.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from padconv_cli.errors import UnsupportedDtypeError
from padconv_cli.kernels.conv_plan import AUTO_PAD_VALUES, ConvPlan, plan_conv

__all__ = ["AUTO_PAD_VALUES", "FLOAT_DTYPE_NAMES", "ConvPlan", "conv", "conv_planned",
           "plan_conv"]

FLOAT_DTYPE_NAMES = ("float16", "bfloat16", "float32", "float64")


def conv(
    X: np.ndarray,
    W: np.ndarray,
    B: np.ndarray | None = None,
    *,
    auto_pad: str = "NOTSET",
    dilations: Sequence[int] | None = None,
    group: int = 1,
    kernel_shape: Sequence[int] | None = None,
    pads: Sequence[int] | None = None,
    strides: Sequence[int] | None = None,
) -> np.ndarray:
    """ONNX Conv-22: ``Y[n, m, o] = B[m] + sum_{c, k} W[m, c, k] * Xpad[n, g*C/G + c, o*s + k*d]``.

    ``g = m // (M / group)``; ``Xpad`` is X zero-padded by the resolved pads. X, W and B must share
    one float dtype (float16, bfloat16, float32, float64); products are accumulated in float32
    (float64 for float64 inputs) and rounded once to the input dtype.
    """
    x, w, b = _float_inputs(X, W, B)
    plan = plan_conv(x.shape, w.shape, None if b is None else b.shape, auto_pad=auto_pad,
                     dilations=dilations, group=group, kernel_shape=kernel_shape, pads=pads,
                     strides=strides)
    from padconv_cli.kernels.conv_paths import convolve

    return convolve(plan, x, w, b)


def conv_planned(
    plan: ConvPlan, X: np.ndarray, W: np.ndarray, B: np.ndarray | None = None
) -> np.ndarray:
    """:func:`conv` with a plan made beforehand by :func:`plan_conv` for these shapes: the same
    element-type rules and result, without planning again."""
    x, w, b = _float_inputs(X, W, B)
    shapes = (x.shape, w.shape, None if b is None else b.shape)
    if shapes[:2] != (plan.x_shape, plan.w_shape):
        raise ValueError(f"the plan is for X {plan.x_shape} and W {plan.w_shape}, not {shapes}")
    from padconv_cli.kernels.conv_paths import convolve

    return convolve(plan, x, w, b)


# --- element types -------------------------------------------------------------------------


def _float_inputs(
    X: np.ndarray, W: np.ndarray, B: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Return X, W, B as arrays after checking they share one of Conv's float dtypes."""
    named = [("X", np.asarray(X)), ("W", np.asarray(W))]
    if B is not None:
        named.append(("B", np.asarray(B)))
    for name, array in named:
        if _dtype_name(array.dtype) not in FLOAT_DTYPE_NAMES:
            raise UnsupportedDtypeError(
                f"Conv takes float tensors ({', '.join(FLOAT_DTYPE_NAMES)}); got "
                f"{_dtype_label(array.dtype)} {name}; convert the tensor to a float type first"
            )
    if len({_dtype_name(array.dtype) for _, array in named}) > 1:  # byte order may differ
        listing = ", ".join(f"{name} {array.dtype.name}" for name, array in named)
        raise UnsupportedDtypeError(f"Conv inputs must share one dtype; got {listing}; "
                                    "convert the inputs to one dtype")
    return named[0][1], named[1][1], named[2][1] if B is not None else None


_DTYPE_NAMES: dict[np.dtype, str] = {}


def _dtype_name(dtype: np.dtype) -> str:
    """``dtype.name``, remembered (numpy computes it in Python on every access)."""
    name = _DTYPE_NAMES.get(dtype)
    if name is None:
        name = _DTYPE_NAMES[dtype] = dtype.name
    return name


def _dtype_label(dtype: np.dtype) -> str:
    """A readable name for a dtype in error messages (``string`` rather than ``<U5``)."""
    if dtype.kind in "US":
        return "string"
    if dtype.kind == "O":
        return "object"
    return dtype.name


