"""The comparison rule of padconv verify (compare_arrays) and the Conv dot-product error bound
it uses: the formula, correct results whose sums cancel pass, a wrong element is caught."""

from __future__ import annotations

import itertools
import math

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from padconv_cli.crosscheck import crosscheck, report_dict
from padconv_cli.kernels.conv import conv
from padconv_cli.kernels.conv_bound import (
    CONV_BOUND_C,
    accumulation_eps,
    conv_error_bound,
    terms_per_output,
)
from padconv_cli.onnx_nodes import kernel_call
from padconv_cli.ops import compute, plan_call
from padconv_cli.ops import error_bound as call_error_bound
from padconv_cli.verification.compare import (
    DEFAULT_TOLERANCES,
    compare_arrays,
    default_tolerances,
    display_value,
)

# compare_arrays: the comparison rule of padconv verify.

EPS64 = float(np.finfo(np.float64).eps)  # 2**-52


def f32(values):
    return np.array(values, dtype=np.float32)


def test_identical_float_arrays_pass_with_zero_errors():
    result = compare_arrays(f32([1.0, 2.0]), f32([1.0, 2.0]))
    assert result.passed and result.reason == ""
    assert result.max_abs == 0.0 and result.max_rel == 0.0
    assert result.mismatches == [] and result.mismatch_count == 0


@pytest.mark.parametrize(
    ("expected", "actual", "passed"),
    [
        ([np.nan, 1.0], [np.nan, 1.0], True),
        ([np.nan, 1.0], [0.0, 1.0], False),
        ([0.0, 1.0], [np.nan, 1.0], False),
        ([np.inf, -np.inf], [np.inf, -np.inf], True),
        ([np.inf], [-np.inf], False),
        ([np.inf], [3.4e38], False),
        ([1.0], [np.inf], False),
    ],
)
def test_nan_and_inf_rules(expected, actual, passed):
    result = compare_arrays(f32(expected), f32(actual), rtol=1.0, atol=1e30)
    assert result.passed is passed
    if not passed:
        assert result.min_atol is None and result.min_rtol is None


def test_nan_mismatch_is_reported_with_index_and_values():
    result = compare_arrays(f32([[1.0, np.nan]]), f32([[1.0, 2.0]]))
    assert not result.passed
    ((index, expected, actual),) = result.mismatches
    assert index == (0, 1)
    assert math.isnan(float(expected)) and float(actual) == 2.0


@pytest.mark.parametrize(
    ("expected", "actual", "word"),
    [
        (np.zeros((2, 3), np.float32), np.zeros((3, 2), np.float32), "shape"),
        (np.zeros((2,), np.float32), np.zeros((1, 2), np.float32), "shape"),
        (np.zeros(3, np.float32), np.zeros(3, np.float64), "dtype"),
        (np.zeros(3, np.int32), np.zeros(3, np.int64), "dtype"),
    ],
)
def test_shape_and_dtype_must_match_exactly(expected, actual, word):
    result = compare_arrays(expected, actual, rtol=1.0, atol=1.0)
    assert not result.passed
    assert result.reason.startswith(word)
    assert result.min_atol is None


def test_tolerance_formula_is_atol_plus_rtol_times_expected():
    expected, actual = f32([100.0]), f32([100.5])
    assert compare_arrays(expected, actual, rtol=0.005, atol=0.0).passed
    assert not compare_arrays(expected, actual, rtol=0.004, atol=0.0).passed
    assert compare_arrays(expected, actual, rtol=0.004, atol=0.1).passed
    assert not compare_arrays(expected, actual, rtol=0.0, atol=0.4).passed


def test_minimal_tolerances_are_reported_and_sufficient():
    expected = f32([1.0, 10.0, -4.0])
    actual = f32([1.5, 10.25, -4.0])
    result = compare_arrays(expected, actual, rtol=0.0, atol=0.0)
    assert not result.passed and result.mismatch_count == 2
    assert result.min_atol == pytest.approx(0.5)
    assert result.min_rtol == pytest.approx(0.5)
    assert compare_arrays(expected, actual, rtol=0.0, atol=result.min_atol).passed
    assert compare_arrays(expected, actual, rtol=result.min_rtol, atol=0.0).passed
    assert not compare_arrays(expected, actual, rtol=0.0, atol=0.49).passed


def test_min_rtol_is_infinite_when_expected_zero_differs():
    result = compare_arrays(f32([0.0, 1.0]), f32([0.5, 1.0]), rtol=0.0, atol=0.0)
    assert not result.passed
    assert result.min_rtol == math.inf
    assert result.max_rel == math.inf
    assert result.min_atol == pytest.approx(0.5)


def test_only_first_five_mismatches_are_listed():
    expected = np.zeros(12, np.float64)
    actual = np.ones(12, np.float64)
    result = compare_arrays(expected, actual)
    assert result.mismatch_count == 12
    assert [m[0] for m in result.mismatches] == [(i,) for i in range(5)]


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int32", "int64", "uint64", "bool"])
def test_integers_and_bools_compare_exactly_by_default(dtype):
    expected = np.array([0, 1, 1], dtype=dtype)
    actual = np.array([0, 1, 0], dtype=dtype)
    assert default_tolerances(np.dtype(dtype)) == (0.0, 0.0)
    result = compare_arrays(expected, actual)
    assert not result.passed and result.mismatches[0][0] == (2,)
    assert compare_arrays(expected, expected.copy()).passed


def test_integer_difference_is_exact_for_extreme_int64():
    big = np.iinfo(np.int64)
    expected = np.array([big.max, big.min], dtype=np.int64)
    actual = np.array([big.min, big.min], dtype=np.int64)
    result = compare_arrays(expected, actual)
    assert result.max_abs == float(2**64 - 1)
    assert compare_arrays(expected, actual, atol=2.0**64).passed
    unsigned = np.array([2**63], np.uint64), np.array([2**63 + 1], np.uint64)
    assert compare_arrays(*unsigned, atol=1).passed
    assert not compare_arrays(*unsigned).passed


def test_strings_compare_exactly_and_ignore_tolerances():
    expected = np.array(["a", "bc"], dtype=object)
    assert compare_arrays(expected, np.array(["a", "bc"], dtype=object)).passed
    result = compare_arrays(expected, np.array(["a", "bd"], dtype=object), rtol=1, atol=1)
    assert not result.passed
    assert display_value(result.mismatches[0][2]) == "'bd'"
    assert result.max_abs is None and result.min_atol is None


def test_string_storages_count_as_one_type():
    as_object = np.array(["a", "bc"], dtype=object)
    assert compare_arrays(as_object, np.array(["a", "bc"])).passed
    result = compare_arrays(as_object, np.array(["a", "b"]))
    assert not result.passed and result.mismatches[0][0] == (1,)
    assert compare_arrays(as_object, np.array([1, 2])).reason == "dtype int64 != expected string"


@pytest.mark.parametrize("name", sorted(DEFAULT_TOLERANCES))
def test_default_tolerances_table(name):
    assert (
        default_tolerances(np.dtype(name) if name != "bfloat16" else ml_dtypes.bfloat16)
        == (DEFAULT_TOLERANCES[name])
    )


def test_float16_one_ulp_passes_by_default_and_float32_one_percent_fails():
    one = np.float16(1.0)
    assert compare_arrays(np.array([one]), np.array([np.nextafter(one, np.float16(2))])).passed
    assert not compare_arrays(f32([1.0]), f32([1.01])).passed


def test_bfloat16_and_float8_are_compared_as_floats():
    bf = ml_dtypes.bfloat16
    result = compare_arrays(np.array([1.0, np.nan], bf), np.array([1.0078125, np.nan], bf))
    assert result.passed  # one bfloat16 ulp at 1.0, within rtol=atol=1e-2
    f8 = ml_dtypes.float8_e4m3fn
    eps = float(ml_dtypes.finfo(f8).eps)
    assert default_tolerances(np.dtype(f8)) == (eps, eps)
    assert not compare_arrays(np.array([1.0], f8), np.array([2.0], f8)).passed


def test_complex_values_use_modulus():
    expected = np.array([1 + 1j], np.complex64)
    assert compare_arrays(expected, np.array([1 + 1.1j], np.complex64), atol=0.11).passed
    assert not compare_arrays(expected, np.array([1 + 1.1j], np.complex64), atol=0.09).passed


def test_zero_dimensional_and_empty_arrays():
    assert compare_arrays(np.float32(1.0), np.float32(1.0)).passed
    result = compare_arrays(np.array(1.0, np.float32), np.array(2.0, np.float32))
    assert result.mismatches[0][0] == ()
    assert compare_arrays(np.zeros((0, 3), np.float32), np.zeros((0, 3), np.float32)).passed


def test_display_value_uses_the_elements_own_precision():
    assert display_value(np.float32(0.1)) == "0.1"
    assert display_value(np.float16(0.1)) == "0.1"


finite32 = st.floats(-1e6, 1e6, width=32)


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 8).flatmap(
        lambda n: st.tuples(
            hnp.arrays(np.float32, n, elements=finite32),
            hnp.arrays(np.float32, n, elements=finite32),
        )
    ),
    st.sampled_from([0.0, 1e-6, 1e-3]),
    st.sampled_from([0.0, 1e-5, 1e-2]),
)
def test_reported_minimal_tolerances_make_it_pass(pair, rtol, atol):
    expected, actual = pair
    result = compare_arrays(expected, actual, rtol=rtol, atol=atol)
    assert result.min_atol is not None
    assert compare_arrays(expected, actual, rtol=rtol, atol=result.min_atol).passed
    if result.min_atol > 0:
        smaller = result.min_atol * (1 - 1e-6)
        assert not compare_arrays(expected, actual, rtol=rtol, atol=smaller).passed
    if result.min_rtol is not None and math.isfinite(result.min_rtol):
        assert compare_arrays(expected, actual, rtol=result.min_rtol, atol=atol).passed
    assert result.passed == (result.mismatch_count == 0)


# The Conv dot-product error bound: its formula, that it passes correct results whose sums
# cancel, and that it still catches a wrong element.


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
    # sums of n non-negative float64 terms cannot cancel: each order is within gamma_n ~ n*u of
    # the exact sum, so two orders differ by at most about n * eps_64 relatively, whatever
    # kernel numpy picks (2x for the products and the scaling)
    np.testing.assert_allclose(bound, expected, rtol=2 * n * EPS64, atol=0)


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
    # sums of n non-negative float64 terms, the bias included (see the test above)
    rtol = 2 * (terms_per_output(w.shape, 1) + 1) * EPS64
    np.testing.assert_allclose(call_error_bound(call, plan), expected, rtol=rtol, atol=0)
    np.testing.assert_allclose(call_error_bound(call), expected, rtol=rtol, atol=0)


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
