"""Inputs an attacker or a careless user sends that are valid: the result must be exactly the
specification's (numpy.pad for Pad, the float64 loop oracle within the dot-product bound for
Conv), on every engine, with the inputs untouched and the memory bounded. A wrong result with
exit 0 is the worst failure there is.

Also: report commands' own exit codes on inputs that must not compare equal.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hostile.attack_corpus import (
    OUT,
    Accepted,
    Case,
    Exits,
    _hardlink,
    _symlink,
    conv_model,
    npy,
    npz,
    tensor_proto,
    zarr_store,
)
from hostile.runner import MAX_PEAK_RSS_BYTES
from oracles import assert_conv_within_bound

RNG = np.random.default_rng(20261201)


def _pad_oracle(array: np.ndarray, pads: list[int], mode: str, value=0) -> np.ndarray:
    """ONNX Pad by numpy: crop the negative pads, then numpy.pad the positive ones."""
    rank = array.ndim
    if rank == 0:
        return array.copy()
    begin, end = pads[:rank], pads[rank:]
    crop = tuple(slice(max(-b, 0), array.shape[i] - max(-e, 0))
                 for i, (b, e) in enumerate(zip(begin, end, strict=True)))
    cropped = array[crop]
    widths = [(max(b, 0), max(e, 0)) for b, e in zip(begin, end, strict=True)]
    if mode == "constant":
        return np.pad(cropped, widths, mode="constant", constant_values=value)
    return np.pad(cropped, widths, mode={"reflect": "reflect", "edge": "edge",
                                         "wrap": "wrap"}[mode])


def _same_bits(got: np.ndarray, expected: np.ndarray) -> None:
    assert got.shape == expected.shape, (got.shape, expected.shape)
    assert got.dtype == expected.dtype, (got.dtype, expected.dtype)
    if got.dtype.kind in "OU":
        assert got.tolist() == expected.tolist()
    else:
        assert got.tobytes() == np.ascontiguousarray(expected).tobytes()


def _expect_pad(array: np.ndarray, pads: list[int], mode: str = "constant", value=0,
                output: str = "out.npy"):
    expected = _pad_oracle(array, pads, mode, value)

    def check(case_dir: Path) -> None:
        got = np.load(case_dir / output, allow_pickle=False)
        _same_bits(got, expected.astype(got.dtype) if got.dtype.kind in "OU" else expected)

    return Accepted(check)


def _pad_case(name: str, array: np.ndarray, pads: list[int], mode: str = "constant",
              flags: tuple[str, ...] = (), stored: np.ndarray | None = None,
              value=0) -> Case:
    args = ("pad", "x.npy", "--pads", *map(str, pads), "--mode", mode, *flags, *OUT)
    stored = array if stored is None else stored
    value = "" if array.dtype.kind == "U" and value == 0 else value
    return Case(name, args, _expect_pad(array, pads, mode, value), {"x.npy": npy(stored)})


def _typed(dtype, shape=(3, 4)) -> np.ndarray:
    count = int(np.prod(shape))
    if np.dtype(dtype).kind == "b":
        return (np.arange(count) % 3 == 0).reshape(shape)
    if np.dtype(dtype).kind == "U":
        return np.array([f"s{i}\u00e9" * (i % 3) for i in range(count)]).reshape(shape)
    if np.dtype(dtype).kind == "c":
        return (np.arange(count) + 1j * np.arange(count)[::-1]).astype(dtype).reshape(shape)
    values = np.arange(count).reshape(shape) - count // 2
    if np.dtype(dtype).kind == "u":
        values = values + count
    return values.astype(dtype)


def _pad_dtype_cases() -> list[Case]:
    dtypes = ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
              "float16", "float32", "float64", "complex64", "complex128", "bool", "<U4"]
    cases = []
    for index, dtype in enumerate(dtypes):
        label = np.dtype(dtype).name.replace("<", "")
        array = _typed(dtype)
        modes = (("constant", [1, 2, 0, 1]), ("reflect", [2, 3, 1, 5]),
                 ("edge", [0, -1, 2, 1]), ("wrap", [3, 1, -1, 6]))
        for mode, pads in modes[index % 2 :: 2]:  # every mode over the dtypes, two per dtype
            cases.append(_pad_case(f"pad_{label}_{mode}", array, pads, mode))
    return cases


def _pad_layout_cases() -> list[Case]:
    base = RNG.standard_normal((5, 6)).astype(np.float32)
    wide = np.iinfo(np.int64).max - np.arange(12, dtype=np.int64).reshape(3, 4)
    cases = []
    for engine in ("memory", "tiled", "dask"):
        flags = ("--engine", engine)
        cases += [
            _pad_case(f"pad_fortran_order_{engine}", base, [1, 2, 3, 0], "reflect", flags,
                      np.asfortranarray(base)),
            _pad_case(f"pad_big_endian_{engine}", base, [0, 1, 1, 2], "wrap", flags,
                      base.astype(">f4")),
        ]
        if engine != "dask":  # a local cluster costs seconds: two dask cases are enough here
            cases += [
                _pad_case(f"pad_int64_beyond_2_53_{engine}", wide, [1, 1, 1, 1], "edge", flags,
                          wide.astype(">i8")),
                _pad_case(f"pad_crop_to_empty_{engine}", base, [0, -6, 0, 0], "constant",
                          flags),
            ]
    nan_bits = np.array([0x7FC00001, 0xFFC12345, 0x7F800000, 0x80000000], np.uint32)
    cases.append(_pad_case("pad_nan_payloads_and_negative_zero", nan_bits.view(np.float32),
                           [2, 2], "reflect"))
    cases.append(_pad_case("pad_reflect_more_than_the_axis", np.arange(3, dtype=np.int16),
                           [7, 9], "reflect"))
    cases.append(_pad_case("pad_wrap_more_than_the_axis", np.arange(3, dtype=np.int16),
                           [7, 9], "wrap"))
    cases.append(_pad_case("pad_empty_axis_constant", np.zeros((0, 3), np.float32),
                           [2, 0, 1, 0], "constant", ("--constant-value", "-7.5"),
                           value=-7.5))
    cases.append(_pad_case("pad_constant_value_nan", base, [1, 1, 1, 1], "constant",
                           ("--constant-value", "nan"), value=np.nan))
    return cases


def _model_written(case_dir: Path) -> None:
    import onnx

    onnx.checker.check_model(onnx.load(case_dir / "one.onnx"), full_check=True)
    assert np.load(case_dir / "out.npy").shape == (1, 1, 2, 2)


def _pad_source_cases() -> list[Case]:
    array = np.arange(6, dtype=np.int32).reshape(2, 3)
    pads = [1, 0, 0, 2]
    args = ("--pads", *map(str, pads), *OUT)
    expect = _expect_pad(array, pads, "constant")
    model = conv_model(np.ones((1, 1, 1, 1), np.float32))
    from onnx import helper, numpy_helper

    graph = helper.make_graph([], "g", [], [], [numpy_helper.from_array(array, "a:b/c")])
    stored = helper.make_model(graph).SerializeToString()
    return [
        Case("source_pb_typed_field", ("pad", "x.pb", *args), expect,
             {"x.pb": tensor_proto(6, [2, 3], int32_data=array.ravel().tolist())}),
        Case("source_pb_external_data_inside", ("pad", "x.pb", *args), expect,
             {"x.pb": tensor_proto(6, [2, 3], external=[("location", "d.bin")]),
              "d.bin": array.tobytes()}),
        Case("source_pb_external_symlink_inside", ("pad", "x.pb", *args), expect,
             {"x.pb": tensor_proto(6, [2, 3], external=[("location", "s.bin")]),
              "d.bin": array.tobytes()}, _symlink("s.bin", "d.bin")),
        Case("source_npz_member_named", ("pad", "x.npz:second", *args), expect,
             {"x.npz": npz([("first.npy", npy(array * 9)), ("second.npy", npy(array))])}),
        Case("source_stdin_npy", ("pad", "-", *args), expect, stdin=npy(array)),
        Case("source_stdin_pb", ("pad", "-", *args), expect,
             stdin=tensor_proto(6, [2, 3], raw_data=array.tobytes())),
        Case("source_literal", ("pad", "[[0, 1, 2], [3, 4, 5]]", "--dtype", "int32", *args),
             expect),
        Case("source_pads_from_file", ("pad", "x.npy", "--pads", "@p.npy", *OUT), expect,
             {"x.npy": npy(array), "p.npy": npy(np.array(pads, np.int64))}),
        Case("source_pads_from_stdin", ("pad", "x.npy", "--pads", "@-", *OUT), expect,
             {"x.npy": npy(array)}, stdin=npy(np.array(pads, np.int8))),
        Case("source_model_initializer_with_colon_and_slash", ("pad", "m.onnx:a:b/c", *args),
             expect, {"m.onnx": stored}),
        Case("source_unicode_and_newline_file_name", ("pad", "\u00e9\n\u65e5.npy", *args),
             expect, {"\u00e9\n\u65e5.npy": npy(array)}),
        Case("source_name_starting_with_dash", ("pad", "--pads", *map(str, pads), *OUT,
                                                "--", "-x.npy"), expect, {"-x.npy": npy(array)}),
        Case("output_is_the_input", ("pad", "x.npy", "--pads", *map(str, pads), "-o", "x.npy"),
             _expect_pad(array, pads, output="x.npy"), {"x.npy": npy(array)}),
        Case("output_is_the_input_tiled", ("pad", "x.npy", "--pads", *map(str, pads),
                                           "--engine", "tiled", "-o", "x.npy"),
             _expect_pad(array, pads, output="x.npy"), {"x.npy": npy(array)}),
        Case("output_hardlink_of_the_input", ("pad", "x.npy", "--pads", *map(str, pads), "-o",
                                              "h.npy"), _expect_pad(array, pads, output="h.npy"),
             {"x.npy": npy(array)}, _hardlink("h.npy", "x.npy")),
        Case("emit_onnx_next_to_model_input", ("conv", "x.npy", "--from-model", "m.onnx",
                                               "--emit-onnx", "one.onnx", *OUT),
             Accepted(_model_written), {"x.npy": npy(np.ones((1, 1, 2, 2), np.float32)),
                                        "m.onnx": model}),
    ]


CONV_SHAPES = [
    ("c_zero_input_channels", (1, 0, 4, 4), (2, 0, 3, 3), {}, True),
    ("m_zero_output_channels", (1, 4, 4, 4), (0, 4, 3, 3), {}, False),
    ("n_zero_images", (0, 1, 4, 4), (1, 1, 3, 3), {}, True),
    ("spatial_zero_with_pads", (1, 1, 0, 5), (1, 1, 1, 1), {"pads": [1, 1, 1, 1]}, True),
    ("groups_two", (1, 2, 5, 5), (4, 1, 3, 3), {"group": 2}, False),
    ("depthwise_strided_dilated", (1, 3, 7, 7), (3, 1, 3, 3),
     {"group": 3, "strides": [3, 2], "pads": [2, 0, 1, 3], "dilations": [2, 1]}, True),
    ("depthwise_multiplier_two", (1, 6, 9, 9), (12, 1, 3, 3),
     {"group": 6, "pads": [0, 2, 1, 0]}, True),
    ("one_d_grouped", (2, 4, 6), (8, 1, 2), {"group": 4, "pads": [3, 3], "strides": [2]}, False),
    ("kernel_larger_than_input_padded", (1, 1, 4, 4), (1, 1, 5, 5), {"pads": [2, 2, 2, 2]}, True),
    ("dilation_beyond_input", (1, 1, 3, 3), (1, 1, 2, 2),
     {"dilations": [5, 5], "pads": [3, 3, 3, 3]}, False),
    ("stride_beyond_input", (1, 1, 5, 5), (1, 1, 3, 3), {"strides": [10, 10]}, True),
    ("same_upper_strided_dilated", (1, 1, 5, 5), (2, 1, 2, 2),
     {"auto_pad": "SAME_UPPER", "strides": [2, 2], "dilations": [2, 2]}, False),
    ("same_lower_even_kernel", (1, 1, 6, 6), (2, 1, 4, 4),
     {"auto_pad": "SAME_LOWER", "strides": [3, 1]}, True),
    ("three_d", (1, 2, 2, 2, 2), (2, 2, 1, 1, 1), {"pads": [1, 0, 0, 0, 1, 0]}, False),
    ("pads_larger_than_input", (1, 1, 1, 1), (1, 1, 1, 1), {"pads": [5, 5, 5, 5]}, True),
    ("batch_and_asymmetric", (3, 5, 11, 13), (7, 5, 3, 3),
     {"pads": [1, 2, 0, 1], "strides": [2, 3]}, False),
]


def _conv_args(attrs: dict) -> list[str]:
    words = []
    for key, value in attrs.items():
        words += [f"--{key.replace('_', '-')}", *map(str, value if isinstance(value, list)
                                                     else [value])]
    return words


def _onnx_reference_conv(x, w, attrs) -> np.ndarray:
    """onnx.reference's Conv in float64: padding as zeros that multiply the weights, so
    0 * inf = NaN as in onnxruntime and PyTorch (the loop oracle skips padded taps)."""
    from onnx import helper
    from onnx.reference import ReferenceEvaluator

    node = helper.make_node("Conv", ["X", "W"], ["Y"], **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(n, 11, None)
                                            for n in ("X", "W")],
                              [helper.make_tensor_value_info("Y", 11, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    with np.errstate(invalid="ignore"):
        return ReferenceEvaluator(model).run(None, {"X": x.astype(np.float64),
                                                    "W": w.astype(np.float64)})[0]


def _expect_conv(x, w, b, attrs, runtime_reference: bool = False):
    def check(case_dir: Path) -> None:
        got = np.load(case_dir / "out.npy")
        assert got.dtype == x.dtype
        expected = _onnx_reference_conv(x, w, attrs) if runtime_reference else None
        with np.errstate(invalid="ignore"):
            assert_conv_within_bound(got, x, w, b, expected=expected, **attrs)

    return Accepted(check)


def _conv_cases() -> list[Case]:
    cases = []
    for index, (label, xs, ws, attrs, bias) in enumerate(CONV_SHAPES):
        dtype = (np.float32, np.float64, np.float16)[index % 3]
        x = RNG.standard_normal(xs).astype(dtype)
        w = RNG.standard_normal(ws).astype(dtype)
        b = RNG.standard_normal(ws[0]).astype(dtype) if bias else None
        files = {"x.npy": npy(x), "w.npy": npy(w)}
        inputs = ["x.npy", "w.npy"]
        if b is not None:
            files["b.npy"] = npy(b)
            inputs.append("b.npy")
        engines = ("memory", "tiled", "dask")[: 3 if index in (0, 10) else 1 + index % 2]
        for engine in engines:
            args = ("conv", *inputs, *_conv_args(attrs), "--engine", engine, *OUT)
            cases.append(Case(f"conv_{label}_{engine}", args, _expect_conv(x, w, b, attrs),
                              files))
    x = np.full((1, 1, 3, 3), np.inf, np.float32)
    w = np.zeros((1, 1, 2, 2), np.float32)
    cases.append(Case("conv_inf_times_zero_is_nan", ("conv", "x.npy", "w.npy", *OUT),
                      _expect_conv(x, w, None, {}, True), {"x.npy": npy(x), "w.npy": npy(w)}))
    w = np.full((1, 1, 3, 3), np.inf, np.float32)
    x = np.ones((1, 1, 3, 3), np.float32)
    cases.append(Case("conv_padding_zero_times_inf_weight",
                      ("conv", "x.npy", "w.npy", "--pads", "1", "1", "1", "1", *OUT),
                      _expect_conv(x, w, None, {"pads": [1, 1, 1, 1]}, True),
                      {"x.npy": npy(x), "w.npy": npy(w)}))
    return cases


def _exit_codes() -> list[Case]:
    big = np.array([2**53, 2**53 + 1], np.int64)
    return [
        Case("compare_int64_beyond_float64_differs", ("compare", "a.npy", "b.npy"), Exits(1),
             {"a.npy": npy(big), "b.npy": npy(np.array([2**53, 2**53], np.int64))}),
        Case("compare_uint64_top_values_differ", ("compare", "a.npy", "b.npy"), Exits(1),
             {"a.npy": npy(np.array([2**64 - 1], np.uint64)),
              "b.npy": npy(np.array([2**64 - 2], np.uint64))}),
        Case("compare_nan_against_number_differs", ("compare", "a.npy", "b.npy"), Exits(1),
             {"a.npy": npy(np.array([np.nan, 1], np.float32)),
              "b.npy": npy(np.array([1, np.nan], np.float32))}),
        Case("compare_infinite_tolerance_still_sees_nan", ("compare", "a.npy", "b.npy",
                                                           "--rtol", "inf", "--atol", "inf"),
             Exits(1), {"a.npy": npy(np.array([np.nan], np.float32)),
                        "b.npy": npy(np.array([0], np.float32))}),
        Case("compare_strings_differ_in_one_accent", ("compare", "a.npy", "b.npy"), Exits(1),
             {"a.npy": npy(np.array(["e"])), "b.npy": npy(np.array(["\u00e9"]))}),
        Case("compare_complex_differs_in_imaginary_part", ("compare", "a.npy", "b.npy"),
             Exits(1), {"a.npy": npy(np.array([1 + 1j], np.complex64)),
                        "b.npy": npy(np.array([1 - 1j], np.complex64))}),
        Case("compare_fortran_and_c_order_agree", ("compare", "a.npy", "b.npy"), Exits(0),
             {"a.npy": npy(np.arange(6.0).reshape(2, 3)),
              "b.npy": npy(np.asfortranarray(np.arange(6.0).reshape(2, 3)))}),
        Case("compare_big_endian_and_little_endian_agree", ("compare", "a.npy", "b.npy"),
             Exits(0), {"a.npy": npy(np.arange(6.0)), "b.npy": npy(np.arange(6.0).astype(">f8"))}),
    ]


def _zarr_cases() -> list[Case]:
    """Valid Zarr stores an attacker could lay out: a chunk that is a symlink to another file
    inside the store (allowed), a missing chunk (the fill value, Zarr's rule)."""
    array = np.arange(24, dtype=np.float32).reshape(4, 6)

    def link_inside(store: Path) -> None:
        (store / "copy").write_bytes((store / "0.0").read_bytes())
        (store / "0.0").unlink()
        (store / "0.0").symlink_to("copy")

    def drop_chunk(store: Path) -> None:
        (store / "1.1").unlink()

    missing = array.copy()
    missing[2:, 3:] = 0
    pads = ["1", "0", "0", "1"]
    return [
        Case("zarr_chunk_symlink_inside_the_store", ("pad", "z.zarr", "--pads", *pads, *OUT),
             _expect_pad(array, [1, 0, 0, 1]),
             build=zarr_store("z.zarr", array, (2, 3), edit=link_inside)),
        Case("zarr_missing_chunk_is_the_fill_value", ("pad", "z.zarr", "--pads", *pads, *OUT),
             _expect_pad(missing, [1, 0, 0, 1]),
             build=zarr_store("z.zarr", array, (2, 3), edit=drop_chunk)),
    ]


CASES = (_pad_dtype_cases() + _pad_layout_cases() + _pad_source_cases() + _conv_cases()
         + _exit_codes() + _zarr_cases())


@pytest.mark.parametrize("attack", [case.name for case in CASES])
def test_attack_gets_the_specifications_result(attack, attack_outcomes):
    outcome = attack_outcomes[attack]
    run, detail, expect = outcome.run, outcome.describe(), outcome.case.expect
    assert not run.timed_out, "hung: " + detail
    assert "Traceback" not in run.stderr_text, detail
    assert 0 < run.peak_rss_bytes < MAX_PEAK_RSS_BYTES, detail
    if isinstance(expect, Exits):
        assert run.returncode == expect.code, detail
        return
    assert run.returncode == 0, detail
    assert run.stderr == b"", detail
    expect.check(outcome.case_dir)
    changed = {name for name, stamp in outcome.before.items()
               if outcome.after.get(name) != stamp and not (outcome.root / name).is_dir()}
    allowed = {"case/x.npy"} if "x.npy" in outcome.case.args[-1:] else set()
    if "h.npy" in outcome.case.args[-1:]:
        allowed = {"case/x.npy", "case/h.npy"}
    assert changed <= allowed, f"inputs changed: {sorted(changed)}: {detail}"


def test_attack_result_case_names_are_unique():
    names = [case.name for case in CASES]
    assert len(names) == len(set(names)) and all(name.isidentifier() for name in names)
