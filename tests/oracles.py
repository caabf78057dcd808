"""Oracles shared by the tests: a float64 Conv written straight from the spec, and its error bound.

A floating-point sum of products depends on the order of its terms, and numpy's BLAS picks a
different order (AVX2, AVX-512 kernels) on different CPUs.  So a Conv result is compared with the
float64 oracle through the dot-product error bound, never a bare relative tolerance: for an
output ``y = b + sum_i x_i * w_i`` of ``n`` products accumulated in a type with machine epsilon
``eps``, ``|fl(y) - y| <= gamma(n + 1) * (|b| + sum_i |x_i * w_i|)`` with
``gamma(k) = k*u / (1 - k*u)`` and ``u = eps / 2`` (Higham, Accuracy and Stability of Numerical
Algorithms, section 3.1).  The bound here uses ``eps`` instead of ``u`` (a factor 2 of margin,
which also covers ``1 / (1 - k*u)``), adds the float64 oracle's own error the same way, and one
rounding of the result when it is stored in a narrower type than it was accumulated in.
"""

from __future__ import annotations

import itertools
import math

import ml_dtypes
import numpy as np


def fp16_spec_example():
    """The spec's 3x3 example in float16, with a bias: (X, W, B, expected), each float16 sum
    exact (multiples of 1/8 well inside float16's precision), so any summation order gives
    these bits; run it with ``pads=[1, 1, 1, 1]``."""
    X = (np.arange(16, dtype=np.float16) * np.float16(0.5)).reshape(1, 1, 4, 4)
    W = np.full((1, 1, 3, 3), 0.25, dtype=np.float16)
    B = np.array([0.5], dtype=np.float16)
    expected = np.array(
        [[1.75, 2.75, 3.5, 2.75], [3.875, 6.125, 7.25, 5.375], [6.875, 10.625, 11.75, 8.375],
         [5.75, 8.75, 9.5, 6.75]], dtype=np.float16)[None, None]
    return X, W, B, expected


def resolve_pads(x_spatial, kernel, strides, dilations, auto_pad, pads):
    """Begin/end pads per axis, from the spec's auto_pad formulas (independent of the kernel)."""
    rank = len(x_spatial)
    if auto_pad == "NOTSET":
        pads = pads or [0] * (2 * rank)
        return list(pads[:rank]), list(pads[rank:])
    begins, ends = [], []
    for size, k, s, d in zip(x_spatial, kernel, strides, dilations, strict=True):
        if auto_pad == "VALID":
            begins.append(0)
            ends.append(0)
            continue
        out = math.ceil(size / s)
        total = max(0, (out - 1) * s + (k - 1) * d + 1 - size)
        small = total // 2
        if auto_pad == "SAME_UPPER":
            begins.append(small)
            ends.append(total - small)
        else:
            begins.append(total - small)
            ends.append(small)
    return begins, ends


def oracle_conv(X, W, B=None, *, auto_pad="NOTSET", dilations=None, group=1, pads=None,
                strides=None):
    """Direct loops over output positions and kernel offsets, accumulated in float64."""
    X = np.asarray(X, dtype=np.float64)
    W = np.asarray(W, dtype=np.float64)
    n, c = X.shape[:2]
    m, c_group = W.shape[:2]
    kernel = W.shape[2:]
    rank = len(kernel)
    strides = strides or [1] * rank
    dilations = dilations or [1] * rank
    begins, ends = resolve_pads(X.shape[2:], kernel, strides, dilations, auto_pad, pads)
    out_spatial = [
        (size + b + e - (k - 1) * d - 1) // s + 1
        for size, b, e, k, d, s in zip(
            X.shape[2:], begins, ends, kernel, dilations, strides, strict=True
        )
    ]
    Y = np.zeros((n, m, *out_spatial))
    m_group = m // group
    for image, out_channel in itertools.product(range(n), range(m)):
        first = (out_channel // m_group) * c_group
        for position in np.ndindex(*out_spatial):
            total = 0.0
            for offset in np.ndindex(*kernel):
                index = [
                    o * s + k * d - b
                    for o, s, k, d, b in zip(
                        position, strides, offset, dilations, begins, strict=True
                    )
                ]
                if all(0 <= i < size for i, size in zip(index, X.shape[2:], strict=True)):
                    column = X[(image, slice(first, first + c_group), *index)]
                    total += float(column @ W[(out_channel, slice(None), *offset)])
            Y[(image, out_channel, *position)] = total
    if B is not None:
        Y += np.asarray(B, dtype=np.float64).reshape((-1,) + (1,) * rank)
    return Y


def random_inputs(x_shape, w_shape, dtype=np.float32, seed=0, bias=True):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal(x_shape).astype(dtype)
    W = rng.standard_normal(w_shape).astype(dtype)
    B = rng.standard_normal(w_shape[0]).astype(dtype) if bias else None
    return X, W, B


def accumulation_dtype(dtype) -> np.dtype:
    """The type a Conv of ``dtype`` accumulates in: float64 for float64, else float32."""
    return np.dtype(np.float64) if np.dtype(dtype) == np.float64 else np.dtype(np.float32)


def conv_error_bound(X, W, B=None, *, result_dtype=None, reference=None, **attrs) -> np.ndarray:
    """Per-element bound on |conv(X, W, B) - oracle_conv(X, W, B)| from the dot-product rule.

    ``n = C/group * prod(kernel_shape)`` products plus the bias, accumulated with the epsilon of
    :func:`accumulation_dtype`; ``S = |B| + sum |x| * |w|`` over the receptive field is the
    oracle applied to absolute values.  ``reference`` replaces the loop oracle with another
    float64 Conv (padconv's own, for sizes where loops are too slow: only the magnitudes,
    not the values under test, come from it).  Bound: ``(n + 1) * (eps_acc + eps_64) * S`` plus one
    rounding ``eps_out * |y|`` when the result type is narrower than the accumulation type.

    This is the tests' own rule for padconv against the oracle, tighter than the library's
    :func:`padconv_cli.kernels.conv_bound.conv_error_bound` (``2 * n * eps(X) * S``),
    which judges any two implementations, peers that sum float16 in float16 included.  It is
    kept apart so that no test takes its tolerance from the code under test.
    """
    result_dtype = np.dtype(result_dtype if result_dtype is not None else np.asarray(X).dtype)
    reference = reference or oracle_conv
    W = np.asarray(W)
    n = int(np.prod(W.shape[1:]))
    magnitude = reference(np.abs(np.asarray(X, dtype=np.float64)),
                            np.abs(np.asarray(W, dtype=np.float64)),
                            None if B is None else np.abs(np.asarray(B, dtype=np.float64)),
                            **attrs)
    acc = accumulation_dtype(result_dtype)
    eps_acc = float(np.finfo(acc).eps)
    bound = (n + 1) * (eps_acc + float(np.finfo(np.float64).eps)) * magnitude
    if result_dtype.itemsize < acc.itemsize:
        eps_out = float(ml_dtypes.finfo(result_dtype).eps)
        exact = reference(*(None if t is None else np.asarray(t, dtype=np.float64)
                            for t in (X, W, B)), **attrs)
        bound = bound * (1 + eps_out) + eps_out * np.abs(exact)
    return bound


def assert_conv_within_bound(actual, X, W, B=None, *, expected=None, slack: float = 1.0,
                             reference=None, **attrs) -> None:
    """``actual`` equals the float64 oracle within :func:`conv_error_bound`, element by element.

    Non-finite oracle values must be matched exactly (NaN where NaN, the same infinity).
    ``expected`` may be another implementation's result instead of the oracle's; it then has
    an error of its own, and ``slack=2`` allows the two bounds added together.
    """
    actual = np.asarray(actual)
    if expected is None:
        expected = (reference or oracle_conv)(X, W, B, **attrs)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    got = actual.astype(np.float64)
    finite = np.isfinite(expected)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))
    np.testing.assert_array_equal(got[~finite & ~np.isnan(expected)],
                                  expected[~finite & ~np.isnan(expected)])
    bound = slack * conv_error_bound(X, W, B, result_dtype=actual.dtype, reference=reference,
                                     **attrs)
    error = np.abs(np.where(finite, got, 0.0) - np.where(finite, expected, 0.0))
    outside = finite & ~(error <= bound)
    if outside.any():
        worst = float(np.max(error[outside] / np.maximum(bound[outside], 1e-300)))
        raise AssertionError(f"{int(outside.sum())} of {outside.size} elements outside the "
                             f"dot-product bound; worst error/bound = {worst:.3g}")
