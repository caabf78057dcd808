"""QLinearConv's requantization, exactly rounded.

``y = saturate(round_half_to_even(acc * x_scale * w_scale[m] / y_scale) + y_zero_point)`` with
the real-number value of the product: the scales are float32 numbers, ``acc`` an integer, and
the quotient is rounded once, to the nearest integer, ties to even.

Why float64 alone is not enough. ``x_scale * w_scale`` is exact in float64 (two 24-bit
significands make at most 48 bits), but the division by ``y_scale`` and the product with
``acc`` (up to about 2**40) are each rounded: ``fl(acc * fl(xs*ws/ys))`` differs from the real
value by up to ``|v| * 2**-52``. When the real value is a tie (``k + 1/2``: common with power-of-
two scales) or within that distance of one, the float64 value may land on the wrong side.

The argument used here. Let ``f = fl64(F)`` with ``F = xs*ws/ys`` the exact rational
(:class:`fractions.Fraction` of the three float32 values, per output channel), and
``e = fl64(acc * f)``. Then ``|e - v| <= |v| * (2**-53 + 2**-53 + 2**-106) < |v| * 2.3e-16``
(``acc`` is an exact float64 integer below 2**53). So if ``e`` is farther than
``|e| * 4.5e-16`` from every half-integer, ``e`` and ``v`` round to the same integer and
``rint(e)`` is the result. The other elements (ties, and the rare ones within a few units in
the last place of a tie) are decided in exact integer arithmetic: with ``F = p / q``,
``acc * p = floor * q + rest`` (Python integers) and the tie rule compares ``2 * rest`` with
``q``. Values far beyond the output range saturate without either step mattering.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

CLOSE_TO_TIE = 4.5e-16
"""Relative distance to a half-integer below which an element is decided exactly."""

EXACT_FLOAT64_INTEGER = 2**53


def channel_multipliers(x_scale: float, w_scales: np.ndarray, y_scale: float
                        ) -> list[Fraction]:
    """The exact ``x_scale * w_scale[m] / y_scale`` of the float32 values, per channel."""
    xs, ys = Fraction(float(x_scale)), Fraction(float(y_scale))
    return [xs * Fraction(float(ws)) / ys for ws in np.asarray(w_scales).reshape(-1)]


def requantize(acc: np.ndarray, multipliers: list[Fraction], y_zero_point: int,
               out_dtype: np.dtype) -> np.ndarray:
    """``saturate(round_half_even(acc[n, m, ...] * multipliers[m]) + y_zero_point)`` exactly,
    for an int64 ``acc`` of shape ``(N, M, ...)`` (module docstring); a single multiplier
    applies to every channel."""
    info = np.iinfo(out_dtype)
    m = acc.shape[1]
    factors = multipliers * m if len(multipliers) == 1 else multipliers
    floats = np.array([float(f) for f in factors], np.float64).reshape(
        (1, m) + (1,) * (acc.ndim - 2))
    estimate = acc.astype(np.float64) * floats
    rounded = np.rint(estimate)
    low, high = info.min - y_zero_point, info.max - y_zero_point
    distance = np.abs(np.abs(estimate - np.floor(estimate)) - 0.5)
    unsure = (distance <= np.abs(estimate) * CLOSE_TO_TIE) & (estimate > low - 1) & \
        (estimate < high + 1)
    unsure |= np.abs(acc) >= EXACT_FLOAT64_INTEGER
    if unsure.any():
        rounded[unsure] = _exact_rounding(acc, factors, unsure)
    return (np.clip(rounded, low, high) + y_zero_point).astype(out_dtype)


def requantize_int32(acc: np.ndarray, bias: np.ndarray | None, x_scale: float,
                     w_scales: np.ndarray, y_scale: float, y_zero_point: int,
                     out_dtype: np.dtype) -> np.ndarray:
    """:func:`requantize` of ``acc + bias[m]`` for an int32 ``acc`` (exact sums) and an int32
    bias, with the float64 step in the native core: the same estimate, the same test for the
    elements near a tie, which are then decided here exactly (:func:`settle_near_ties`)."""
    from padconv_cli.kernels import native

    floats = float64_multipliers(x_scale, w_scales, y_scale, acc.shape[1])
    y = np.empty(acc.shape, out_dtype)
    unsure = np.zeros(acc.shape, np.uint8)
    bias = None if bias is None else np.ascontiguousarray(bias, dtype=np.int32)
    native.extension().requantize(np.ascontiguousarray(acc), bias, floats, int(y_zero_point),
                                  y, unsure)
    return settle_near_ties(y, unsure, acc, bias, x_scale, w_scales, y_scale, y_zero_point)


def float64_multipliers(x_scale: float, w_scales: np.ndarray, y_scale: float, m: int
                        ) -> np.ndarray:
    """``f[m] = fl64(fl64(xs * ws[m]) / ys)`` of the float32 scales, which is ``fl64(F[m])``:
    the product of two float32 values is exact in float64, so only the division rounds."""
    scales = np.asarray(w_scales, np.float32).reshape(-1).astype(np.float64)
    if scales.size != m:
        scales = np.full(m, scales[0])
    return float(np.float32(x_scale)) * scales / float(np.float32(y_scale))


def settle_near_ties(y: np.ndarray, unsure: np.ndarray, acc: np.ndarray,
                     bias: np.ndarray | None, x_scale: float, w_scales: np.ndarray,
                     y_scale: float, y_zero_point: int) -> np.ndarray:
    """``y`` (requantized from the float64 estimate) with each element marked in ``unsure``
    (within ``4.5e-16 * |estimate|`` of a half-integer) replaced by its exactly rounded value
    of ``(acc + bias[m]) * x_scale * w_scale[m] / y_scale``."""
    if not unsure.any():
        return y
    m = acc.shape[1]
    scales = np.broadcast_to(np.asarray(w_scales, np.float32).reshape(-1), (m,))
    marked = unsure.view(bool)
    channels = np.nonzero(marked)[1]
    values = acc[marked].astype(np.int64)
    if bias is not None:
        values += np.asarray(bias, np.int64)[channels]
    info = np.iinfo(y.dtype)
    distinct = np.unique(channels)
    factors = {int(c): f for c, f in zip(
        distinct, channel_multipliers(x_scale, scales[distinct], y_scale), strict=True)}
    exact = _exact_values(values, channels, factors)
    y[marked] = (np.clip(exact, info.min - y_zero_point, info.max - y_zero_point)
                 + y_zero_point).astype(y.dtype)
    return y


def _exact_rounding(acc: np.ndarray, factors: list[Fraction], unsure: np.ndarray
                    ) -> np.ndarray:
    """``round_half_even(acc * factor[m])`` in Python integers for the ``unsure`` elements,
    once per distinct ``(acc, m)``; huge values are clipped to a float64 far outside any
    output range."""
    return _exact_values(acc[unsure], np.nonzero(unsure)[1], factors)


def _exact_values(values: np.ndarray, channels: np.ndarray,
                  factors: list[Fraction] | dict[int, Fraction]) -> np.ndarray:
    """``round_half_even(values[i] * factors[channels[i]])`` exactly, once per distinct pair
    (values of 2**60 or more clipped to 2**60, far outside any output range)."""
    pairs, inverse = np.unique(np.stack([values, channels]), axis=1, return_inverse=True)
    results = np.empty(pairs.shape[1], np.float64)
    for index, (value, channel) in enumerate(pairs.T):
        factor = factors[int(channel)]
        floor, rest = divmod(int(value) * factor.numerator, factor.denominator)
        twice = 2 * rest
        if twice > factor.denominator or (twice == factor.denominator and floor % 2):
            floor += 1
        results[index] = float(max(-2**60, min(2**60, floor)))
    return results[inverse.reshape(-1)]
