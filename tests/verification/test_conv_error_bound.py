"""The Conv dot-product error bound: its formula, that it passes correct results whose sums
cancel, and that it still catches a wrong element."""

from __future__ import annotations

import itertools

import ml_dtypes
import numpy as np
import pytest

from padconv_cli.crosscheck import crosscheck, report_dict
from padconv_cli.kernels.conv import conv
from padconv_cli.onnx_nodes import kernel_call
from padconv_cli.ops import compute, plan_call
from padconv_cli.ops import error_bound as call_error_bound
from padconv_cli.verification.compare import compare_arrays
from padconv_cli.verification.conv_bound import (
    CONV_BOUND_C,
    accumulation_eps,
    conv_error_bound,
    terms_per_output,
)


def _cancelling_case(dtype=np.float32, channels=64, seed=0):
    """A 3x3 Conv of 64 channels whose outputs are sums of +- terms that nearly cancel."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((1, channels, 12, 12)).astype(dtype)
    w = rng.standard_normal((8, channels, 3, 3)).astype(dtype)
    return x, w


def _loop_sums(x, w, pads, group=1):
    """sum(|x| * |w|) over each output's receptive field, by loops (stride 1, no dilation)."""
    n, c, h, width = x.shape
    m, cg, kh, kw = w.shape
    padded = np.zeros((n, c, h + pads[0] + pads[2], width + pads[1] + pads[3]))
    padded[:, :, pads[0]:pads[0] + h, pads[1]:pads[1] + width] = np.abs(x.astype(np.float64))
    out = np.zeros((n, m, padded.shape[2] - kh + 1, padded.shape[3] - kw + 1))
    for b, o, i, j in itertools.product(*(range(s) for s in out.shape)):
        g = o // (m // group)
        window = padded[b, g * cg:(g + 1) * cg, i:i + kh, j:j + kw]
        out[b, o, i, j] = np.sum(window * np.abs(w[o].astype(np.float64)))
    return out


@pytest.mark.parametrize("group", [1, 2])
def test_the_bound_is_c_n_eps_times_the_magnitude_sums(group):
    x, w = _cancelling_case(channels=4)
    w = w[:, : 4 // group]
    pads = [1, 0, 2, 1]
    bound = conv_error_bound(x, w, pads=pads, group=group)
    n = (4 // group) * 9
    assert terms_per_output(w.shape, group) == n
    expected = CONV_BOUND_C * n * np.finfo(np.float32).eps * _loop_sums(x, w, pads, group)
    # sums of non-negative float64 terms cannot cancel: two summation orders differ by at most
    # n * eps_64 (about 8e-15 here) relatively, whatever kernel numpy picks
    np.testing.assert_allclose(bound, expected, rtol=1e-12, atol=0)


@pytest.mark.parametrize("attributes", [
    {"pads": [1, 0, 2, 1]},
    {"auto_pad": "SAME_UPPER", "strides": [2, 3]},
    {"auto_pad": "VALID", "dilations": [2, 1]},
])
def test_a_calls_bound_is_the_formula_with_or_without_its_plan(attributes):
    """A call's bound, from its plan (``--check``) or from its attributes (verify, audit), is
    ``c * n * eps * S`` with ``S`` over the receptive fields the resolved pads give."""
    x, w = _cancelling_case(channels=3)
    b = np.linspace(-1.0, 1.0, w.shape[0]).astype(np.float32)
    call = kernel_call("Conv", attributes, [x, w, b], opset=22)
    plan = plan_call(call)
    resolved = {"pads": list(plan.pads), "strides": list(plan.strides),
                "dilations": list(plan.dilations)}
    expected = conv_error_bound(x, w, b, **resolved)
    assert expected.shape == tuple(plan.output_shape)
    # sums of non-negative float64 terms cannot cancel (see the test above)
    np.testing.assert_allclose(call_error_bound(call, plan), expected, rtol=1e-12, atol=0)
    np.testing.assert_allclose(call_error_bound(call), expected, rtol=1e-12, atol=0)


def test_eps_is_the_element_types_own():
    """The spec does not fix the accumulation type: 16-bit sums may be kept in 16 bits."""
    assert accumulation_eps(np.float16) == 2.0**-10
    assert accumulation_eps(ml_dtypes.bfloat16) == 2.0**-7
    assert accumulation_eps(np.float32) == 2.0**-23
    assert accumulation_eps(np.float64) == 2.0**-52


def test_float16_sums_kept_in_float16_pass():
    """A float16 Conv summed in float16 (allowed by the spec) is within the bound."""
    x, w = _cancelling_case(np.float16, channels=16)
    ours = conv(x, w, pads=[1, 1, 1, 1])
    patches = np.lib.stride_tricks.sliding_window_view(
        np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1))), (3, 3), axis=(2, 3))
    half = np.zeros(ours.shape, np.float16)
    for channel in range(16):  # one float16 rounding per channel
        half += np.einsum("nhwij,mij->nmhw", patches[:, channel].astype(np.float32),
                          w[:, channel].astype(np.float32)).astype(np.float16)
    assert compare_arrays(half, ours, bound=conv_error_bound(x, w, pads=[1, 1, 1, 1])).passed


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_another_summation_order_passes_within_the_bound(dtype):
    """float32 sums of float64-exact products in reverse channel order: a correct result."""
    x, w = _cancelling_case(dtype)
    ours = conv(x, w, pads=[1, 1, 1, 1])
    other = conv(x[:, ::-1].copy(), w[:, ::-1].copy(), pads=[1, 1, 1, 1])
    bound = conv_error_bound(x, w, pads=[1, 1, 1, 1])
    assert compare_arrays(other, ours, bound=bound).passed


def test_a_wrong_element_is_still_caught():
    """Dropping the largest product from one sum is an error the bound does not excuse
    (the bound, 2 * 576 * eps * S, is about 0.05 here; that product is above 1)."""
    x, w = _cancelling_case()
    ours = conv(x, w, pads=[1, 1, 1, 1])
    wrong = ours.copy()
    products = x[0, :, 5, 5] * w[3, :, 1, 1]  # the centre taps of output (3, 5, 5)
    channel = int(np.argmax(np.abs(products)))
    assert abs(products[channel]) > 1
    wrong[0, 3, 5, 5] -= products[channel]
    bound = conv_error_bound(x, w, pads=[1, 1, 1, 1])
    comparison = compare_arrays(ours, wrong, bound=bound)
    assert not comparison.passed and comparison.mismatch_count == 1
    assert comparison.mismatches[0][0] == (0, 3, 5, 5)
    assert "+ bound" in comparison.reason


def test_check_judges_conv_by_the_bound_and_flags_a_wrong_result():
    x, w = _cancelling_case()
    call = kernel_call("Conv", {"pads": [1, 1, 1, 1]}, [x, w], opset=22)
    plan = plan_call(call)
    result = compute(call)
    report = crosscheck(call, plan, result)
    assert report.passed
    assert all(entry["conv_bound"] for entry in report_dict(report)["peers"])
    wrong = result.copy()
    wrong[0, 0, 0, 0] += 1e-2 * max(1.0, abs(float(wrong[0, 0, 0, 0])))
    report = crosscheck(call, plan, wrong)
    assert not report.passed
    assert {peer.status for peer in report.peers} == {"disagree"}
