"""Attacks that must be refused: exit 2, one line naming the file or flag and the rule, no
traceback, nothing on stdout, nothing created or changed (inputs included), bounded memory.

The cases are independent of ``hostile.cases`` (see ``hostile.attack_corpus``): extra outputs
aimed at inputs, ambiguous archives, element types numpy has and ONNX lacks, list syntax
Python's ``int()`` accepts and a user does not mean, environment variables, output targets,
TensorProto typed fields, external data keys, stdin used twice.
"""

from __future__ import annotations

import numpy as np
import pytest
from hostile.attack_corpus import (
    BFLOAT16,
    BOOL,
    COMPLEX64,
    CONV_FILES,
    FLOAT,
    FLOAT8E4M3FN,
    FLOAT16,
    INT4,
    INT8,
    INT16,
    OUT,
    UINT8,
    UINT32,
    X_NPY,
    Case,
    Refused,
    _directory,
    _fifo,
    _hardlink,
    _symlink,
    conv_model,
    npy,
    npz,
    tensor_proto,
    zarr_store,
    zip_with_method,
)
from hostile.runner import assert_refused_in_one_line

PAD = ("pad", "x.npy", "--pads", "1", "1", "1", "1")
CONV = ("conv", "x.npy", "w.npy")
MODEL = {"m.onnx": conv_model(np.ones((1, 1, 2, 2), np.float32))}


def _extra_outputs_onto_inputs() -> list[Case]:
    """--emit-onnx, --junit-xml and --png naming an input would destroy it."""
    words = ("is also an input",)
    x_files = {"x.npy": X_NPY, "y.npy": X_NPY}
    return [
        Case("emit_onnx_onto_pad_data", (*PAD, "--emit-onnx", "x.npy", *OUT),
             Refused(("--emit-onnx", "x.npy", *words)), x_files),
        Case("emit_onnx_onto_pad_data_to_stdout", (*PAD, "--emit-onnx", "x.npy"),
             Refused(("--emit-onnx", *words)), x_files),
        Case("emit_onnx_onto_pad_data_with_explain", (*PAD, "--emit-onnx", "./x.npy", "--explain"),
             Refused(("--emit-onnx", *words)), x_files),
        Case("emit_onnx_onto_pad_data_through_hardlink", (*PAD, "--emit-onnx", "h.npy", *OUT),
             Refused(("--emit-onnx", *words)), x_files, _hardlink("h.npy", "x.npy")),
        Case("emit_onnx_onto_pad_data_through_symlink", (*PAD, "--emit-onnx", "s.onnx", *OUT),
             Refused(("--emit-onnx", *words)), x_files, _symlink("s.onnx", "x.npy")),
        Case("emit_onnx_onto_conv_w", (*CONV, "--emit-onnx", "w.npy", *OUT),
             Refused(("--emit-onnx", "w.npy", *words)), CONV_FILES),
        Case("emit_onnx_onto_conv_bias", (*CONV, "b.npy", "--emit-onnx", "b.npy", *OUT),
             Refused(("--emit-onnx", "b.npy", *words)), CONV_FILES),
        Case("emit_onnx_onto_from_model", ("conv", "x.npy", "--from-model", "m.onnx",
                                           "--emit-onnx", "m.onnx", *OUT),
             Refused(("--emit-onnx", "m.onnx", *words)), {**CONV_FILES, **MODEL}),
        Case("emit_onnx_onto_model_of_a_stored_tensor", ("conv", "x.npy", "m.onnx:W",
                                                         "--emit-onnx", "m.onnx", *OUT),
             Refused(("--emit-onnx", "m.onnx", *words)), {**CONV_FILES, **MODEL}),
        Case("emit_onnx_onto_npz_of_a_member", ("pad", "a.npz:x", "--pads", "1", "1", "1", "1",
                                                "--emit-onnx", "a.npz", *OUT),
             Refused(("--emit-onnx", "a.npz", *words)), {"a.npz": npz([("x.npy", X_NPY)])}),
        Case("junit_xml_onto_audited_model", ("audit", "m.onnx", "--junit-xml", "m.onnx"),
             Refused(("--junit-xml", "m.onnx", *words)), MODEL),
        Case("junit_xml_onto_audit_input", ("audit", "m.onnx", "X=x.npy", "--junit-xml", "x.npy"),
             Refused(("--junit-xml", "x.npy", *words)), {**MODEL, **CONV_FILES}),
        Case("show_png_onto_shown_tensor", ("show", "x.npy", "--png", "x.npy"),
             Refused(("--png", "x.npy", *words)), x_files),
        Case("compare_png_onto_reference", ("compare", "x.npy", "y.npy", "--png", "x.npy"),
             Refused(("--png", "x.npy", *words)), x_files),
        Case("compare_png_onto_candidate", ("compare", "x.npy", "y.npy", "--png", "./y.npy"),
             Refused(("--png", *words)), x_files),
    ]


def _ambiguous_archives() -> list[Case]:
    """Two zip entries for one array name: readers disagree on which one is meant."""
    twice = npz([("a.npy", X_NPY), ("a.npy", npy(np.ones((2, 3), np.float32)))])
    both_names = npz([("a.npy", X_NPY), ("a", npy(np.ones((2, 3), np.float32)))])
    words = ("x.npz", "two entries")
    return [
        Case("npz_entry_twice_pad", ("pad", "x.npz", "--pads", "1", "1", "1", "1", *OUT),
             Refused(words), {"x.npz": twice}),
        Case("npz_entry_twice_named", ("pad", "x.npz:a", "--pads", "1", "1", "1", "1", *OUT),
             Refused(words), {"x.npz": twice}),
        Case("npz_entry_twice_show", ("show", "x.npz"), Refused(words), {"x.npz": twice}),
        Case("npz_entry_with_and_without_suffix", ("show", "x.npz:a"), Refused(words),
             {"x.npz": both_names}),
        Case("npz_entry_twice_compare", ("compare", "x.npz:a", "x.npz:a"), Refused(words),
             {"x.npz": twice}),
        Case("npz_entry_twice_as_conv_weight", ("conv", "x.npy", "x.npz:a", *OUT), Refused(words),
             {"x.npy": CONV_FILES["x.npy"], "x.npz": twice}),
    ]


def _unsupported_element_types() -> list[Case]:
    """numpy element types ONNX has no name for: refused naming the file."""
    arrays = {
        "datetime": np.array(["2020-01-01", "2021-01-01"], "datetime64[D]"),
        "timedelta": np.array([1, 2], "timedelta64[s]"),
        "structured": np.zeros(2, [("a", "<f4"), ("b", "<i4")]),
        "void": np.zeros(2, "V4"),
        "bytes": np.array([b"ab", b"c"], "S2"),
    }
    cases = []
    for kind, array in arrays.items():
        files = {"t.npy": npy(array)}
        base = ("pad", "t.npy", "--pads", "1", "1")
        cases += [
            Case(f"pad_{kind}_tensor", (*base, *OUT), Refused(("t.npy",)), files),
            Case(f"pad_{kind}_tensor_tiled", (*base, "--engine", "tiled", *OUT),
                 Refused(("t.npy",)), files),
            Case(f"pad_{kind}_tensor_explain", (*base, "--explain"), Refused(("t.npy",)), files),
        ]
    cases.append(Case("conv_datetime_x", ("conv", "t.npy", "w.npy", *OUT), Refused(("t.npy",)),
                      {"t.npy": npy(np.zeros((1, 1, 3, 3), "datetime64[s]")),
                       "w.npy": CONV_FILES["w.npy"]}))
    return cases


def _integer_list_syntax() -> list[Case]:
    """What Python's int() takes and a command line should not: underscores, non-ASCII
    digits, empty items between commas."""
    bad_words = {
        "underscore": "1_0", "arabic_indic_digit": "\u0661", "fullwidth_digit": "\uff11",
        "superscript": "\u00b2", "hex": "0x1", "float": "1.0", "exponent": "1e2",
        "double_sign": "--1",
    }
    cases = [Case(f"pads_{label}", ("pad", "x.npy", "--pads", word, "1", "1", "1", *OUT),
                  Refused(("--pads", "not an integer")), {"x.npy": X_NPY})
             for label, word in bad_words.items()]
    for label, text in {"double_comma": "1,,1,1,1", "trailing_comma": "1,1,1,1,",
                        "leading_comma": ",1,1,1,1", "lone_comma": ","}.items():
        cases.append(Case(f"pads_{label}", ("pad", "x.npy", "--pads", text, *OUT),
                          Refused(("--pads", "empty value")), {"x.npy": X_NPY}))
    for flag in ("--strides", "--dilations", "--kernel-shape"):
        cases.append(Case(f"conv_{flag[2:].replace('-', '_')}_underscore",
                          (*CONV, flag, "1_0", "1", *OUT), Refused((flag, "not an integer")),
                          CONV_FILES))
    cases.append(Case("axes_non_ascii_digit", (*PAD, "--axes", "\u0660", "\u0661", *OUT),
                      Refused(("--axes", "not an integer")), {"x.npy": X_NPY}))
    return cases


def _environment() -> list[Case]:
    """PADCONV_NATIVE_THREADS and PADCONV_NATIVE_ISA as a careless script sets them."""
    threads = {"beyond_c_long": "99999999999999999999", "near_2_62": str(2**62),
               "superscript_digit": "\u00b2", "arabic_digit": "\u0663", "zero": "0",
               "negative": "-2", "word": "four", "over_the_maximum": "100000"}
    cases = [Case(f"native_threads_{label}", (*CONV, *OUT),
                  Refused(("PADCONV_NATIVE_THREADS",)), CONV_FILES,
                  env={"PADCONV_NATIVE_THREADS": value})
             for label, value in threads.items()]
    cases += [Case(f"native_isa_{label}", (*CONV, *OUT), Refused(("PADCONV_NATIVE_ISA",)),
                   CONV_FILES, env={"PADCONV_NATIVE_ISA": value})
              for label, value in {"unknown": "sse9", "path": "../../lib"}.items()]
    return cases


def _output_targets() -> list[Case]:
    files = {"x.npy": X_NPY}
    return [
        Case("output_is_directory", (*PAD, "-o", "d"), Refused(("d", "directory")), files,
             _directory("d")),
        Case("output_names_a_folder", (*PAD, "-o", "out.npy/"), Refused(("out.npy/",)), files),
        Case("output_folder_missing", (*PAD, "-o", "nowhere/out.npy"),
             Refused(("nowhere",)), files),
        Case("output_dangling_symlink", (*PAD, "-o", "dangling.npy"), Refused(("dangling",)),
             files, _symlink("dangling.npy", "nowhere/x.npy")),
        Case("output_fifo_nobody_reads", (*PAD, "-o", "ff.npy"), Refused(("ff.npy", "fifo")),
             files, _fifo("ff.npy")),
        Case("output_suffix_txt", (*PAD, "-o", "out.txt"), Refused(("out.txt", "suffix")), files),
        Case("output_suffix_npz", (*PAD, "-o", "out.npz"), Refused(("out.npz", "suffix")), files),
        Case("output_suffix_onnx", (*PAD, "-o", "out.onnx"), Refused(("out.onnx",)), files),
        Case("output_suffix_disagrees_with_format", (*PAD, "-o", "out.npy", "--format", "pb"),
             Refused(("--format",)), files),
        Case("output_full_device", (*PAD, "-o", "/dev/full"), Refused(("/dev/full",)), files),
        Case("emit_onnx_is_directory", (*PAD, "--emit-onnx", "d", *OUT), Refused(("d",)), files,
             _directory("d")),
        Case("emit_onnx_to_stdout_dash", (*PAD, "--emit-onnx", "-", *OUT),
             Refused(("--emit-onnx",)), files),
    ]


def _typed_fields() -> list[Case]:
    """TensorProto typed fields holding values outside the element type (no silent wrap)."""
    protos = {
        "int8_300": tensor_proto(INT8, [2], int32_data=[300, 1]),
        "uint8_minus_one": tensor_proto(UINT8, [2], int32_data=[-1, 1]),
        "int16_70000": tensor_proto(INT16, [1], int32_data=[70000]),
        "bool_two": tensor_proto(BOOL, [2], int32_data=[2, 1]),
        "float16_bits_over_16": tensor_proto(FLOAT16, [1], int32_data=[0x13C00]),
        "bfloat16_bits_over_16": tensor_proto(BFLOAT16, [1], int32_data=[0x13F80]),
        "uint32_from_uint64_over": tensor_proto(UINT32, [1], uint64_data=[2**40]),
        "int4_packed_over_a_byte": tensor_proto(INT4, [2], int32_data=[0x1FF]),
        "float8_bits_over_a_byte": tensor_proto(FLOAT8E4M3FN, [1], int32_data=[0x1FF]),
        "complex64_odd_float_count": tensor_proto(COMPLEX64, [2], float_data=[1.0, 2.0, 3.0]),
        "string_not_utf8": tensor_proto(8, [1], string_data=[b"\xff\xfe"]),
    }
    return [Case(f"pb_{label}", ("pad", "t.pb", "--pads", "0", "0", *OUT), Refused(("t.pb",)),
                 {"t.pb": image}) for label, image in protos.items()]


def _external_keys() -> list[Case]:
    data = {"d.bin": np.arange(6, dtype=np.float32).tobytes()}

    def ext(*pairs):
        return {"t.pb": tensor_proto(FLOAT, [2, 3] if len(pairs) else [2], external=list(pairs)),
                **data}

    cases = {
        "location_twice_second_outside": (ext(("location", "d.bin"),
                                              ("location", "../secret.bin")), None),
        "offset_twice": (ext(("location", "d.bin"), ("offset", "0"), ("offset", "8")), None),
        "location_empty": (ext(("location", "")), None),
        "location_dot": (ext(("location", ".")), None),
        "location_nul": (ext(("location", "d.bin\x00.txt")), None),
        "location_backslash_parent": (ext(("location", "..\\secret.bin")), None),
        "location_through_symlinked_folder": (ext(("location", "sub/d.bin")),
                                              _symlink("sub", "../outside")),
        "location_fifo": (ext(("location", "f.bin")), _fifo("f.bin")),
        "location_directory": (ext(("location", "dd")), _directory("dd")),
        "unknown_key": (ext(("location", "d.bin"), ("evil", "1")), None),
        "length_not_a_number": (ext(("location", "d.bin"), ("length", "abc")), None),
        "length_shorter_than_dims": (ext(("location", "d.bin"), ("length", "4")), None),
        "raw_data_and_external": ({"t.pb": tensor_proto(
            FLOAT, [6], raw_data=np.ones(6, np.float32).tobytes(),
            external=[("location", "d.bin")]), **data}, None),
    }
    return [Case(f"pb_external_{label}", ("show", "t.pb"), Refused(("t.pb",)), files, build)
            for label, (files, build) in cases.items()]


def _archives_and_sources() -> list[Case]:
    member = X_NPY
    return [
        Case("npz_encrypted_entry", ("show", "z.npz"), Refused(("z.npz",)),
             {"z.npz": zip_with_method(member, 0, flags=1)}),
        Case("npz_deflate64_entry", ("show", "z.npz"), Refused(("z.npz", "compression")),
             {"z.npz": zip_with_method(member, 9)}),
        Case("npz_unknown_method_entry", ("show", "z.npz"), Refused(("z.npz", "compression")),
             {"z.npz": zip_with_method(member, 99)}),
        Case("npz_bzip2_entry", ("show", "z.npz"), Refused(("z.npz", "compression")),
             {"z.npz": npz([("a.npy", member)], 12)}),
        Case("npz_lzma_entry", ("show", "z.npz"), Refused(("z.npz", "compression")),
             {"z.npz": npz([("a.npy", member)], 14)}),
        Case("pads_file_is_a_device", ("pad", "x.npy", "--pads", "@/dev/zero", *OUT),
             Refused(("--pads", "/dev/zero")), {"x.npy": X_NPY}),
        Case("pads_file_is_a_directory", ("pad", "x.npy", "--pads", "@d", *OUT),
             Refused(("--pads", "directory")), {"x.npy": X_NPY}, _directory("d")),
        Case("pads_file_is_a_fifo", ("pad", "x.npy", "--pads", "@f", *OUT),
             Refused(("--pads",)), {"x.npy": X_NPY}, _fifo("f")),
        Case("pads_file_name_empty", ("pad", "x.npy", "--pads", "@", *OUT),
             Refused(("--pads",)), {"x.npy": X_NPY}),
        Case("pads_file_outside_format", ("pad", "x.npy", "--pads", "@/etc/hostname", *OUT),
             Refused(("--pads",)), {"x.npy": X_NPY}),
        Case("data_and_pads_both_stdin", ("pad", "-", "--pads", "@-", *OUT), Refused(("--pads",)),
             stdin=X_NPY),
        Case("show_stdin_twice", ("show", "-", "-"), Refused(("stdin",)), stdin=X_NPY),
        Case("conv_stdin_twice", ("conv", "-", "-", *OUT), Refused(("stdin",)), stdin=X_NPY),
        Case("compare_stdin_twice", ("compare", "-", "-"), Refused(("stdin",)), stdin=X_NPY),
        Case("compare_rtol_nan", ("compare", "x.npy", "x.npy", "--rtol", "nan"),
             Refused(("--rtol",)), {"x.npy": X_NPY}),
        Case("compare_atol_negative", ("compare", "x.npy", "x.npy", "--atol", "-1"),
             Refused(("--atol",)), {"x.npy": X_NPY}),
        Case("check_rtol_negative", (*PAD, "--check", "--check-rtol", "-1", *OUT),
             Refused(("--check-rtol",)), {"x.npy": X_NPY}),
        Case("check_atol_without_check", (*PAD, "--check-atol", "1", *OUT),
             Refused(("--check",)), {"x.npy": X_NPY}),
    ]


def _values_that_do_not_fit() -> list[Case]:
    lit = ("pad", "--pads", "1", "1", *OUT)
    constant = {"float32_1e400": ("float32", "1e400"), "float16_70000": ("float16", "70000"),
                "float8_1000": ("float8e4m3fn", "1000"), "float8_inf": ("float8e4m3fn", "inf"),
                "uint4_16": ("uint4", "16"), "bool_yes": ("bool", "yes"),
                "float32_hex": ("float32", "0x10"), "float32_complex": ("float32", "1+2j"),
                "int8_300": ("int8", "300"), "uint8_minus_1": ("uint8", "-1")}
    cases = [Case(f"constant_value_{label}", ("pad", "[1, 0]", "--dtype", dtype, "--pads", "1",
                                              "1", "--constant-value", value, *OUT),
                  Refused(("--constant-value",)))
             for label, (dtype, value) in constant.items()]
    literals = {"float32_1e39": ("[1e39]", "float32"), "float16_70000": ("[70000]", "float16"),
                "int64_nan": ("[nan]", "int64"), "int32_fraction": ("[1, 2.5]", "int32"),
                "bool_two": ("[1, 2]", "bool"), "uint4_twenty": ("[1, 20]", "uint4"),
                "arabic_digit": ("[\u0661]", "int64"), "string_mixed": ('["a", 1]', "string")}
    cases += [Case(f"literal_{label}", (lit[0], text, "--dtype", dtype, *lit[1:]),
                   Refused(("literal",)))
              for label, (text, dtype) in literals.items()]
    return cases


def _conv_misuse() -> list[Case]:
    files = CONV_FILES
    return [
        Case("conv_x_float64_w_float32", ("conv", "x64.npy", "w.npy", *OUT), Refused(()),
             {**files, "x64.npy": npy(np.zeros((1, 1, 5, 5), np.float64))}),
        Case("conv_bias_float16_for_float32", (*CONV, "b16.npy", *OUT), Refused(()),
             {**files, "b16.npy": npy(np.zeros(1, np.float16))}),
        Case("conv_bias_two_dims", (*CONV, "b2.npy", *OUT), Refused(()),
             {**files, "b2.npy": npy(np.zeros((1, 1), np.float32))}),
        Case("conv_w_zero_kernel_axis", ("conv", "x.npy", "w0.npy", *OUT), Refused(()),
             {**files, "w0.npy": npy(np.zeros((1, 1, 0, 3), np.float32))}),
        Case("conv_string_tensor", ("conv", "s.npy", "w.npy", *OUT), Refused(("s.npy",)),
             {**files, "s.npy": npy(np.array([[["a"]]]))}),
        Case("conv_from_model_missing_node", ("conv", "x.npy", "--from-model", "m.onnx",
                                              "--node", "nope", *OUT),
             Refused(("m.onnx", "nope")), {**files, **MODEL}),
        Case("conv_from_model_is_a_tensor", ("conv", "x.npy", "--from-model", "w.npy", *OUT),
             Refused(("w.npy",)), files),
        Case("audit_model_is_npy", ("audit", "x.npy"), Refused(("x.npy",)), files),
        Case("audit_input_name_unknown", ("audit", "m.onnx", "nope=x.npy"),
             Refused(("nope",)), {**files, **MODEL}),
        Case("verify_case_folder_missing", ("verify", "nowhere"), Refused(("nowhere",))),
    ]


def _replace_chunk(how: str):
    """An edit of a Zarr store: its chunk 0.0 replaced by something hostile."""
    import json
    import os

    def edit(store) -> None:
        chunk = store / "0.0"
        if how == "metadata_zero_chunk":
            meta = json.loads((store / ".zarray").read_text())
            meta["chunks"] = [0, 3]
            (store / ".zarray").write_text(json.dumps(meta))
            return
        chunk.unlink()
        if how == "symlink_outside":
            chunk.symlink_to(store.parent.parent / "outside" / "d.bin")
        elif how == "symlink_up_and_back":
            os.symlink("../../outside/d.bin", chunk)
        elif how == "hardlink_outside":
            os.link(store.parent.parent / "outside" / "d.bin", chunk)
        elif how == "fifo":
            os.mkfifo(chunk)
        elif how == "garbage":
            chunk.write_bytes(b"\x28\xb5\x2f\xfd" + bytes(range(40)))

    return edit


def _zarr_stores() -> list[Case]:
    """Zarr stores whose chunks lead out of the store, block, or cannot be decoded."""
    import numcodecs

    array = np.arange(24, dtype=np.float32).reshape(4, 6)
    cases = []
    for how, words in (("symlink_outside", ("z.zarr", "outside the store")),
                       ("symlink_up_and_back", ("z.zarr", "outside the store")),
                       ("hardlink_outside", ("z.zarr", "hard links", "--allow-hardlinks")),
                       ("fifo", ("z.zarr", "not a regular file"))):
        build = zarr_store("z.zarr", array, (2, 3), edit=_replace_chunk(how))
        cases.append(Case(f"zarr_chunk_{how}_show", ("show", "z.zarr"), Refused(words),
                          build=build))
        if how in ("symlink_outside", "fifo"):  # the engines' check is the same function
            cases.append(Case(f"zarr_chunk_{how}_dask_pad", ("pad", "z.zarr", "--pads", "1", "1",
                                                             "1", "1", "-o", "y.zarr"),
                              Refused(words), build=build))
        if how == "symlink_outside":
            cases.append(Case(f"zarr_chunk_{how}_to_npy", ("pad", "z.zarr", "--pads", "0", "0",
                                                           "0", "0", *OUT), Refused(words),
                              build=build))
    corrupt = zarr_store("z.zarr", array, (2, 3), compressor=numcodecs.Zstd(),
                         edit=_replace_chunk("garbage"))
    cases += [
        Case("zarr_chunk_corrupt_show", ("show", "z.zarr"), Refused(("z.zarr", "chunks")),
             build=corrupt),
        Case("zarr_chunk_corrupt_dask_pad", ("pad", "z.zarr", "--pads", "1", "1", "1", "1",
                                             "-o", "y.zarr"), Refused(("z.zarr", "chunks")),
             build=corrupt),
        Case("zarr_chunk_shape_zero_dask_pad", ("pad", "z.zarr", "--pads", "1", "1", "1", "1",
                                                "-o", "y.zarr"), Refused(("z.zarr", "chunk")),
             build=zarr_store("z.zarr", array, (2, 3), edit=_replace_chunk("metadata_zero_chunk"))),
    ]
    return cases


CASES = (_extra_outputs_onto_inputs() + _ambiguous_archives() + _unsupported_element_types()
         + _integer_list_syntax() + _environment() + _output_targets() + _typed_fields()
         + _external_keys() + _archives_and_sources() + _values_that_do_not_fit()
         + _conv_misuse() + _zarr_stores())


def _files_and_folders(outcome, before: bool = False) -> dict:
    """Each file's (size, mtime), each folder's name only: a temporary output created and
    removed again touches its folder's time stamp and leaves nothing."""
    entries = outcome.before if before else outcome.after
    return {name: None if (outcome.root / name).is_dir() else stamp
            for name, stamp in entries.items()}


@pytest.mark.parametrize("attack", [case.name for case in CASES])
def test_attack_is_refused_in_one_line_and_writes_nothing(attack, attack_outcomes):
    outcome = attack_outcomes[attack]
    detail = outcome.describe()
    assert_refused_in_one_line(outcome.run, detail, outcome.case.expect.words)
    assert _files_and_folders(outcome) == _files_and_folders(outcome, before=True), (
        "files created or changed: " + detail)


def test_attack_case_names_are_unique():
    names = [case.name for case in CASES]
    assert len(names) == len(set(names)) and all(name.isidentifier() for name in names)
