"""Corpus cases of the second reliability round: hard-linked external data, endless or
oversized stdin, the input limit, malformed model attributes, absurd sizes, output targets that
cannot mean what was typed, models whose reading used to be quadratic, unbounded lists.

Imported by :mod:`hostile.cases` at its end, once the builders it takes from there exist:
import ``hostile.cases``, not this module, to get the corpus.
"""

from __future__ import annotations

import io
import os
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
from hostile.cases import (  # hostile.cases imports this module at its end
    OUT,
    PAD_PB,
    X_NPY,
    Builder,
    Case,
    both,
    files,
    random_bytes,
    small_matrix,
    tensor_proto,
    valid_npy,
    work_dir,
)
from npy_bytes import header_dict, npy_image

FLOAT = 1


# --- builders --------------------------------------------------------------------------------


def hardlink(name: str, target: Callable[[Path], Path]) -> Builder:
    """case/NAME as a second hard link to ``target(root)`` (a file outside case/)."""

    def build(root: Path) -> None:
        os.link(target(root), work_dir(root) / name)

    return build


def _secret(root: Path) -> Path:
    return root / "secret.bin"


def _external_secret_pb(dims: tuple[int, ...] = (2, 3)) -> bytes:
    count = int(np.prod(dims))
    return tensor_proto(data_type=FLOAT, dims=list(dims),
                        external={"location": "hard.bin", "offset": 0, "length": count * 4})


def _model(nodes, initializers=(), inputs=(("X", (1, 1, 2, 3)),), opset: int = 13) -> bytes:
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape))
         for name, shape in inputs],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)], list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    return model.SerializeToString()


def _hardlinked_initializer_model(root: Path) -> bytes:
    from onnx import TensorProto, helper

    del root
    w = TensorProto()
    w.ParseFromString(_external_secret_pb((1, 1, 2, 3)))
    w.name = "W"
    return _model([helper.make_node("Conv", ["X", "W"], ["Y"], name="c")], [w])


def _attribute(name: str, kind: str):
    """An AttributeProto ``name`` of type ``kind`` (STRING, GRAPH, UNDEFINED, INT)."""
    from onnx import AttributeProto, helper

    attribute = AttributeProto(name=name, type=getattr(AttributeProto, kind))
    if kind == "STRING":
        attribute.s = b"2"
    elif kind == "GRAPH":
        attribute.g.CopyFrom(helper.make_graph([], "empty", [], []))
    else:
        attribute.i = 2
    return attribute


def _conv_model_with(attribute_name: str, kind: str) -> Callable[[Path], bytes]:
    def content(root: Path) -> bytes:
        from onnx import helper, numpy_helper

        w = numpy_helper.from_array(np.ones((2, 1, 1, 1), np.float32), "W")
        node = helper.make_node("Conv", ["X", "W"], ["Y"], name="c1")
        node.attribute.append(_attribute(attribute_name, kind))
        return _model([node], [w], inputs=(("X", (1, 2, 2, 2)),))

    return content


def _pad_model_with_constant(kind: str, name: str = "value_ints") -> bytes:
    from onnx import helper

    constant = helper.make_node("Constant", [], ["pads"], name="k")
    constant.attribute.append(_attribute(name, kind))
    pad = helper.make_node("Pad", ["X", "pads"], ["Y"], name="p1")
    return _model([constant, pad], inputs=(("X", (2, 3)),))


def _verify_case_dir(kind: str, name: str) -> Builder:
    def build(root: Path) -> None:
        from onnx import numpy_helper

        case = work_dir(root) / "test_bad_constant"
        (case / "test_data_set_0").mkdir(parents=True)
        (case / "model.onnx").write_bytes(_pad_model_with_constant(kind, name))
        for label, array in (("input_0", small_matrix()), ("output_0", np.zeros((4, 5)))):
            tensor = numpy_helper.from_array(np.asarray(array, np.float32), label)
            (case / "test_data_set_0" / f"{label}.pb").write_bytes(tensor.SerializeToString())

    return build


def _constants_and_ifs(count: int) -> Callable[[Path], bytes]:
    """``count`` Constant nodes and ``count`` If nodes with empty branches, and one Pad."""

    def content(root: Path) -> bytes:
        from onnx import helper

        empty = helper.make_graph([], "b", [], [])
        nodes = [helper.make_node("Constant", [], [f"c{i}"], value_ints=[1, 1, 1, 1])
                 for i in range(count)]
        nodes += [helper.make_node("If", [f"c{i}"], [], then_branch=empty, else_branch=empty)
                  for i in range(count)]
        nodes.append(helper.make_node("Pad", ["X", "c0"], ["Y"], name="p"))
        return _model(nodes, inputs=(("X", (2, 3)),))

    return content


def _ifs_with_foldable_branches(count: int) -> Callable[[Path], bytes]:
    """``count`` Constants, each read by an If whose branches fold it (an Identity)."""

    def content(root: Path) -> bytes:
        from onnx import helper

        nodes = [helper.make_node("Constant", [], [f"c{i}"], value_ints=[1, 1, 1, 1])
                 for i in range(count)]
        for i in range(count):
            branch = helper.make_graph([helper.make_node("Identity", [f"c{i}"], [f"d{i}"])],
                                       "b", [], [])
            nodes.append(helper.make_node("If", [f"c{i}"], [], then_branch=branch,
                                          else_branch=branch))
        nodes.append(helper.make_node("Pad", ["X", "c0"], ["Y"], name="p"))
        return _model(nodes, inputs=(("X", (2, 3)),))

    return content


def _npz_with_members(count: int) -> bytes:
    buffer = io.BytesIO()
    member = valid_npy(np.zeros(1, np.float32))
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        for index in range(count):
            archive.writestr(f"m{index}.npy", member)
    return buffer.getvalue()


def _npy_declaring(shape: tuple[int, ...], body: bytes = b"\0" * 64) -> bytes:
    return npy_image(header_dict("<f8", shape), body)


def _stdin(data: bytes) -> Callable[[Path], bytes]:
    return lambda root: data


MIB = 2**20
NINES = "9" * 400
PAD_STDIN = ("pad", "-", "--pads", "1", "1", *OUT)
PAD_STDIN_PADS = ("pad", "x.npy", "--pads", "@-", *OUT)
HAS_X = files(x__npy=X_NPY)


# --- the cases -------------------------------------------------------------------------------

MODEL_AND_STREAM_CASES = [
    Case("pb_external_hardlink_outside",
         "x.pb's external data hard.bin is a hard link to ROOT/secret.bin (sizes match)",
         PAD_PB, both(files(x__pb=_external_secret_pb()), hardlink("hard.bin", _secret)),
         ("hard.bin", "hard links", "--allow-hardlinks")),
    Case("show_pb_external_hardlink_outside",
         "`show` of the same hard-linked external data", ("show", "x.pb"),
         both(files(x__pb=_external_secret_pb()), hardlink("hard.bin", _secret)),
         ("hard.bin", "hard links")),
    Case("model_initializer_hardlink_outside",
         "a Conv model whose W initializer's external data is a hard link to ROOT/secret.bin",
         ("conv", "x.npy", "--from-model", "m.onnx", *OUT),
         both(files(x__npy=valid_npy(np.ones((1, 1, 2, 3), np.float32)),
                    m__onnx=_hardlinked_initializer_model), hardlink("hard.bin", _secret)),
         ("initializer 'W'", "hard links")),
    Case("stdin_zeros", "64 MiB of zero bytes on stdin", PAD_STDIN, HAS_X,
         ("<stdin>", "TensorProto"), stdin=_stdin(b"\0" * 64 * MIB)),
    Case("stdin_zeros_as_pads", "`--pads @-` with 64 MiB of zero bytes on stdin",
         PAD_STDIN_PADS, HAS_X, ("--pads", "<stdin>"), stdin=_stdin(b"\0" * 64 * MIB)),
    Case("stdin_yes", "`yes | padconv pad -`: 64 MiB of 'y\\n'", PAD_STDIN, HAS_X,
         ("<stdin>", "TensorProto"), stdin=_stdin(b"y\n" * 32 * MIB)),
    Case("stdin_random", "16 MiB of random bytes on stdin", PAD_STDIN, HAS_X,
         ("<stdin>",), stdin=_stdin(random_bytes(16 * MIB, 17))),
    Case("stdin_npy_header_terabytes",
         ".npy on stdin whose header declares 2^40 float64 (8 TiB), 64 bytes follow",
         PAD_STDIN, HAS_X, ("<stdin>", "declares"), ("--max-input-bytes", "truncated"),
         stdin=_stdin(_npy_declaring((2**40,)))),
    Case("stdin_tensorproto_stream_over_limit",
         "8 MiB of well-formed int32_data fields on stdin, --max-input-bytes 64K",
         (*PAD_STDIN, "--max-input-bytes", "64K"), HAS_X,
         ("<stdin>", "--max-input-bytes"),
         stdin=_stdin(b"\x28\x01" * 4 * MIB)),
    Case("stdin_raw_data_length_over_limit",
         "a TensorProto raw_data field announcing 2 GiB, --max-input-bytes 1M",
         (*PAD_STDIN, "--max-input-bytes", "1M"), HAS_X, ("<stdin>", "--max-input-bytes"),
         stdin=_stdin(b"\x08\x02\x10\x01\x4a\x80\x80\x80\x80\x08" + b"\0" * MIB)),
    Case("stdin_npz_over_limit", "a 1 MiB .npz on stdin, --max-input-bytes 64K",
         (*PAD_STDIN, "--max-input-bytes", "64K"), HAS_X, ("<stdin>", "--max-input-bytes"),
         stdin=_stdin(_npz_with_members(1) + b"\0" * MIB)),
    Case("file_npy_over_input_limit", "a 2 MiB x.npy, --max-input-bytes 64K",
         ("pad", "big.npy", "--pads", "1", "1", "--max-input-bytes", "64K", *OUT),
         files(big__npy=valid_npy(np.zeros(MIB // 4, np.float64))),
         ("big.npy", "--max-input-bytes")),
    Case("tiled_read_over_input_limit",
         "a 2 MiB x.npy read by the tiled engine in one tile, --max-input-bytes 64K",
         ("pad", "big.npy", "--pads", "1", "1", "--engine", "tiled", "--max-input-bytes", "64K",
          *OUT),
         files(big__npy=valid_npy(np.zeros(MIB // 4, np.float64))),
         ("big.npy", "--max-input-bytes")),
    Case("model_over_input_limit", "a 1 MiB model, --max-input-bytes 64K",
         ("pad", "x.npy", "--from-model", "m.onnx", "--max-input-bytes", "64K", *OUT),
         both(HAS_X, files(m__onnx=_constants_and_ifs(10_000))), ("m.onnx", "--max-input-bytes")),
    Case("size_flag_memory_limit_400_nines", "--memory-limit of 400 nines",
         ("pad", "x.npy", "--pads", "1", "1", "1", "1", "--engine", "tiled", "--memory-limit",
          NINES, *OUT), HAS_X, ("--memory-limit", "too large")),
    Case("size_flag_max_output_400_nines", "--max-output-bytes of 400 nines",
         ("pad", "x.npy", "--pads", "1", "1", "1", "1", "--max-output-bytes", NINES, *OUT),
         HAS_X, ("--max-output-bytes", "too large")),
    Case("size_flag_max_input_400_nines", "--max-input-bytes of 400 nines",
         ("pad", "x.npy", "--pads", "1", "1", "1", "1", "--max-input-bytes", NINES, *OUT),
         HAS_X, ("--max-input-bytes", "too large")),
    Case("output_empty_path", "`-o ''`",
         ("pad", "x.npy", "--pads", "1", "1", "1", "1", "-o", ""), HAS_X, ("-o", "empty")),
    Case("output_same_as_emit_onnx", "`-o out.npy --emit-onnx out.npy`",
         ("pad", "x.npy", "--pads", "1", "1", "1", "1", *OUT, "--emit-onnx", "out.npy"),
         HAS_X, ("--emit-onnx", "out.npy")),
    Case("output_same_as_emit_onnx_other_spelling",
         "`-o out.npy --emit-onnx ../case/out.npy` (the same file, spelled differently)",
         ("pad", "x.npy", "--pads", "1", "1", "1", "1", *OUT, "--emit-onnx",
          "../case/out.npy"), HAS_X, ("--emit-onnx",)),
    Case("model_conv_group_string", "Conv `group` typed STRING",
         ("conv", "x.npy", "--from-model", "m.onnx", *OUT),
         files(x__npy=valid_npy(np.ones((1, 2, 2, 2), np.float32)),
               m__onnx=_conv_model_with("group", "STRING")), ("'group'", "'c1'", "STRING")),
    Case("model_conv_group_graph", "Conv `group` typed GRAPH",
         ("conv", "x.npy", "--from-model", "m.onnx", *OUT),
         files(x__npy=valid_npy(np.ones((1, 2, 2, 2), np.float32)),
               m__onnx=_conv_model_with("group", "GRAPH")), ("'group'", "GRAPH")),
    Case("model_conv_group_undefined",
         "Conv `group` of type UNDEFINED holding i=2 (was silently group=1)",
         ("conv", "x.npy", "--from-model", "m.onnx", *OUT),
         files(x__npy=valid_npy(np.ones((1, 2, 2, 2), np.float32)),
               m__onnx=_conv_model_with("group", "UNDEFINED")), ("'group'", "UNDEFINED")),
    Case("model_conv_strides_undefined", "Conv `strides` of type UNDEFINED",
         ("conv", "x.npy", "--from-model", "m.onnx", *OUT),
         files(x__npy=valid_npy(np.ones((1, 2, 2, 2), np.float32)),
               m__onnx=_conv_model_with("strides", "UNDEFINED")), ("'strides'", "UNDEFINED")),
    Case("model_constant_value_ints_string",
         "Constant feeding Pad's pads with value_ints typed STRING",
         ("pad", "x.npy", "--from-model", "m.onnx", *OUT),
         both(HAS_X, files(m__onnx=_pad_model_with_constant("STRING"))),
         ("'value_ints'", "STRING")),
    Case("model_constant_value_ints_graph",
         "Constant feeding Pad's pads with value_ints typed GRAPH",
         ("pad", "x.npy", "--from-model", "m.onnx", *OUT),
         both(HAS_X, files(m__onnx=_pad_model_with_constant("GRAPH"))),
         ("'value_ints'", "GRAPH")),
    Case("verify_constant_value_typed_int",
         "verify: a Constant whose `value` is typed INT", ("verify", "test_bad_constant"),
         _verify_case_dir("INT", "value"), ("'value'", "INT")),
    Case("verify_constant_value_ints_string",
         "verify: a Constant whose `value_ints` is typed STRING",
         ("verify", "test_bad_constant"), _verify_case_dir("STRING", "value_ints"),
         ("'value_ints'", "STRING")),
    Case("model_40k_constants_40k_if_subgraphs",
         "a 4 MB model with 40k Constant and 40k If nodes (was quadratic: minutes)",
         ("pad", "x.npy", "--from-model", "m.onnx", "--node", "nosuch", *OUT),
         both(HAS_X, files(m__onnx=_constants_and_ifs(40_000))), ("nosuch",)),
    Case("model_20k_if_subgraphs_with_folding",
         "20k Constants, each read by an If whose two branches fold it (40k subgraphs to fold; "
         "folding once listed every visible constant per subgraph)",
         ("pad", "x.npy", "--from-model", "m.onnx", "--node", "nosuch", *OUT),
         both(HAS_X, files(m__onnx=_ifs_with_foldable_branches(20_000))), ("nosuch",)),
    Case("npz_10k_members",
         "an .npz with 10k members and no member named (the list of 100k was 800 KB long)",
         ("pad", "x.npz", "--pads", "1", "1", *OUT), files(x__npz=_npz_with_members(10_000)),
         ("ambiguous", "and 9988 more")),
    Case("npz_10k_members_wrong_name", "the same archive, member `nosuch` asked for",
         ("pad", "x.npz:nosuch", "--pads", "1", "1", *OUT),
         files(x__npz=_npz_with_members(10_000)), ("nosuch", "and 9988 more")),
]


