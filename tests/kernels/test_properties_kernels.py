"""Algebraic properties of the kernels, on random shapes and attributes (hypothesis).

* Pad then crop by the same pads is the identity, in every mode and for any axes subset.
* Conv is linear in X and in W, and the bias adds per output channel.
* Conv with a one-hot kernel (a single 1 at W[m, c, k]) gives, on output channel m, the
  strided, dilated, shifted crop of the padded input channel ``g*C/group + c`` (``g`` the group
  of m) and zero on every other output channel.
"""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from padconv_cli.kernels.conv import conv
from padconv_cli.kernels.pad import pad

PROPERTY_SETTINGS = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
PAD_DTYPES = ["float32", "float64", "int8", "uint16", "int64", "bool", "float16"]


@st.composite
def pad_cases(draw):
    """(data, pads, axes or None, mode) with pads that every mode accepts."""
    rank = draw(st.integers(1, 4))
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=rank, max_size=rank)))
    dtype = draw(st.sampled_from(PAD_DTYPES))
    seed = draw(st.integers(0, 2**32 - 1))
    data = np.random.default_rng(seed).integers(0, 100, shape).astype(dtype)
    mode = draw(st.sampled_from(["constant", "reflect", "edge", "wrap"]))
    use_axes = draw(st.booleans())
    axes = sorted(draw(st.sets(st.integers(0, rank - 1), min_size=1))) if use_axes else None
    padded_axes = axes if axes is not None else list(range(rank))
    # reflect needs pads < dim to stay within one reflection, as the ONNX reference allows
    limit = {axis: (shape[axis] - 1 if mode == "reflect" else 3) for axis in padded_axes}
    begins = [draw(st.integers(0, min(limit[a], 3))) for a in padded_axes]
    ends = [draw(st.integers(0, min(limit[a], 3))) for a in padded_axes]
    if axes is not None and draw(st.booleans()):
        axes = [a - rank for a in axes]  # negative axes count from the back
    return data, begins + ends, axes, mode


@PROPERTY_SETTINGS
@given(pad_cases())
def test_pad_then_crop_is_identity(case):
    data, pads, axes, mode = case
    padded = pad(data, pads, axes=axes, mode=mode)
    cropped = pad(padded, [-p for p in pads], axes=axes)
    assert cropped.dtype == data.dtype
    np.testing.assert_array_equal(cropped, data)


@st.composite
def conv_cases(draw):
    """Consistent (x_shape, w_shape, attributes) for 1 or 2 spatial axes."""
    spatial = draw(st.integers(1, 2))
    group = draw(st.integers(1, 3))
    c_per_group = draw(st.integers(1, 3))
    m_per_group = draw(st.integers(1, 2))
    kernel = [draw(st.integers(1, 3)) for _ in range(spatial)]
    dilations = [draw(st.integers(1, 2)) for _ in range(spatial)]
    strides = [draw(st.integers(1, 3)) for _ in range(spatial)]
    pads = [draw(st.integers(0, 2)) for _ in range(2 * spatial)]
    extent = [(k - 1) * d + 1 for k, d in zip(kernel, dilations, strict=True)]
    sizes = []
    for axis in range(spatial):
        low = max(1, extent[axis] - pads[axis] - pads[axis + spatial])
        sizes.append(draw(st.integers(low, low + 5)))
    x_shape = (draw(st.integers(1, 2)), group * c_per_group, *sizes)
    w_shape = (group * m_per_group, c_per_group, *kernel)
    attributes = dict(group=group, dilations=dilations, strides=strides, pads=pads)
    return x_shape, w_shape, attributes, draw(st.integers(0, 2**32 - 1))


def _random(rng, shape):
    return rng.standard_normal(shape)


@PROPERTY_SETTINGS
@given(conv_cases(), st.floats(-3, 3), st.floats(-3, 3))
def test_conv_is_linear_in_x(case, a, b):
    x_shape, w_shape, attributes, seed = case
    rng = np.random.default_rng(seed)
    x1, x2, w = _random(rng, x_shape), _random(rng, x_shape), _random(rng, w_shape)
    combined = conv(a * x1 + b * x2, w, **attributes)
    separate = a * conv(x1, w, **attributes) + b * conv(x2, w, **attributes)
    np.testing.assert_allclose(combined, separate, rtol=1e-9, atol=1e-9)


@PROPERTY_SETTINGS
@given(conv_cases(), st.floats(-3, 3), st.floats(-3, 3))
def test_conv_is_linear_in_w_and_bias_adds(case, a, b):
    x_shape, w_shape, attributes, seed = case
    rng = np.random.default_rng(seed)
    x, w1, w2 = _random(rng, x_shape), _random(rng, w_shape), _random(rng, w_shape)
    bias = _random(rng, (w_shape[0],))
    combined = conv(x, a * w1 + b * w2, bias, **attributes)
    separate = a * conv(x, w1, **attributes) + b * conv(x, w2, **attributes)
    bias_shape = (1, -1) + (1,) * (len(x_shape) - 2)
    np.testing.assert_allclose(combined, separate + bias.reshape(bias_shape), rtol=1e-9, atol=1e-9)


def _shifted_crop(x, attributes, channel, tap, out_spatial):
    """Xpad[:, channel, o*stride + tap*dilation] for every output position o."""
    spatial = x.ndim - 2
    pads = attributes["pads"]
    widths = [(0, 0), (0, 0)] + [(pads[i], pads[i + spatial]) for i in range(spatial)]
    padded = np.pad(x, widths)
    index = [slice(None), channel]
    for axis in range(spatial):
        start = tap[axis] * attributes["dilations"][axis]
        step = attributes["strides"][axis]
        index.append(slice(start, start + step * (out_spatial[axis] - 1) + 1, step))
    return padded[tuple(index)]


@PROPERTY_SETTINGS
@given(conv_cases(), st.data())
def test_conv_with_one_hot_kernel_is_a_shifted_crop(case, data):
    x_shape, w_shape, attributes, seed = case
    x = _random(np.random.default_rng(seed), x_shape)
    m = data.draw(st.integers(0, w_shape[0] - 1), label="m")
    c = data.draw(st.integers(0, w_shape[1] - 1), label="c")
    tap = tuple(data.draw(st.integers(0, k - 1), label="tap") for k in w_shape[2:])
    w = np.zeros(w_shape)
    w[(m, c, *tap)] = 1.0
    result = conv(x, w, **attributes)
    group_of_m = m // (w_shape[0] // attributes["group"])
    expected = _shifted_crop(x, attributes, group_of_m * w_shape[1] + c, tap, result.shape[2:])
    np.testing.assert_array_equal(result[:, m], expected)
    others = np.delete(result, m, axis=1)
    assert not others.any()
