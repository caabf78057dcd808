"""The Pad kernel (Pad-25) against the spec examples and an independent index-mapping oracle.

The oracle below computes every output element separately from the rule of its mode (a
Python loop over output indices), sharing no code with padconv_cli.kernels.pad.
"""

from __future__ import annotations

import zlib

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import padconv_cli.kernels.pad as pad_module
from padconv_cli.errors import AttributeValueError, OutputTooLargeError, UnsupportedDtypeError
from padconv_cli.kernels.pad import coerce_constant_value, pad, plan_pad

MODES = ("constant", "reflect", "edge", "wrap")

# --------------------------------------------------------------------------------------
# The oracle
# --------------------------------------------------------------------------------------


def source_index(j: int, n: int, mode: str) -> int | None:
    """Index into the cropped axis for output position ``j`` (relative to the centre)."""
    if 0 <= j < n:
        return j
    if mode == "constant":
        return None
    if mode == "edge":
        return 0 if j < 0 else n - 1
    if mode == "wrap":
        return j % n
    if n == 1:  # reflect of one element: numpy repeats it
        return 0
    period = 2 * (n - 1)
    m = j % period
    return m if m < n else period - m


def oracle(data, pads, constant=None, axes=None, mode="constant", out_dtype=None):
    """Pad by the definition: output index i along an axis reads input index i - begin, kept
    part [max(-b, 0), dim - max(-e, 0)) (empty when crops exceed the axis), outside it by the
    mode's rule; out_dim = dim + begin + end."""
    rank = data.ndim
    axes = list(range(rank)) if axes is None else [a + rank if a < 0 else a for a in axes]
    begin = [0] * rank
    end = [0] * rank
    for i, axis in enumerate(axes):
        begin[axis] = pads[i]
        end[axis] = pads[i + len(axes)]
    crop = tuple(
        slice(max(-b, 0), max(dim - max(-e, 0), max(-b, 0)))
        for b, e, dim in zip(begin, end, data.shape, strict=True)
    )
    cropped = data[crop]
    lead = [max(b, 0) for b in begin]
    out_shape = tuple(d + b + e for d, b, e in zip(data.shape, begin, end, strict=True))
    out = np.empty(out_shape, dtype=out_dtype or data.dtype)
    for index in np.ndindex(*out_shape):
        source = [
            source_index(i - lb, n, mode)
            for i, lb, n in zip(index, lead, cropped.shape, strict=True)
        ]
        if None in source:
            out[index] = constant
        else:
            out[index] = cropped[tuple(source)]
    return out


@pytest.fixture(autouse=True, params=["native rows", "numpy.pad"])
def fill_path(request, monkeypatch):
    """Every test runs on both fills: the native one (any row length) and numpy.pad's (which
    rows shorter than ``_NATIVE_ROW`` take; 10**9: every row)."""
    short = 0 if request.param == "native rows" else 10**9
    monkeypatch.setattr(pad_module, "_NATIVE_ROW", short)


def assert_identical(actual: np.ndarray, expected: np.ndarray) -> None:
    """Same shape, same dtype and the same bits (so NaN payloads and -0.0 count)."""
    assert isinstance(actual, np.ndarray)
    assert actual.dtype == expected.dtype
    assert actual.shape == expected.shape
    if actual.dtype.kind in "OU":
        assert actual.tolist() == expected.tolist()
    else:
        assert np.ascontiguousarray(actual).tobytes() == np.ascontiguousarray(expected).tobytes()


# --------------------------------------------------------------------------------------
# Test data
# --------------------------------------------------------------------------------------

WORDS = ["", "a", "bc", "déf", "0", "zz"]

DTYPES = {
    "int8": np.int8,
    "uint8": np.uint8,
    "int16": np.int16,
    "uint16": np.uint16,
    "int32": np.int32,
    "uint32": np.uint32,
    "int64": np.int64,
    "uint64": np.uint64,
    "float16": np.float16,
    "float32": np.float32,
    "float64": np.float64,
    "bfloat16": ml_dtypes.bfloat16,
    "float8_e4m3fn": ml_dtypes.float8_e4m3fn,
    "float8_e4m3fnuz": ml_dtypes.float8_e4m3fnuz,
    "float8_e5m2": ml_dtypes.float8_e5m2,
    "float8_e5m2fnuz": ml_dtypes.float8_e5m2fnuz,
    "float4_e2m1fn": ml_dtypes.float4_e2m1fn,
    "int4": ml_dtypes.int4,
    "uint4": ml_dtypes.uint4,
    "bool": np.bool_,
    "complex64": np.complex64,
    "complex128": np.complex128,
    "string": object,
    "unicode": "<U2",
}

# A constant of each kind that every type of the kind represents exactly.
CONSTANTS = {"i": 7, "u": 7, "f": 2.0, "c": 3 - 1j, "b": True, "O": "pad", "U": "pad"}


def rng_for(*key) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def kind_of(dtype) -> str:
    dt = np.dtype(dtype)
    if dt.kind in "iufcbOU":
        return dt.kind
    return (
        "f"
        if dt in (np.dtype(ml_dtypes.bfloat16),) or "float" in dt.name
        else ("u" if dt.name.startswith("uint") else "i")
    )


def make_data(dtype, shape, rng: np.random.Generator) -> np.ndarray:
    """Random values of ``dtype``, with NaN, ±inf and -0.0 among the floats."""
    dt = np.dtype(dtype)
    kind = kind_of(dt)
    if kind in "OU":
        words = [WORDS[i] for i in rng.integers(0, len(WORDS), size=int(np.prod(shape)))]
        return np.array(words, dtype=dt).reshape(shape)
    if kind == "b":
        return rng.random(shape) < 0.5
    if kind in "iu":
        info = ml_dtypes.iinfo(dt) if dt.kind == "V" else np.iinfo(dt)
        native = dt if dt.kind in "iu" else np.int8
        values = rng.integers(int(info.min), int(info.max), size=shape, endpoint=True, dtype=native)
        return values.astype(dt)
    values = rng.standard_normal(shape) * 4
    flat = values.reshape(-1)
    specials = [np.nan, np.inf, -np.inf, -0.0]
    flat[: min(len(specials), flat.size)] = specials[: flat.size]
    rng.shuffle(flat)
    if kind == "c":
        values = values + 1j * rng.standard_normal(shape)
    with np.errstate(all="ignore"):
        return values.astype(dt)


SHAPES = {1: (5,), 2: (3, 4), 3: (2, 3, 4), 4: (2, 2, 3, 3)}


def make_pads(shape: tuple[int, ...], rng: np.random.Generator) -> list[int]:
    """Pads in [-1, 4] (longer than some axes); every axis keeps at least one element."""
    rank = len(shape)
    pads = [int(v) for v in rng.integers(-1, 5, size=2 * rank)]
    for axis, dim in enumerate(shape):
        if dim - max(-pads[axis], 0) - max(-pads[axis + rank], 0) < 1:
            pads[axis + rank] = 0
    return pads


# --------------------------------------------------------------------------------------
# The documented examples
# --------------------------------------------------------------------------------------

SPEC_DATA = np.array([[1.0, 1.2], [2.3, 3.4], [4.5, 5.7]], dtype=np.float32)


@pytest.mark.parametrize(
    ("mode", "pads", "expected"),
    [
        (
            "constant",
            [0, 2, 0, 0],
            [[0.0, 0.0, 1.0, 1.2], [0.0, 0.0, 2.3, 3.4], [0.0, 0.0, 4.5, 5.7]],
        ),
        (
            "reflect",
            [0, 2, 0, 0],
            [[1.0, 1.2, 1.0, 1.2], [2.3, 3.4, 2.3, 3.4], [4.5, 5.7, 4.5, 5.7]],
        ),
        ("edge", [0, 2, 0, 0], [[1.0, 1.0, 1.0, 1.2], [2.3, 2.3, 2.3, 3.4], [4.5, 4.5, 4.5, 5.7]]),
        (
            "wrap",
            [2, 1, 1, 1],
            [
                [3.4, 2.3, 3.4, 2.3],
                [5.7, 4.5, 5.7, 4.5],
                [1.2, 1.0, 1.2, 1.0],
                [3.4, 2.3, 3.4, 2.3],
                [5.7, 4.5, 5.7, 4.5],
                [1.2, 1.0, 1.2, 1.0],
            ],
        ),
    ],
)
def test_spec_examples(mode, pads, expected):
    constant = np.float32(0.0) if mode == "constant" else None
    assert_identical(pad(SPEC_DATA, pads, constant, mode=mode), np.array(expected, np.float32))


# --------------------------------------------------------------------------------------
# mode x dtype x rank against the oracle
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("rank", sorted(SHAPES))
@pytest.mark.parametrize("dtype_name", sorted(DTYPES))
@pytest.mark.parametrize("mode", MODES)
def test_matches_oracle(mode, dtype_name, rank):
    rng = rng_for(mode, dtype_name, rank)
    dtype = DTYPES[dtype_name]
    data = make_data(dtype, SHAPES[rank], rng)
    pads = make_pads(SHAPES[rank], rng)
    constant = CONSTANTS[kind_of(dtype)] if mode == "constant" else None
    out_dtype = "<U3" if dtype_name == "unicode" and mode == "constant" else None
    expected = oracle(data, pads, constant, mode=mode, out_dtype=out_dtype)
    assert_identical(pad(data, pads, constant, mode=mode), expected)


@pytest.mark.parametrize("dtype_name", sorted(DTYPES))
def test_default_constant_is_zero_empty_or_false(dtype_name):
    dtype = DTYPES[dtype_name]
    data = make_data(dtype, (2, 3), rng_for("default", dtype_name))
    zero = "" if np.dtype(dtype).kind in "OU" else np.zeros((), dtype)[()]
    assert_identical(pad(data, [1, 0, 0, 2]), oracle(data, [1, 0, 0, 2], zero))


def test_default_constant_values_by_kind():
    assert pad(np.array([True]), [1, 0]).tolist() == [False, True]
    assert pad(np.array(["x"], dtype=object), [0, 1]).tolist() == ["x", ""]
    assert pad(np.array([5], np.uint64), [1, 1]).tolist() == [0, 5, 0]
    assert pad(np.array([1 + 1j]), [1, 0]).tolist() == [0j, 1 + 1j]


# --------------------------------------------------------------------------------------
# Negative pads, axes, long pads, zero-size dims
# --------------------------------------------------------------------------------------

A23 = np.arange(1, 7, dtype=np.float32).reshape(2, 3)


@pytest.mark.parametrize(
    ("mode", "pads", "expected"),
    [
        # crop one at the start of axis 1, then pad two at its end (onnxruntime's order)
        ("constant", [0, -1, 0, 2], [[2, 3, 0, 0], [5, 6, 0, 0]]),
        ("edge", [0, -1, 0, 2], [[2, 3, 3, 3], [5, 6, 6, 6]]),
        ("wrap", [0, -1, 0, 2], [[2, 3, 2, 3], [5, 6, 5, 6]]),
        ("reflect", [0, -1, 0, 2], [[2, 3, 2, 3], [5, 6, 5, 6]]),
        ("reflect", [-1, 0, 2, 0], [[4, 5, 6], [4, 5, 6], [4, 5, 6]]),
        ("constant", [-1, -1, 0, -1], [[5]]),
        ("constant", [0, -3, 0, 0], np.zeros((2, 0))),
        ("constant", [-2, 0, 1, 0], [[0, 0, 0]]),
    ],
)
def test_negative_pads_crop_then_pad(mode, pads, expected):
    assert_identical(pad(A23, pads, mode=mode), np.array(expected, np.float32))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("axes", "pads"),
    [
        ([1], [2, -1]),
        ([-1], [2, -1]),
        ([-2], [1, 3]),
        ([2, 0], [1, -1, 2, 3]),
        ([-1, -3], [1, -1, 2, 3]),
        ([], []),
        ([0, 1, 2], [0, 1, 2, 3, 0, 1]),
    ],
)
def test_axes_subset_and_negative(mode, axes, pads):
    data = make_data(np.int16, (3, 2, 4), rng_for("axes", mode, str(axes)))
    assert_identical(pad(data, pads, axes=axes, mode=mode), oracle(data, pads, 0, axes, mode))


def test_axes_accept_numpy_arrays_and_int32():
    expected = pad(A23, [1, 2], axes=[-1])
    assert_identical(pad(A23, np.array([1, 2]), axes=np.array([-1], np.int32)), expected)
    assert_identical(pad(A23, (np.int64(1), np.int8(2)), axes=(np.int32(1),)), expected)


@pytest.mark.parametrize("mode", ["reflect", "wrap", "edge"])
@pytest.mark.parametrize("n", [1, 2, 3, 4])
@pytest.mark.parametrize(("before", "after"), [(0, 9), (11, 0), (5, 7), (1, 13), (8, 8)])
def test_pads_longer_than_the_axis_match_numpy(mode, n, before, after):
    data = np.arange(10, 10 + 2 * n, dtype=np.int32).reshape(2, n)
    if mode == "reflect":  # numpy < 2 breaks the mirror's period for long asymmetric pads
        expected = data[:, reflect_indices(n + before + after, n, before)]
    else:
        expected = np.pad(data, ((0, 0), (before, after)), mode=mode)
    assert_identical(pad(data, [0, before, 0, after], mode=mode), expected)


def reflect_indices(length: int, n: int, before: int) -> list[int]:
    """Source index of every position of a reflect-padded axis of ``n`` elements: the mirror
    (edge not repeated) is periodic with period 2 * (n - 1), as numpy 2's np.pad computes."""
    if n == 1:
        return [0] * length
    period = 2 * (n - 1)
    shifted = [(i - before) % period for i in range(length)]
    return [j if j < n else period - j for j in shifted]


@pytest.mark.parametrize("n", [1, 2, 3, 4])
@pytest.mark.parametrize(("before", "after"), [(0, 9), (11, 0), (5, 7), (1, 13), (8, 8)])
def test_the_reference_reflects_long_pads_with_the_mirrors_period(n, before, after):
    """What --check and audit judge Pad by: numpy < 2's np.pad would break this period."""
    from padconv_cli.ops import KernelCall
    from padconv_cli.ops.pad import reference

    data = np.arange(10, 10 + 2 * n, dtype=np.int32).reshape(2, n)
    attributes = {"pads": [0, before, 0, after], "axes": None, "mode": "reflect",
                  "constant_value": None}
    expected = data[:, reflect_indices(n + before + after, n, before)]
    assert_identical(reference(KernelCall("Pad", 18, (data,), attributes)), expected)


@pytest.mark.parametrize("mode", ["reflect", "wrap"])
def test_long_pads_after_cropping_match_numpy_on_the_cropped_input(mode):
    data = np.arange(24, dtype=np.float64).reshape(4, 6)
    expected = np.pad(data[1:, 2:], ((0, 7), (0, 9)), mode=mode)
    assert_identical(pad(data, [-1, -2, 7, 9], mode=mode), expected)
    expected = np.pad(data[:-3, 1:], ((9, 0), (0, 13)), mode=mode)
    assert_identical(pad(data, [9, -1, -3, 13], mode=mode), expected)


def test_reflect_of_a_one_element_axis_repeats_it_like_numpy():
    data = np.array([[7], [8]], dtype=np.uint8)
    assert_identical(
        pad(data, [0, 2, 0, 3], mode="reflect"), np.pad(data, ((0, 0), (2, 3)), "reflect")
    )


@pytest.mark.parametrize("mode", MODES)
def test_zero_size_dims_elsewhere_are_fine(mode):
    data = np.zeros((0, 3), np.float32)
    out = pad(data, [0, 1, 0, 2], mode=mode)
    assert out.shape == (0, 6) and out.dtype == np.float32


def test_constant_padding_of_an_empty_axis_fills_it():
    out = pad(np.zeros((0, 2), np.int8), [1, 0, 1, 0], constant_value=5)
    assert_identical(out, np.full((2, 2), 5, np.int8))


def test_zero_dim_input():
    data = np.array(3.5)
    assert_identical(pad(data, []), data)
    assert pad(data, []) is not data


@pytest.mark.parametrize("mode", MODES)
def test_non_contiguous_and_big_endian_inputs(mode):
    base = make_data(np.float32, (5, 4, 3), rng_for("strided", mode))
    for data in (base.transpose(2, 0, 1), base[::-2, :, ::2], base.astype(">f4")):
        pads = [1, 2, 0, 2, 1, 3]
        expected = oracle(data, pads, np.float32(1.5), mode=mode)
        assert_identical(pad(data, pads, 1.5, mode=mode), expected)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("shape", "pads"),
    [
        ((4, 3, 5, 2), [0, 0, 2, 1, 0, 0, 1, 3]),  # two unpadded leading axes
        ((6, 5, 3), [0, 1, 2, 0, 2, 1]),  # one unpadded leading axis
        ((5, 4, 3), [0, -1, 1, 0, 0, 2]),  # cropped but unpadded leading axis
    ],
)
def test_unpadded_leading_axes_match_oracle(mode, shape, pads):
    data = make_data(np.float64, shape, rng_for("blocks", mode, shape))
    assert_identical(pad(data, pads, -1.0, mode=mode), oracle(data, pads, -1.0, mode=mode))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype_name", ["float32", "int8", "complex128", "bool", "object"])
@pytest.mark.parametrize("chunk", [2, 1 << 16])
def test_rows_shared_among_the_cores_match_oracle(monkeypatch, mode, dtype_name, chunk):
    """With no size threshold, every output's rows are split among three threads; with short
    chunks, each axis is filled a few positions at a time (bounded index tables)."""
    monkeypatch.setattr(pad_module, "_PARALLEL_BYTES", 0)
    monkeypatch.setattr(pad_module, "_TABLE_CHUNK", chunk)
    monkeypatch.setenv("PADCONV_NATIVE_THREADS", "3")
    data = make_data(np.dtype(dtype_name), (5, 4, 3, 2), rng_for("cores", mode, dtype_name))
    pads = [0, 1, 2, 0, 3, 1, 0, 2]
    constant = {"float32": -1.5, "int8": 7, "complex128": 1 + 2j, "bool": True, "object": "x"}
    value = constant[dtype_name]
    assert_identical(pad(data, pads, value, mode=mode), oracle(data, pads, value, mode=mode))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("pads", [[0, 1, 2, 0, 7, 5], [0, -1, 6, 1, 2, -2], [1, 0, 9, 0, 1, 11]])
def test_long_pads_of_the_last_axis(mode, pads):
    """Pads longer than the innermost axis: its runs of copies and fills must agree."""
    data = make_data(np.uint16, (2, 3, 4), rng_for("columns", mode, str(pads)))
    assert_identical(pad(data, pads, 9, mode=mode), oracle(data, pads, 9, mode=mode))


# --------------------------------------------------------------------------------------
# dtypes: strings, bit patterns
# --------------------------------------------------------------------------------------


def test_unicode_output_widens_for_a_longer_constant():
    data = np.array(["a", "bb"])
    out = pad(data, [1, 1], constant_value="hello")
    assert out.dtype == np.dtype("<U5")
    assert out.tolist() == ["hello", "a", "bb", "hello"]


@pytest.mark.parametrize(
    ("mode", "constant"), [("constant", "x"), ("constant", None), ("edge", "long")]
)
def test_unicode_output_keeps_its_width_otherwise(mode, constant):
    data = np.array(["a", "bb"])
    assert pad(data, [1, 1], constant_value=constant, mode=mode).dtype == np.dtype("<U2")


def test_string_object_arrays_keep_str_elements():
    data = np.array(["ab", "c"], dtype=object)
    out = pad(data, [1, 2], constant_value="-")
    assert out.dtype == object and out.tolist() == ["-", "ab", "c", "-", "-"]
    assert all(isinstance(v, str) for v in out.flat)


def nan_with_payload(dtype, bits):
    return np.array([bits], dtype=np.uint32 if dtype == np.float32 else np.uint16).view(dtype)


@pytest.mark.parametrize("mode", MODES)
def test_nan_payloads_and_negative_zero_are_copied_bit_for_bit(mode):
    data = np.array([0x7FC00001, 0xFFC12345, 0x7F800001, 0x80000000, 0x7F800000], np.uint32)
    data = data.view(np.float32)
    out = pad(data, [2, 3], mode=mode)
    expected = oracle(data, [2, 3], np.float32(0), mode=mode)
    assert out.view(np.uint32).tolist() == expected.view(np.uint32).tolist()


def test_constant_nan_payload_given_as_an_array_is_kept():
    constant = np.array([0x7FC0BEEF], np.uint32).view(np.float32)
    out = pad(np.zeros(1, np.float32), [1, 0], constant_value=constant)
    assert out.view(np.uint32)[0] == 0x7FC0BEEF


@pytest.mark.parametrize("value", [np.int64(7), 7, np.array(7), np.array([7], np.int8)])
def test_constant_value_forms(value):
    assert pad(np.array([1], np.int8), [1, 0], constant_value=value).tolist() == [7, 1]


def test_output_is_a_new_array_even_without_pads():
    data = np.arange(4)
    out = pad(data, [0, 0])
    out[0] = 99
    assert data[0] == 0


# --------------------------------------------------------------------------------------
# plan_pad
# --------------------------------------------------------------------------------------


def test_plan_reports_crops_pads_and_shape():
    plan = plan_pad((4, 3, 4), [1, -2, 0, -1], axes=[-1, 0], mode="edge")
    assert plan.axes == (2, 0)
    assert plan.output_shape == (1, 3, 5)
    assert plan.cropped_shape == (1, 3, 4)
    assert [(a.crop_begin, a.crop_end, a.pad_begin, a.pad_end) for a in plan.per_axis] == [
        (2, 1, 0, 0),
        (0, 0, 0, 0),
        (0, 0, 1, 0),
    ]
    assert plan.crop_slices == (slice(2, 3), slice(0, 3), slice(0, 4))
    assert plan.mode == "edge"


def test_plan_handles_huge_outputs_without_allocating():
    plan = plan_pad((2, 2), [10**12, 0, 10**12, 0])
    assert plan.output_shape == (2 * 10**12 + 2, 2)


def test_allocation_failure_is_output_too_large():
    with pytest.raises(
        OutputTooLargeError, match=r"padded output of shape \(2000000000000000002, 2\)"
    ):
        pad(np.zeros((2, 2), np.uint8), [10**18, 0, 10**18, 0])


# --------------------------------------------------------------------------------------
# out=: the result written into the caller's array
# --------------------------------------------------------------------------------------


def stale_array(dtype, shape, rng: np.random.Generator, order: str = "C") -> np.ndarray:
    """An ``out`` candidate full of values left over from earlier work (none may survive)."""
    out = np.empty(shape, dtype=dtype, order=order)
    out[...] = make_data(dtype, shape, rng)
    return out


@pytest.mark.parametrize("dtype_name", sorted(DTYPES))
@pytest.mark.parametrize("mode", MODES)
def test_out_receives_the_result_and_is_returned(mode, dtype_name):
    rng = rng_for("out", mode, dtype_name)
    dtype = DTYPES[dtype_name]
    data = make_data(dtype, SHAPES[3], rng)
    pads = make_pads(SHAPES[3], rng)
    constant = CONSTANTS[kind_of(dtype)] if mode == "constant" else None
    out_dtype = "<U3" if dtype_name == "unicode" and mode == "constant" else None
    expected = oracle(data, pads, constant, mode=mode, out_dtype=out_dtype)
    out = stale_array(expected.dtype, expected.shape, rng)
    assert pad(data, pads, constant, mode=mode, out=out) is out
    assert_identical(out, expected)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("order", ["F", "strided"])
def test_out_need_not_be_c_contiguous(mode, order):
    """A Fortran-order or sliced ``out`` gets the same values as a fresh array."""
    rng = rng_for("out-layout", mode, order)
    data = make_data(np.float32, (3, 4, 5, 3), rng)
    pads = [0, 0, 2, 1, 0, 0, 1, 3]
    expected = oracle(data, pads, np.float32(-2), mode=mode)
    if order == "F":
        out = stale_array(np.float32, expected.shape, rng, order="F")
    else:
        out = stale_array(np.float32, expected.shape + (2,), rng)[..., 1]
    pad(data, pads, -2, mode=mode, out=out)
    assert_identical(out, expected)


@pytest.mark.parametrize("mode", MODES)
def test_out_of_big_endian_and_transposed_inputs(mode):
    base = make_data(np.float32, (5, 4, 3), rng_for("out-inputs", mode))
    for data in (base.astype(">f4"), base.transpose(2, 0, 1)):
        expected = oracle(data, [1, 0, 2, 0, 3, 1], 0.0, mode=mode, out_dtype=data.dtype)
        out = np.empty(expected.shape, data.dtype)
        pad(data, [1, 0, 2, 0, 3, 1], mode=mode, out=out)
        assert_identical(out, expected)


@pytest.mark.parametrize("mode", MODES)
def test_out_can_be_reused_across_calls(mode):
    rng = rng_for("reuse", mode)
    first, second = make_data(np.int16, (4, 5), rng), make_data(np.int16, (4, 5), rng)
    out = np.empty((7, 9), np.int16)
    pad(first, [1, 2, 2, 2], 3, mode=mode, out=out)
    pad(second, [1, 2, 2, 2], 3, mode=mode, out=out)
    assert_identical(out, oracle(second, [1, 2, 2, 2], np.int16(3), mode=mode))


def test_out_with_cropping_and_axes():
    data = np.arange(24, dtype=np.int64).reshape(2, 3, 4)
    out = np.full((2, 5, 4), -99, np.int64)
    pad(data, [-1, 2, 1, 0], axes=[2, 1], mode="edge", out=out)
    assert_identical(out, oracle(data, [-1, 2, 1, 0], axes=[2, 1], mode="edge"))


def test_out_of_a_zero_dim_input_and_of_an_empty_output():
    out = np.empty((), np.float64)
    assert pad(np.array(2.5), [], out=out) is out and out[()] == 2.5
    empty = np.empty((0, 6), np.float32)
    assert pad(np.zeros((0, 3), np.float32), [0, 1, 0, 2], mode="edge", out=empty) is empty


def test_out_of_object_strings():
    data = np.array([["ab", "c"]], dtype=object)
    out = np.full((1, 5), None, dtype=object)
    pad(data, [0, 1, 0, 2], constant_value="-", out=out)
    assert out.tolist() == [["-", "ab", "c", "-", "-"]]


@pytest.mark.parametrize(
    ("make_out", "message"),
    [
        (lambda: [[0.0] * 6] * 4, r"^out must be a numpy array; got list$"),
        (
            lambda: np.empty((4, 5), np.float32),
            r"^out has shape \(4, 5\); the padded output has shape \(4, 6\)$",
        ),
        (
            lambda: np.empty((4, 6), np.float64),
            r"^out has dtype float64; the padded output has dtype float32$",
        ),
        (
            lambda: np.empty((4, 6), ">f4"),
            r"^out has dtype >f4; the padded output has dtype float32$",
        ),
        (
            lambda: np.broadcast_to(np.float32(0), (4, 6)),
            r"^out is read-only; the padded output needs a writable array$",
        ),
    ],
)
def test_out_refuses_arrays_that_do_not_fit(make_out, message):
    data = np.ones((2, 3), np.float32)
    with pytest.raises(AttributeValueError, match=message):
        pad(data, [1, 1, 1, 2], out=make_out())


def test_out_must_have_the_widened_unicode_dtype():
    data = np.array(["a", "bb"])
    with pytest.raises(AttributeValueError, match=r"out has dtype <U2; .* has dtype <U5$"):
        pad(data, [1, 1], constant_value="hello", out=np.empty(4, "<U2"))
    out = np.empty(4, "<U5")
    pad(data, [1, 1], constant_value="hello", out=out)
    assert out.tolist() == ["hello", "a", "bb", "hello"]


@pytest.mark.parametrize(
    "views",
    [
        lambda buf: (buf[:, 1:3], buf),  # data inside out
        lambda buf: (buf, buf),  # the same array, zero pads
        lambda buf: (buf[0:2], buf[1:3]),  # overlapping rows
    ],
)
def test_out_sharing_memory_with_data_is_refused(views):
    buf = np.arange(12, dtype=np.float64).reshape(3, 4)
    data, out = views(buf)
    pads = [(o - d) // 2 for o, d in zip(out.shape, data.shape, strict=True)]
    pads = pads + [o - d - p for o, d, p in zip(out.shape, data.shape, pads, strict=True)]
    before = buf.copy()
    with pytest.raises(AttributeValueError, match=r"^out shares memory with data; "):
        pad(data, pads, out=out)
    assert_identical(buf, before)


def test_out_beside_data_in_one_buffer_is_accepted():
    buf = np.arange(16, dtype=np.float64).reshape(2, 8)
    data, out = buf[0, :4], buf[1]
    pad(data, [2, 2], mode="reflect", out=out)
    assert out.tolist() == [2.0, 1.0, 0.0, 1.0, 2.0, 3.0, 2.0, 1.0]


# --------------------------------------------------------------------------------------
# Properties
# --------------------------------------------------------------------------------------


@st.composite
def arrays_and_pads(draw, min_pad=0):
    rank = draw(st.integers(1, 4))
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=rank, max_size=rank)))
    dtype = draw(st.sampled_from([np.int32, np.float32, np.uint8, ml_dtypes.bfloat16, object]))
    data = make_data(dtype, shape, np.random.default_rng(draw(st.integers(0, 2**32 - 1))))
    pads = draw(st.lists(st.integers(min_pad, 6), min_size=2 * rank, max_size=2 * rank))
    return data, pads


@settings(max_examples=60, deadline=None)
@given(case=arrays_and_pads(), mode=st.sampled_from(MODES))
def test_pad_then_crop_returns_the_input(case, mode):
    data, pads = case
    padded = pad(data, pads, mode=mode)
    assert_identical(pad(padded, [-p for p in pads]), data)
    rank = data.ndim
    slices = tuple(slice(b, b + n) for b, n in zip(pads[:rank], data.shape, strict=True))
    assert_identical(padded[slices], data)


@settings(max_examples=40, deadline=None)
@given(case=arrays_and_pads(), mode=st.sampled_from(MODES), data_st=st.data())
def test_zero_pads_are_the_identity(case, mode, data_st):
    data, _ = case
    axes = data_st.draw(st.permutations(range(data.ndim)))
    axes = axes[: data_st.draw(st.integers(0, data.ndim))]
    out = pad(data, [0] * (2 * len(axes)), axes=axes, mode=mode)
    assert_identical(out, data)
    assert not np.shares_memory(out, data)


@settings(max_examples=60, deadline=None)
@given(case=arrays_and_pads(min_pad=-2), mode=st.sampled_from(MODES))
def test_shape_formula_and_oracle(case, mode):
    data, pads = case
    rank = data.ndim
    begins, ends = pads[:rank], pads[rank:]
    cropped = [
        d - max(-b, 0) - max(-e, 0) for d, b, e in zip(data.shape, begins, ends, strict=True)
    ]
    touched_and_empty = [
        n <= 0 and (b, e) != (0, 0) for n, b, e in zip(cropped, begins, ends, strict=True)
    ]
    net = [d + b + e for d, b, e in zip(data.shape, begins, ends, strict=True)]
    if min(net) < 0 or (mode != "constant" and any(touched_and_empty)):
        with pytest.raises(AttributeValueError):
            pad(data, pads, mode=mode)
        return
    expected_shape = tuple(d + b + e for d, b, e in zip(data.shape, begins, ends, strict=True))
    assert plan_pad(data.shape, pads, mode=mode).output_shape == expected_shape
    out = pad(data, pads, mode=mode)
    assert out.shape == expected_shape
    zero = "" if data.dtype == object else np.zeros((), data.dtype)[()]
    assert_identical(out, oracle(data, pads, zero, mode=mode))


# --------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(pads=[1, 2, 3]), r"^pads has 3 values; it needs 2 \* rank = 4 for a rank-2 input; "
         r"give axes"),
        (dict(pads=[1, 2, 3], axes=[0, 1]), r"^pads has 3 values; it needs 2 \* len\(axes\) = 4$"),
        (
            dict(pads=[0, 0, 0, 0], axes=[0, 5]),
            r"^axes\[1\]=5 is out of range \[-2, 1\] for a rank-2 input$",
        ),
        (
            dict(pads=[0, 0], axes=[-3]),
            r"^axes\[0\]=-3 is out of range \[-2, 1\] for a rank-2 input$",
        ),
        (dict(pads=[0, 0, 0, 0], axes=[1, -1]), r"^axes repeats axis 1 \(given as 1 and -1\)$"),
        (dict(pads=[0, 0, 0, 0], axes=[0, 0]), r"^axes repeats axis 0 \(given as 0 and 0\)$"),
        (
            dict(pads=[0, 0, 0, 0], mode="symmetric"),
            r"^mode 'symmetric' is not an ONNX Pad mode; choose constant, reflect, edge or wrap$",
        ),
        (
            dict(pads=[0, 0, 0, 0], mode="Reflect"),
            r"^mode 'Reflect' is not an ONNX Pad mode.*lowercase",
        ),
        (dict(pads=[0, 0, 0, 0], mode=""), r"^mode '' is not an ONNX Pad mode"),
        (
            dict(pads=[0, -2, 0, 0], mode="reflect"),
            r"^axis 1 is empty after cropping \(dim 2, pads -2/0\); "
            r"reflect needs at least one element$",
        ),
        (
            dict(pads=[0, -1, 0, -1], mode="edge"),
            r"^axis 1 is empty after cropping \(dim 2, pads -1/-1\); edge needs at least one",
        ),
        (dict(pads=[0, -1, 0, -1], mode="constant"), None),  # cropped to empty: fine
        (
            dict(pads=[0, -2, 0, 1], mode="wrap"),
            r"^axis 1 is empty after cropping \(dim 2, pads -2/1\); "
            r"wrap needs at least one element$",
        ),
        (dict(pads=[0, -3, 0, 1]), None),  # out_dim = 2 - 3 + 1 = 0: an empty axis
        (
            dict(pads=[-2, 0, -2, 0]),
            r"^axis 0 \(dim 3, pads -2/-2\) would have dim \+ begin \+ end = -1 elements; "
            r"Pad needs >= 0$",
        ),
        (dict(pads=[0, 1.5, 0, 0]), r"^pads\[1\]=1.5 is not an integer$"),
        (dict(pads=[0, True, 0, 0]), r"^pads\[1\]=True is not an integer$"),
        (
            dict(pads=np.array([0.0, 1.0, 0.0, 0.0])),
            r"^pads must hold integers; got an array of float64",
        ),
        (
            dict(pads=np.zeros((2, 2), np.int64)),
            r"^pads must be a 1-D list of integers; got an array of shape \(2, 2\)$",
        ),
        (dict(pads="0 1 0 1"), r"^pads must be a sequence of integers; got str"),
        (dict(pads=3), r"^pads must be a sequence of integers; got int 3$"),
        (dict(pads=[0, 0], axes=[0.0]), r"^axes\[0\]=0.0 is not an integer$"),
        (
            dict(pads=[0, 0, 0, 0], constant_value=np.array([1.0, 2.0])),
            r"one-element tensor; got shape \(2,\)$",
        ),
    ],
)
def test_attribute_errors(kwargs, message):
    data = np.zeros((3, 2), np.float32)
    if message is None:
        assert pad(data, **kwargs).shape == (3, 0)
        return
    with pytest.raises(AttributeValueError, match=message):
        pad(data, **kwargs)


def test_empty_axis_without_cropping_names_it():
    with pytest.raises(
        AttributeValueError, match=r"^axis 0 is empty \(dim 0, pads 1/0\); edge needs"
    ):
        pad(np.zeros((0, 2)), [1, 0, 0, 0], mode="edge")


def test_rank_zero_has_no_axes():
    with pytest.raises(
        AttributeValueError, match=r"^axes\[0\]=0 is out of range \(it has no axes\) for a rank-0"
    ):
        pad(np.array(1.0), [0, 0], axes=[0])


def test_plan_pad_validates_without_data():
    with pytest.raises(AttributeValueError, match="symmetric"):
        plan_pad((2, 2), [0, 0, 0, 0], mode="symmetric")


@pytest.mark.parametrize(
    "data",
    [
        np.zeros(2, "datetime64[s]"),
        np.zeros(2, "S3"),
        np.zeros(2, [("a", np.int8), ("b", np.float32)]),
        np.zeros(2, "V4"),
    ],
)
def test_unsupported_dtypes(data):
    with pytest.raises(UnsupportedDtypeError, match=r"^Pad does not support the element type"):
        pad(data, [1, 1])


def test_constant_value_is_validated_in_every_mode():
    with pytest.raises(AttributeValueError, match="does not fit uint8"):
        pad(np.zeros(2, np.uint8), [1, 1], constant_value=300, mode="edge")


# --------------------------------------------------------------------------------------
# coerce_constant_value
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "dtype", "expected"),
    [
        (255, np.uint8, 255),
        (2**64 - 1, np.uint64, 2**64 - 1),
        (-(2**63), np.int64, -(2**63)),
        (2.0, np.int32, 2),
        (True, np.int8, 1),
        (np.float64(4.0), np.uint16, 4),
        (7, ml_dtypes.int4, 7),
        (-1.5, np.float32, -1.5),
        (1e-50, np.float32, 0.0),
        (-np.inf, np.float16, -np.inf),
        (np.inf, ml_dtypes.bfloat16, np.inf),
        (448, ml_dtypes.float8_e4m3fn, 448.0),
        (1, np.bool_, True),
        (False, np.bool_, False),
        (3, np.complex64, 3),
        (1 + 2j, np.complex64, 1 + 2j),
        ("abc", object, "abc"),
        ("3", "<U1", "3"),
        ("", object, ""),
        (np.str_("x"), object, "x"),
    ],
)
def test_coerce_accepts(value, dtype, expected):
    result = coerce_constant_value(value, dtype)
    if np.dtype(dtype).kind in "OU":
        assert type(result) is str and result == expected
    else:
        assert isinstance(result, np.generic) and result.dtype == np.dtype(dtype)
        assert result == np.array(expected).astype(dtype)[()]


@pytest.mark.parametrize("value", [float("nan"), -float("nan"), np.float64("nan")])
@pytest.mark.parametrize(
    "dtype", [np.float16, np.float32, np.float64, ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn]
)
def test_coerce_accepts_nan_for_float_types(value, dtype):
    assert np.isnan(float(coerce_constant_value(value, dtype)))


@pytest.mark.parametrize(
    ("dtype", "what"),
    [(np.int8, "an integer"), (np.float32, "a number"), (np.bool_, "a boolean"),
     (np.complex64, "a number")],
)
def test_coerce_takes_typed_values_only(dtype, what):
    """Text is the command line's business (padconv_cli.constant_text): the kernel refuses it."""
    with pytest.raises(AttributeValueError, match=f"constant_value '1' is not {what}"):
        coerce_constant_value("1", dtype)


@pytest.mark.parametrize(
    ("value", "dtype", "message"),
    [
        (300, np.uint8, r"^constant_value 300 does not fit uint8 \[0, 255\]$"),
        (-1, np.uint32, r"^constant_value -1 does not fit uint32 \[0, 4294967295\]$"),
        (8, ml_dtypes.int4, r"does not fit int4 \[-8, 7\]$"),
        (float("nan"), np.int64, r"is not an integer"),
        (float("inf"), np.int16, r"is not an integer"),
        (1e40, np.float32, r"does not fit float32 \[-3.40282e\+38, 3.40282e\+38\]$"),
        (70000.0, np.float16, r"does not fit float16"),
        (float("inf"), ml_dtypes.float8_e4m3fn,
         r"^constant_value inf: float8_e4m3fn has no infinity$"),
        (float("nan"), ml_dtypes.float4_e2m1fn, r"^constant_value nan: float4_e2m1fn has no NaN$"),
        (0, ml_dtypes.float8_e8m0fnu, r"does not fit float8_e8m0fnu"),
        (2, np.bool_,
         r"^constant_value 2 is not a boolean; a bool tensor needs True, False, 0 or 1$"),
        (complex(1e39, 1), np.complex64, r"does not fit complex64"),
        (1.5, np.uint8, r"^constant_value 1.5 is not an integer; a uint8 tensor needs an integer$"),
        (1 + 2j, np.float64, r"is complex"),
        (np.complex64(1), np.float32, r"is complex"),
        (10**400, np.float64, r"does not fit float64"),
        (0.0, np.bool_, r"is not a boolean"),
        (0, object, r"^constant_value 0 is not a string; a string tensor needs a string$"),
        (1.5, "<U3", r"^constant_value 1.5 is not a string; a string tensor needs a string$"),
        (b"x", object, r"is not a string"),
    ],
)
def test_coerce_refuses(value, dtype, message):
    with pytest.raises(AttributeValueError, match=message):
        coerce_constant_value(value, dtype)


def test_coerce_refuses_unsupported_dtype():
    with pytest.raises(UnsupportedDtypeError):
        coerce_constant_value(1, "datetime64[s]")


def test_coerce_keeps_same_type_scalars_exactly():
    value = np.array([0x7FC00123], np.uint32).view(np.float32)[0]
    assert coerce_constant_value(value, np.float32).view(np.uint32) == 0x7FC00123


def test_element_types_are_exactly_pad25s():
    import onnx.defs

    from padconv_cli.dtypes import ONNX_TYPE_NAMES, onnx_elem_type, parse_dtype
    from padconv_cli.ops.onnx_graph import onnx_type_string

    (constraint,) = [c for c in onnx.defs.get_schema("Pad", 25).type_constraints
                     if c.type_param_str == "T"]
    allowed = set(constraint.allowed_type_strs)
    assert {onnx_type_string(parse_dtype(n)) for n in pad_module.PAD_ELEMENT_TYPES} == allowed
    known = set(onnx.TensorProto.DataType.values())
    for name in ONNX_TYPE_NAMES:  # every type padconv can read: accepted iff Pad-25 lists it
        dtype = parse_dtype(name)
        if onnx_elem_type(dtype) not in known:  # newer than the installed onnx (float6 < 1.22)
            continue
        if onnx_type_string(dtype) in allowed:
            assert pad(np.zeros(2, dtype), [1, 0]).shape == (3,)
        else:
            with pytest.raises(UnsupportedDtypeError):
                pad(np.zeros(2, dtype), [1, 0])


@pytest.mark.parametrize(
    ("dtype", "name"),
    [(ml_dtypes.float6_e2m3fn, "float6e2m3"), (ml_dtypes.float6_e3m2fn, "float6e3m2"),
     (ml_dtypes.float8_e4m3b11fnuz, "float8_e4m3b11fnuz"), (np.longdouble, "float128"),
     # int1 exists from ml_dtypes 0.5.5 on; the lowest allowed version (0.5.4) lacks it
     *([(ml_dtypes.int1, "int1")] if hasattr(ml_dtypes, "int1") else [])],
)
def test_types_outside_pad25_are_refused_by_plan_and_run(dtype, name):
    from padconv_cli.models import resolve_call
    from padconv_cli.ops import plan_call

    data = np.zeros((2, 2), dtype)
    expected = (f"Pad does not support the element type {name}; Pad-25 takes "
                f"{pad_module.PAD_ELEMENT_TYPES_TEXT}")
    for refused in (
        lambda: pad(data, [1, 1, 0, 0]),
        lambda: plan_pad(data.shape, [1, 1, 0, 0], dtype=data.dtype),
        lambda: plan_call(resolve_call("Pad", (data,), {"pads": (1, 1, 0, 0)}).call),  # --explain
    ):
        with pytest.raises(UnsupportedDtypeError) as error:
            refused()
        assert str(error.value) == expected
    assert "float4e2m1" in expected and "string" in expected
