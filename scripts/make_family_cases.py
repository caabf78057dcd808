"""Write padconv's own cases of the convolution family's rulings as ONNX backend-test folders.

One folder per ruling of ``padconv_cli/kernels/family_rulings.py`` (and a few corners), in
``padconv_cli/verification/family_cases/test_fam_<case>/``: ``model.onnx`` with the one
node, ``test_data_set_0/input_<i>.pb`` and ``output_0.pb``.  The expected outputs come from
the independent oracles of ``tests/family_oracles.py`` (float64 scatter-add, int64 loops,
exact rational requantization), not from padconv's kernels; another project can replay the
folders with its own runner.  ``padconv verify`` (no arguments) runs them.

Usage: python scripts/make_family_cases.py [--check]
"""

from __future__ import annotations

import filecmp
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
from onnx import helper

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
TARGET = ROOT / "padconv_cli" / "verification" / "family_cases"

from family_oracles import (  # noqa: E402
    oracle_conv_integer,
    oracle_conv_transpose,
    oracle_qlinear_conv,
)

from padconv_cli.verification.onnx_suite import write_case_folder  # noqa: E402

F32 = np.float32


def _values(shape, start=1.0, step=0.5, dtype=F32):
    """Distinct small values, exact in float32: start, start+step, ..."""
    count = int(np.prod(shape))
    return (start + step * np.arange(count)).reshape(shape).astype(dtype)


def conv_transpose_cases():
    """(name, node attributes, inputs): one per ConvTranspose ruling."""
    x = _values((1, 2, 3, 3))
    w = _values((2, 2, 3, 3), start=-2.0, step=0.25)
    b = np.array([0.5, -1.0], F32)
    x1 = _values((1, 1, 3))
    w1 = _values((1, 1, 3), start=1.0, step=1.0)
    b1 = np.array([10.0], F32)
    return [
        ("same_in_times_stride", {"strides": [2, 2], "auto_pad": "SAME_UPPER",
                                         "output_padding": [1, 1]}, [x, w, b]),
        ("same_lower_odd_split", {"strides": [2, 2], "auto_pad": "SAME_LOWER"}, [x, w, b]),
        ("floor_division_split", {"strides": [2], "output_shape": [6]}, [x1, w1, b1]),
        ("negative_pad_extends", {"strides": [2], "output_shape": [9]}, [x1, w1, b1]),
        ("output_shape_over_pads", {"strides": [2], "output_shape": [6],
                                         "pads": [2, 2]}, [x1, w1, b1]),
        ("output_padding_dilation", {"dilations": [2],
                                                     "output_padding": [1]}, [x1, w1, b1]),
        ("same_beyond_uncropped", {"strides": [3], "auto_pad": "SAME_UPPER"},
         [x1, np.array([[[2.0]]], F32), b1]),
        ("ct_grouped", {"group": 2},
         [x, _values((2, 2, 2, 2), start=-1.0, step=0.125), np.array([1, 2, 3, 4], F32)]),
    ]


def conv_integer_cases():
    """(name, attributes, inputs) of the ConvInteger rulings."""
    x = np.arange(1, 17, dtype=np.uint8).reshape(1, 1, 4, 4)
    w = np.array([[[[1, -2], [3, -4]]], [[[-1, 0], [2, 5]]]], np.int8)
    count = 33100
    big_x = np.full((1, 1, count), 255, np.uint8)
    big_w = np.full((1, 1, count), 255, np.uint8)
    return [
        ("int_pad_is_zero_point", {"pads": [1, 1, 1, 1]},
         [x, w, np.array(7, np.uint8), np.array(1, np.int8)]),
        ("int_per_channel_wz", {"pads": [0, 1, 0, 1]},
         [x, w, np.array(7, np.uint8), np.array([1, -3], np.int8)]),
        ("int32_wraps", {}, [big_x, big_w]),
    ]


def qlinear_conv_cases():
    """(name, attributes, inputs) of the QLinearConv rulings (the inputs in node order)."""
    count = 70000
    tie_x = np.array([[[-127, -100]]], np.int8)  # acc = -227 against w = [1, 1]
    tie = [tie_x, np.array(3570 * 2.0**-14, F32), np.array(0, np.int8),
           np.array([[[1, 1]]], np.int8), np.array(1.0, F32), np.array(0, np.int8),
           np.array(3405 * 2.0**-12, F32), np.array(0, np.int8)]
    half = [np.array([[[-99]]], np.int8), np.array(0.75, F32), np.array(0, np.int8),
            np.array([[[1]]], np.int8), np.array(1.0, F32), np.array(0, np.int8),
            np.array(5.5, F32), np.array(0, np.int8)]
    big = [np.full((1, 1, count), 255, np.uint8), np.array(1.0, F32), np.array(0, np.uint8),
           np.full((1, 1, count), 127, np.int8), np.array(1.0, F32), np.array(0, np.int8),
           np.array(2.0**25, F32), np.array(0, np.uint8)]
    x = np.arange(0, 48, 3, dtype=np.uint8).reshape(1, 1, 4, 4)
    per_channel = [x, np.array(0.5, F32), np.array(10, np.uint8),
                   np.array([[[[1, -2], [3, -4]]], [[[-1, 0], [2, 5]]]], np.int8),
                   np.array([0.25, 0.125], F32), np.array([0, 1], np.int8),
                   np.array(0.75, F32), np.array(100, np.uint8), np.array([7, -9], np.int32)]
    return [
        ("qlinear_tie", {}, tie),
        ("qlinear_not_float64", {}, half),
        ("qlinear_exact_acc", {}, big),
        ("qlinear_per_channel", {"pads": [1, 1, 1, 1]}, per_channel),
    ]


INPUT_NAMES = {
    "ConvTranspose": ["X", "W", "B"],
    "ConvInteger": ["x", "w", "x_zero_point", "w_zero_point"],
    "QLinearConv": ["x", "x_scale", "x_zero_point", "w", "w_scale", "w_zero_point",
                    "y_scale", "y_zero_point", "B"],
}
ORACLES = {"ConvTranspose": oracle_conv_transpose, "ConvInteger": oracle_conv_integer,
           "QLinearConv": oracle_qlinear_conv}
OPSETS = {"ConvTranspose": 22, "ConvInteger": 10, "QLinearConv": 10}


def _oracle_attributes(op: str, attributes: dict) -> dict:
    """The oracles take the spatial output_shape (the ruling reads a rank+2 one so)."""
    attributes = dict(attributes)
    shape = attributes.get("output_shape")
    if shape is not None and len(shape) > 2 and op == "ConvTranspose" and shape[:2] == [1, 1]:
        attributes["output_shape"] = shape[2:]
    return attributes


def all_cases():
    """(folder name, op, attributes, inputs) of every case."""
    for op, cases in (("ConvTranspose", conv_transpose_cases()),
                      ("ConvInteger", conv_integer_cases()),
                      ("QLinearConv", qlinear_conv_cases())):
        for name, attributes, inputs in cases:
            yield f"test_fam_{name}", op, attributes, inputs


GIT_ATTRIBUTES = ("# backend-test case data: protobuf bytes, never text\n"
                  "*.pb binary\n*.onnx binary\n")


def write_all(target: Path) -> None:
    """Every case folder under ``target``, and the .gitattributes that keeps them binary."""
    target.mkdir(parents=True, exist_ok=True)
    (target / ".gitattributes").write_text(GIT_ATTRIBUTES, encoding="utf-8")
    for folder, op, attributes, inputs in all_cases():
        output = ORACLES[op](*inputs, **_oracle_attributes(op, attributes))
        if op == "ConvTranspose":
            output = np.asarray(output).astype(inputs[0].dtype)
        names = INPUT_NAMES[op][: len(inputs)]
        node = helper.make_node(op, names, ["y"], name=folder[len("test_"):], **attributes)
        write_case_folder(target, folder, node, inputs, output, OPSETS[op])


def _same_tree(one: Path, other: Path) -> bool:
    comparison = filecmp.dircmp(one, other)
    if comparison.left_only or comparison.right_only or comparison.diff_files:
        return False
    return all(_same_tree(one / sub, other / sub) for sub in comparison.common_dirs)


def main(argv: list[str]) -> int:
    if "--check" in argv:
        with tempfile.TemporaryDirectory() as temp:
            write_all(Path(temp))
            if not TARGET.is_dir() or not _same_tree(Path(temp), TARGET):
                print(f"{TARGET} is out of date: run python scripts/make_family_cases.py",
                      file=sys.stderr)
                return 1
        return 0
    if TARGET.exists():
        shutil.rmtree(TARGET)
    write_all(TARGET)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
