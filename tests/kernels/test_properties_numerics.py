"""Numerics at the edges: NaN/Inf through Pad and Conv, integers in Pad, float16 reductions.

Pad copies elements, so its output must be bit-identical to a reference built from the input's
bits (NaN payloads and -0.0 included).  Conv is arithmetic, so NaN and ±Inf must land exactly
where an IEEE float64 reference loop puts them.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hostile.cases import KNOWN_GAPS

from padconv_cli.errors import PadconvError
from padconv_cli.kernels.conv import conv
from padconv_cli.kernels.pad import coerce_constant_value, pad

NUMPY_MODES = {"constant": "constant", "reflect": "reflect", "edge": "edge", "wrap": "wrap"}
UINT_OF = {2: np.uint16, 4: np.uint32, 8: np.uint64}


def known_gap(function):
    """xfail(strict=True) for a test listed in KNOWN_GAPS (tests/hostile/cases.py), so that a
    fix is noticed; the documentation lists the same gaps."""
    reason = KNOWN_GAPS.get(function.__name__)
    return pytest.mark.xfail(strict=True, reason=reason)(function) if reason else function


def special_floats(dtype) -> np.ndarray:
    """A 3x4 block of NaNs with payloads and signs, ±Inf, -0.0, extremes and ordinary values."""
    dt = np.dtype(dtype)
    uint = UINT_OF[dt.itemsize]
    info = np.finfo(dt)
    exponent_bits = {2: 0x7C00, 4: 0x7F800000, 8: 0x7FF0000000000000}[dt.itemsize]
    sign_bit = 1 << (8 * dt.itemsize - 1)
    payload_nan = np.array([exponent_bits | 1], dtype=uint).view(dt)[0]  # signalling, payload 1
    negative_nan = np.array([exponent_bits | sign_bit | 5], dtype=uint).view(dt)[0]
    values = [
        np.nan,
        payload_nan,
        negative_nan,
        np.inf,
        -np.inf,
        -0.0,
        0.0,
        info.max,
        -info.max,
        info.tiny,
        info.smallest_subnormal,
        1.5,
    ]
    return np.array(values, dtype=dt).reshape(3, 4)


def bits(array: np.ndarray) -> np.ndarray:
    return array.view(UINT_OF[array.dtype.itemsize])


@known_gap
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("mode", list(NUMPY_MODES))
def test_pad_passes_nan_inf_bits_unchanged(dtype, mode):
    data = special_floats(dtype)
    widths = [(1, 2), (2, 3)]
    pads = [widths[0][0], widths[1][0], widths[0][1], widths[1][1]]
    result = pad(data, pads, mode=mode)
    assert result.dtype == data.dtype
    expected = np.pad(bits(data), widths, mode=NUMPY_MODES[mode])
    np.testing.assert_array_equal(bits(result), expected)


@known_gap
@pytest.mark.parametrize("fill", ["nan", "inf", "-inf", "-0.0"])
def test_pad_fills_with_nan_or_inf_constants(fill):
    data = special_floats("float32")
    result = pad(data, [1, 1, 1, 1], coerce_constant_value(float(fill), data.dtype))
    np.testing.assert_array_equal(bits(result[1:-1, 1:-1]), bits(data))
    border = np.concatenate([result[0], result[-1], result[1:-1, 0], result[1:-1, -1]])
    np.testing.assert_array_equal(bits(border), bits(np.full(border.shape, float(fill), "f4")))


def reference_conv(x, w, b, strides, pads, dilations, group):
    """Direct float64 loop of the Conv formula (2 spatial axes): IEEE in every product/sum."""
    n_batch, channels, height, width = x.shape
    m_out, c_per_group, kh, kw = w.shape
    xp = np.pad(x.astype(np.float64), [(0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])])
    out_h = (xp.shape[2] - dilations[0] * (kh - 1) - 1) // strides[0] + 1
    out_w = (xp.shape[3] - dilations[1] * (kw - 1) - 1) // strides[1] + 1
    y = np.zeros((n_batch, m_out, out_h, out_w))
    per_group = m_out // group
    with np.errstate(invalid="ignore", over="ignore"):
        for n, m, i, j in itertools.product(
            range(n_batch), range(m_out), range(out_h), range(out_w)
        ):
            total = 0.0 if b is None else float(b[m])
            first_channel = (m // per_group) * c_per_group
            for c, p, q in itertools.product(range(c_per_group), range(kh), range(kw)):
                source = xp[
                    n,
                    first_channel + c,
                    i * strides[0] + p * dilations[0],
                    j * strides[1] + q * dilations[1],
                ]
                total += source * float(w[m, c, p, q])
            y[n, m, i, j] = total
    return y


def assert_same_specials(result: np.ndarray, reference: np.ndarray) -> None:
    """NaN where the reference has NaN, the same signed Inf where it has Inf, close elsewhere."""
    np.testing.assert_array_equal(np.isnan(result), np.isnan(reference))
    np.testing.assert_array_equal(np.isposinf(result), np.isposinf(reference))
    np.testing.assert_array_equal(np.isneginf(result), np.isneginf(reference))
    finite = np.isfinite(reference)
    np.testing.assert_allclose(result[finite], reference[finite], rtol=1e-5, atol=1e-5)


# (w shape, group, strides, pads, dilations): one of each kernel path (general, pointwise,
# depthwise with stride 1 and with stride 2) plus dilation.
CONV_LAYOUTS = {
    "general": ((3, 2, 3, 3), 1, (1, 1), (1, 1, 1, 1), (1, 1)),
    "pointwise": ((3, 2, 1, 1), 1, (1, 1), (0, 0, 0, 0), (1, 1)),
    "depthwise": ((2, 1, 3, 3), 2, (1, 1), (1, 1, 1, 1), (1, 1)),
    "depthwise-strided": ((2, 1, 3, 3), 2, (2, 2), (1, 0, 1, 0), (1, 1)),
    "dilated": ((2, 2, 2, 2), 1, (1, 2), (0, 1, 2, 0), (2, 1)),
}


def _specials_in_x(x, w):
    x[0, 0, 2, 2] = np.nan
    x[0, 1, 0, 4] = np.inf
    x[0, 1, 5, 1] = -np.inf
    x[0, 1, 5, 2] = np.inf  # +Inf and -Inf in one window: NaN
    w[..., 0, 0] = 0.0  # Inf * 0: NaN where a window's first tap meets an Inf


def _nan_in_w(x, w):
    w[0, 0, 0, 0] = np.nan


def _inf_in_w(x, w):
    w[-1, -1, -1, -1] = -np.inf


SPECIAL_PLACEMENTS = {"x": _specials_in_x, "w-nan": _nan_in_w, "w-inf": _inf_in_w}


@known_gap
@pytest.mark.parametrize("layout", list(CONV_LAYOUTS))
@pytest.mark.parametrize("placement", list(SPECIAL_PLACEMENTS))
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_conv_propagates_nan_and_inf_as_ieee(layout, placement, dtype):
    w_shape, group, strides, pads, dilations = CONV_LAYOUTS[layout]
    rng = np.random.default_rng(7)
    x = rng.uniform(0.5, 1.5, (1, 2, 7, 6)).astype(dtype)
    w = rng.uniform(0.5, 1.5, w_shape).astype(dtype)
    b = rng.uniform(-1, 1, w_shape[0]).astype(dtype)
    SPECIAL_PLACEMENTS[placement](x, w)
    attributes = dict(strides=strides, pads=pads, dilations=dilations, group=group)
    with np.errstate(invalid="ignore", over="ignore"):
        result = conv(x, w, b, **attributes)
    assert result.dtype == x.dtype
    assert_same_specials(result, reference_conv(x, w, b, strides, pads, dilations, group))


@known_gap
def test_conv_nan_bias_reaches_every_output_of_its_channel():
    x = np.ones((1, 1, 4, 4), np.float32)
    w = np.ones((2, 1, 3, 3), np.float32)
    result = conv(x, w, np.array([np.nan, 1.0], np.float32))
    assert np.isnan(result[0, 0]).all()
    np.testing.assert_array_equal(result[0, 1], np.full((2, 2), 10.0, np.float32))


INT_TYPES = ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64"]


@known_gap
@pytest.mark.parametrize("dtype", INT_TYPES)
@pytest.mark.parametrize("mode", list(NUMPY_MODES))
def test_pad_keeps_integer_values_and_dtype(dtype, mode):
    info = np.iinfo(dtype)
    data = np.array([[info.min, info.max, info.max - 1], [info.min + 1, 0, 1]], dtype=dtype)
    fill = coerce_constant_value(int(info.max), dtype) if mode == "constant" else None
    result = pad(data, [1, 2, 2, 1], fill, mode=mode)
    assert result.dtype == data.dtype
    kwargs = {"constant_values": info.max} if mode == "constant" else {}
    np.testing.assert_array_equal(result, np.pad(data, [(1, 2), (2, 1)], mode, **kwargs))


@known_gap
def test_pad_crop_keeps_int64_values_beyond_float64_precision():
    data = np.array([2**63 - 1, 2**53 + 1, -(2**63)], dtype=np.int64)
    result = pad(data, [-1, 2], coerce_constant_value(2**62 + 1, np.int64))
    assert result.tolist() == [2**53 + 1, -(2**63), 2**62 + 1, 2**62 + 1]


@known_gap
@pytest.mark.parametrize(
    ("value", "dtype"),
    [
        ("300", "int8"),
        (300, "int8"),
        ("-1", "uint8"),
        (-1, "uint8"),
        ("1.5", "int32"),
        (1.5, "int32"),
        ("nan", "int64"),
        (float("nan"), "int64"),
        ("inf", "int16"),
        (str(2**64), "uint64"),
        (2**63, "int64"),
        ("1e3", "int8"),
        (np.float64(2.5), "uint16"),
    ],
)
def test_pad_refuses_constant_outside_integer_dtype(value, dtype):
    data = np.zeros((2, 2), dtype=dtype)
    with pytest.raises(PadconvError):
        coerce_constant_value(value, dtype)
    with pytest.raises(PadconvError):
        pad(data, [1, 1, 1, 1], value)


def _cancelling_reduction(channels: int, kernel: int) -> tuple[np.ndarray, np.ndarray]:
    """X of 100s, W of +1 on the first half of the channels and -1 on the second: every
    partial sum over the first half exceeds float16's 65504, the total is 0."""
    x = np.full((1, channels, kernel, kernel), 100.0, np.float16)
    w = np.ones((1, channels, kernel, kernel), np.float16)
    w[:, channels // 2 :] = -1.0
    return x, w


@known_gap
@pytest.mark.parametrize(("channels", "kernel"), [(2048, 1), (512, 3)])
def test_float16_conv_does_not_saturate_on_long_reductions(channels, kernel):
    x, w = _cancelling_reduction(channels, kernel)
    result = conv(x, w)
    reference = conv(x.astype(np.float32), w.astype(np.float32)).astype(np.float16)
    assert result.dtype == np.float16
    assert np.isfinite(result).all(), result
    np.testing.assert_array_equal(result, reference)


@known_gap
@pytest.mark.parametrize(("channels", "kernel", "group"), [(4096, 1, 1), (1024, 2, 1), (2, 46, 2)])
def test_float16_conv_long_reduction_is_accurate(channels, kernel, group):
    x = np.ones((1, channels, kernel, kernel), np.float16)
    w = np.ones((group, channels // group, kernel, kernel), np.float16)
    result = conv(x, w, group=group)
    terms = channels // group * kernel * kernel
    np.testing.assert_array_equal(result, np.full(result.shape, terms, np.float16))
