"""Conv planning: dimension formulas, resolved attributes, and every validation error."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

import padconv_cli.kernels.conv as conv_shapes
from padconv_cli.errors import AttributeValueError, PadconvError, UnsupportedDtypeError
from padconv_cli.kernels.conv import conv, plan_conv

# --- conv_shapes ------------------------------------------------------------------------------


@pytest.mark.parametrize(("k", "d", "expected"), [(1, 1, 1), (3, 1, 3), (3, 2, 5), (4, 3, 10)])
def test_effective_kernel_size(k, d, expected):
    assert conv_shapes.effective_kernel_size(k, d) == expected


@pytest.mark.parametrize(
    ("size", "begin", "end", "ek", "s", "expected"),
    [(5, 1, 1, 3, 1, 5), (5, 0, 0, 3, 1, 3), (7, 1, 1, 3, 2, 4), (7, 1, 0, 3, 2, 3),
     (2, 0, 0, 3, 1, 0), (0, 2, 1, 3, 1, 1)],
)
def test_explicit_pad_output_size(size, begin, end, ek, s, expected):
    assert conv_shapes.explicit_pad_output_size(size, begin, end, ek, s) == expected


@pytest.mark.parametrize(("size", "s", "expected"), [(5, 1, 5), (5, 2, 3), (6, 2, 3), (1, 4, 1)])
def test_same_output_size(size, s, expected):
    assert conv_shapes.same_output_size(size, s) == expected


@pytest.mark.parametrize(
    ("size", "out", "ek", "s", "expected"), [(5, 5, 3, 1, 2), (5, 3, 3, 2, 2), (6, 3, 3, 2, 1),
                                             (5, 2, 1, 3, 0), (4, 4, 5, 1, 4)],
)
def test_same_total_pad(size, out, ek, s, expected):
    assert sum(conv_shapes.same_pads(size, out, ek, s, "SAME_UPPER")) == expected


@pytest.mark.parametrize(
    ("total", "auto_pad", "expected"),
    [(2, "SAME_UPPER", (1, 1)), (3, "SAME_UPPER", (1, 2)), (3, "SAME_LOWER", (2, 1)),
     (0, "SAME_LOWER", (0, 0)), (1, "SAME_UPPER", (0, 1)), (1, "SAME_LOWER", (1, 0))],
)
def test_split_same_pad(total, auto_pad, expected):
    # size 1, one output, stride 1: the total pad is ek - 1
    assert conv_shapes.same_pads(1, 1, total + 1, 1, auto_pad) == expected


@given(st.integers(1, 60), st.integers(1, 9), st.integers(1, 5))
def test_valid_output_is_the_specs_ceil_form(size, ek, s):
    expected = math.ceil((size - ek + 1) / s)
    assume(expected >= 1)  # an empty output is refused (test_plan_errors)
    plan = plan_conv((1, 1, size), (1, 1, ek), auto_pad="VALID", strides=[s])
    assert plan.output_shape[2] == expected


@given(st.integers(1, 60), st.integers(1, 5), st.integers(1, 4), st.integers(1, 5))
def test_same_pads_give_ceil_output_through_the_explicit_formula(size, k, d, s):
    ek = conv_shapes.effective_kernel_size(k, d)
    out = conv_shapes.same_output_size(size, s)
    begin, end = conv_shapes.same_pads(size, out, ek, s, "SAME_UPPER")
    assert conv_shapes.explicit_pad_output_size(size, begin, end, ek, s) == out


# --- plan_conv ----------------------------------------------------------------------------------


def test_plan_of_the_padding_example():
    plan = plan_conv((1, 1, 5, 5), (1, 1, 3, 3), kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    assert plan.output_shape == (1, 1, 5, 5)
    assert plan.pads == (1, 1, 1, 1)
    assert plan.strides == plan.dilations == (1, 1)
    assert plan.formulas[0] == "out[0] = floor((5 + 1 + 1 - ((3-1)*1+1)) / 1) + 1 = 5"
    assert plan.flops == 2 * 1 * 1 * 25 * 1 * 9
    with pytest.raises(AttributeError):  # the plan is immutable
        plan.group = 2


def test_plan_same_upper_and_lower_put_the_odd_pad_on_opposite_sides():
    upper = plan_conv((1, 1, 5, 6), (1, 1, 2, 4), auto_pad="SAME_UPPER", strides=[1, 2])
    lower = plan_conv((1, 1, 5, 6), (1, 1, 2, 4), auto_pad="SAME_LOWER", strides=[1, 2])
    # axis 0: out 5, total 1; axis 1: out 3, total (3-1)*2+4-6 = 2
    assert upper.output_shape == lower.output_shape == (1, 1, 5, 3)
    assert upper.pads == (0, 1, 1, 1)
    assert lower.pads == (1, 1, 0, 1)
    assert upper.formulas[1].startswith("out[1] = ceil(6 / 2) = 3; SAME_UPPER pads 1+1")


def test_plan_same_with_dilations_uses_the_dilated_extent():
    plan = plan_conv((1, 1, 7), (1, 1, 3), auto_pad="SAME_LOWER", dilations=[3])
    # ek = 7, out = 7, total = 6 + 7 - 7 = 6
    assert plan.output_shape == (1, 1, 7)
    assert plan.pads == (3, 3)
    assert conv_shapes.effective_kernel_size(plan.kernel_shape[0], plan.dilations[0]) == 7


def test_plan_valid_and_groups_and_flops():
    plan = plan_conv((2, 6, 9, 8, 7), (4, 3, 3, 2, 1), (4,), auto_pad="VALID", group=2,
                     strides=[2, 1, 3])
    assert plan.output_shape == (2, 4, 4, 7, 3)
    assert plan.pads == (0,) * 6
    assert plan.formulas[0] == "out[0] = floor((9 - ((3-1)*1+1)) / 2) + 1 = 4"
    assert plan.flops == 2 * 2 * 4 * (4 * 7 * 3) * 3 * (3 * 2 * 1)
    assert plan.pads_begin == plan.pads_end == (0, 0, 0)


def test_plan_accepts_numpy_integers_and_bytes_auto_pad():
    plan = plan_conv((1, 2, 5), (2, 2, 3), strides=np.array([2]), auto_pad=b"SAME_UPPER",
                     group=np.int64(1))
    assert plan.output_shape == (1, 2, 3)
    assert plan.auto_pad == "SAME_UPPER"


# --- validation errors ------------------------------------------------------------------------

F32 = np.float32
ERROR_CASES = {
    "x_rank_2": (((1, 3), (1, 3)), {}, "rank >= 3"),
    "w_rank": (((1, 3, 5), (1, 3, 3, 3)), {}, "W must have the rank of X (3), got rank 4"),
    "channels": (((1, 3, 5, 5), (2, 4, 3, 3)), {},
                 "input channels C=3 != W.shape[1]*group = 4*1"),
    "channels_group": (((1, 4, 5, 5), (2, 1, 3, 3)), {"group": 2},
                       "input channels C=4 != W.shape[1]*group = 1*2"),
    "m_not_multiple": (((1, 4, 5, 5), (3, 2, 3, 3)), {"group": 2},
                       "M=W.shape[0]=3 is not a multiple of group=2"),
    "group_zero": (((1, 4, 5), (2, 4, 3)), {"group": 0}, "group must be an integer >= 1, got 0"),
    "group_negative": (((1, 4, 5), (2, 4, 3)), {"group": -2}, "group must be an integer >= 1"),
    "group_float": (((1, 4, 5), (2, 4, 3)), {"group": 1.5}, "group must be an integer >= 1"),
    "kernel_shape_differs": (((1, 1, 5, 5), (1, 1, 3, 3)), {"kernel_shape": [3, 2]},
                             "kernel_shape [3, 2] != W.shape[2:] [3, 3]"),
    "kernel_shape_length": (((1, 1, 5, 5), (1, 1, 3, 3)), {"kernel_shape": [3]},
                            "kernel_shape needs 2 values"),
    "strides_length": (((1, 1, 5, 5), (1, 1, 3, 3)), {"strides": [1, 1, 1]},
                       "strides needs 2 values (one per spatial axis), got 3"),
    "dilations_length": (((1, 1, 5), (1, 1, 3)), {"dilations": [1, 1]},
                         "dilations needs 1 values"),
    "pads_length": (((1, 1, 5, 5), (1, 1, 3, 3)), {"pads": [1, 1]},
                    "pads needs 4 values (begin and end per spatial axis), got 2"),
    "strides_zero": (((1, 1, 5, 5), (1, 1, 3, 3)), {"strides": [1, 0]},
                     "strides must be >= 1 on every axis, got [1, 0]"),
    "strides_negative": (((1, 1, 5), (1, 1, 3)), {"strides": [-1]}, "strides must be >= 1"),
    "dilations_zero": (((1, 1, 5), (1, 1, 3)), {"dilations": [0]},
                       "dilations must be >= 1 on every axis, got [0]"),
    "dilations_negative": (((1, 1, 5), (1, 1, 3)), {"dilations": [-2]}, "dilations must be >= 1"),
    "pads_negative": (((1, 1, 5), (1, 1, 3)), {"pads": [1, -1]},
                      "pads must be >= 0, got [1, -1]"),
    "pads_not_int": (((1, 1, 5), (1, 1, 3)), {"pads": [1.5, 1]}, "pads must contain integers"),
    "pads_not_list": (((1, 1, 5), (1, 1, 3)), {"pads": "11"}, "pads must be a list of integers"),
    "pads_with_same": (((1, 1, 5), (1, 1, 3)), {"pads": [1, 1], "auto_pad": "SAME_UPPER"},
                       "pads and auto_pad=SAME_UPPER cannot be used together"),
    "pads_with_valid": (((1, 1, 5), (1, 1, 3)), {"pads": [0, 0], "auto_pad": "VALID"},
                        "pads and auto_pad=VALID cannot be used together"),
    "unknown_auto_pad": (((1, 1, 5), (1, 1, 3)), {"auto_pad": "SAME"},
                         "auto_pad must be one of NOTSET, SAME_UPPER, SAME_LOWER, VALID, "
                         "got 'SAME'"),
    "empty_output": (((1, 1, 5, 2), (1, 1, 3, 3)), {},
                     "spatial axis 1 (tensor axis 3) would be empty: out[1] = "
                     "floor((2 + 0 + 0 - ((3-1)*1+1)) / 1) + 1 = 0"),
    "empty_output_valid": (((1, 1, 2), (1, 1, 3)), {"auto_pad": "VALID"},
                           "out[0] = floor((2 - ((3-1)*1+1)) / 1) + 1 = 0"),
    "empty_output_same": (((1, 1, 0), (1, 1, 1)), {"auto_pad": "SAME_UPPER"},
                          "out[0] = ceil(0 / 1) = 0"),
    "zero_kernel": (((1, 1, 5), (1, 1, 0)), {}, "W.shape[2:] must be >= 1, got [0]"),
}


@pytest.mark.parametrize("name", sorted(ERROR_CASES))
def test_invalid_attributes_raise_one_line_errors(name):
    (x_shape, w_shape), attrs, message = ERROR_CASES[name]
    with pytest.raises(AttributeValueError) as plan_error:
        plan_conv(x_shape, w_shape, **attrs)
    assert message in str(plan_error.value)
    with pytest.raises(AttributeValueError) as conv_error:
        conv(np.zeros(x_shape, F32), np.zeros(w_shape, F32), **attrs)
    assert str(conv_error.value) == str(plan_error.value)
    assert "\n" not in str(conv_error.value)
    assert str(conv_error.value).startswith("Conv ")


def test_dilated_kernel_that_just_fits_is_valid():
    assert plan_conv((1, 1, 5), (1, 1, 3), dilations=[3], pads=[1, 1]).output_shape == (1, 1, 1)


@pytest.mark.parametrize("b_shape", [(3,), (2, 1), (), (1, 2)])
def test_bias_must_have_shape_m(b_shape):
    with pytest.raises(AttributeValueError, match=r"bias B must have shape \(M,\) = \(2,\)"):
        conv(np.zeros((1, 1, 5), F32), np.zeros((2, 1, 3), F32), np.zeros(b_shape, F32))


@pytest.mark.parametrize(
    ("bad", "label"),
    [(np.zeros((1, 1, 5), np.int64), "int64"), (np.zeros((1, 1, 5), np.int8), "int8"),
     (np.zeros((1, 1, 5), bool), "bool"), (np.zeros((1, 1, 5), np.complex64), "complex64"),
     (np.full((1, 1, 5), "a"), "string"), (np.zeros((1, 1, 5), np.uint16), "uint16")],
)
def test_non_float_inputs_are_refused(bad, label):
    expected = (f"Conv takes float tensors (float16, bfloat16, float32, float64); got {label} X"
                "; convert the tensor to a float type first")
    with pytest.raises(UnsupportedDtypeError) as error:
        conv(bad, np.zeros((1, 1, 3), F32))
    assert str(error.value) == expected
    assert "--" not in str(error.value)  # the kernel knows no command-line flags
    with pytest.raises(UnsupportedDtypeError, match=f"got {label} W"):
        conv(np.zeros((1, 1, 5), F32), bad[..., :3])
    with pytest.raises(UnsupportedDtypeError, match=f"got {label} B"):
        conv(np.zeros((1, 1, 5), F32), np.zeros((1, 1, 3), F32), bad[0, 0, :1])


@pytest.mark.parametrize(
    ("x_dtype", "w_dtype", "b_dtype", "listing"),
    [(np.float32, np.float16, None, "X float32, W float16"),
     (np.float64, np.float64, np.float32, "X float64, W float64, B float32"),
     (ml_dtypes.bfloat16, np.float16, None, "X bfloat16, W float16")],
)
def test_inputs_must_share_one_dtype(x_dtype, w_dtype, b_dtype, listing):
    B = None if b_dtype is None else np.zeros(1, b_dtype)
    with pytest.raises(UnsupportedDtypeError) as error:
        conv(np.zeros((1, 1, 5), x_dtype), np.zeros((1, 1, 3), w_dtype), B)
    assert str(error.value) == (f"Conv inputs must share one dtype; got {listing}; "
                                "convert the inputs to one dtype")


def test_errors_are_padconv_errors():
    assert issubclass(AttributeValueError, PadconvError)
    assert issubclass(UnsupportedDtypeError, PadconvError)


# --- attribute types, call after call ------------------------------------------------------------


@pytest.mark.parametrize(
    "good, bad",
    [
        ({"group": 1}, {"group": True}),
        ({"group": 1}, {"group": 1.0}),
        ({"pads": [1, 1, 1, 1]}, {"pads": [1.0, 1, 1, 1]}),
        ({"strides": (1, 1)}, {"strides": (1, True)}),
    ],
)
def test_an_equal_value_of_another_type_is_refused_after_a_good_call(good, bad):
    x = np.ones((1, 2, 4, 4), np.float32)
    w = np.ones((2, 2, 3, 3), np.float32)
    conv(x, w, **good)
    with pytest.raises(AttributeValueError):
        conv(x, w, **bad)


def test_unhashable_attributes_are_planned_each_time():
    x = np.ones((1, 2, 4, 4), np.float32)
    w = np.ones((2, 2, 3, 3), np.float32)
    for _ in range(2):
        assert conv(x, w, pads=np.array([1, 1, 1, 1])).shape == (1, 2, 4, 4)


def test_a_call_planned_before_is_still_judged_by_its_own_attributes():
    """The plan of a valid call is remembered; a later call with other (or wrong) attributes
    is planned afresh, lists and tuples alike."""
    x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    w = np.ones((1, 1, 3, 3), np.float32)
    padded = conv(x, w, pads=[1, 1, 1, 1])
    assert padded.shape == (1, 1, 4, 4)
    assert conv(x, w, pads=(1, 1, 1, 1)).tolist() == padded.tolist()
    assert conv(x, w, pads=[0, 0, 0, 0]).shape == (1, 1, 2, 2)
    assert conv(x, w, pads=np.array([1, 1, 1, 1])).tolist() == padded.tolist()
    with pytest.raises(AttributeValueError):
        conv(x, w, pads=[1, 1, 1])
    with pytest.raises(AttributeValueError):
        conv(x, w, pads=[1, 1, 1, -1])
    assert conv(x, w, pads=[1, 1, 1, 1]).tolist() == padded.tolist()
