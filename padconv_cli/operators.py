"""The one table of operators: what padconv knows about Pad and Conv, in one place.

Each :class:`Operator` entry knows its command name, its data inputs, the attribute defaults of
a call built from flags alone, the ONNX versions it implements (``--emit-onnx`` and
``--from-model`` choose among them), and four functions working from a plan:

* ``plan(shapes, dtype, attributes)``: the public planner (``plan_pad`` / ``plan_conv``),
  called once per call by :mod:`padconv_cli.pipeline`;
* ``run(plan, arrays, attributes)``: the in-memory kernel on that plan (no planning again);
* ``needs(arrays, plan, dtype, attributes, fmt)``: output bytes as written and working memory
  (:mod:`padconv_cli.needs`), which the resource gate checks;
* ``output_dtype(dtype, attributes, plan)``: the result's element type (a result ``run``
  holds as python strings, see :func:`padconv_cli.needs.strings_as_objects`, is written at
  that type's fixed width);
* ``max_inputs(version)``: how many inputs a node of that version may list;
* ``accumulates``: the result is a sum of products (Conv), compared against the dot-product
  error bound, not exactly;
* ``kernel(*arrays, **attributes)``: the public kernel (``pad`` / ``conv``).

The table sits below the modules that build on it (onnx_nodes, models, explain, emit,
crosscheck, audit): each of those keeps its per-operator function in a mapping keyed by the
entries' names (``{PAD.name: _pad_explanation, CONV.name: _conv_explanation}``), so every
import points downwards and the import-cycle check sees each reference.  Code that would
otherwise test ``op_type == "Pad"`` asks :func:`operator` for the entry.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from padconv_cli.errors import AttributeValueError


@dataclass(frozen=True)
class Operator:
    """One operator padconv implements (module docstring)."""

    name: str
    command: str
    input_names: tuple[str, ...]
    required_inputs: int  # the first inputs a call cannot go without (data; X and W)
    versions: tuple[int, ...]
    defaults: Mapping[str, Any]
    plan: Callable[[Sequence[Any], np.dtype, Mapping[str, Any]], Any]
    run: Callable[[Any, Sequence[Any], Mapping[str, Any]], np.ndarray]
    needs: Callable[..., Any]
    output_dtype: Callable[[np.dtype, Mapping[str, Any], Any], np.dtype]
    max_inputs: Callable[[int], int]
    kernel: Callable[..., np.ndarray]
    output_name: str = "Y"
    accumulates: bool = False

    @property
    def newest_version(self) -> int:
        """The newest ONNX version of the operator padconv implements."""
        return self.versions[-1]


# --- Pad -------------------------------------------------------------------------------------


def _plan_pad(shapes: Sequence[Any], dtype: np.dtype, attributes: Mapping[str, Any]) -> Any:
    from padconv_cli.kernels.pad_plan import plan_pad

    return plan_pad(shapes[0], attributes["pads"], attributes.get("axes"),
                    attributes.get("mode", "constant"), dtype=dtype)


def _pad_fill(dtype: np.dtype, attributes: Mapping[str, Any], plan: Any) -> Any:
    from padconv_cli.kernels.pad_plan import fill_value

    return fill_value(attributes.get("constant_value"), dtype, plan)


def _pad_kernel(*arrays: Any, **attributes: Any) -> np.ndarray:
    from padconv_cli.kernels.pad import pad  # the kernels load on use (start-up time)

    return pad(*arrays, **attributes)


def _run_pad(plan: Any, arrays: Sequence[Any], attributes: Mapping[str, Any]) -> np.ndarray:
    from padconv_cli.kernels.pad import pad_planned
    from padconv_cli.needs import strings_as_objects

    data = np.asarray(arrays[0])
    fill = _pad_fill(data.dtype, attributes, plan)
    if strings_as_objects(_pad_output_dtype(data.dtype, attributes, plan), plan):
        data = data.astype(object)  # wide strings: held as python strings, written in pieces
    return pad_planned(data, plan, fill)


def _pad_needs(arrays: Sequence[Any], plan: Any, dtype: np.dtype,
               attributes: Mapping[str, Any], fmt: str) -> Any:
    from padconv_cli.needs import pad_needs

    fill = _pad_fill(dtype, attributes, plan)
    return pad_needs(arrays[0], plan, _pad_output_dtype(dtype, attributes, plan), fill, fmt)


def _pad_output_dtype(dtype: np.dtype, attributes: Mapping[str, Any], plan: Any) -> np.dtype:
    from padconv_cli.kernels.pad_values import output_dtype

    return output_dtype(dtype, _pad_fill(dtype, attributes, plan))


# --- Conv ------------------------------------------------------------------------------------


def _plan_conv(shapes: Sequence[Any], dtype: np.dtype, attributes: Mapping[str, Any]) -> Any:
    from padconv_cli.kernels.conv_plan import plan_conv

    shapes = list(shapes) + [None] * (3 - len(shapes))
    if shapes[1] is None:
        raise AttributeValueError("Conv needs W", param="W")
    return plan_conv(shapes[0], shapes[1], shapes[2], **attributes)


def _conv_kernel(*arrays: Any, **attributes: Any) -> np.ndarray:
    from padconv_cli.kernels.conv import conv

    return conv(*arrays, **attributes)


def _run_conv(plan: Any, arrays: Sequence[Any], attributes: Mapping[str, Any]) -> np.ndarray:
    from padconv_cli.kernels.conv import conv_planned

    x, w, *rest = arrays
    return conv_planned(plan, x, w, rest[0] if rest else None)


def _conv_needs(arrays: Sequence[Any], plan: Any, dtype: np.dtype,
                attributes: Mapping[str, Any], fmt: str) -> Any:
    from padconv_cli.needs import conv_needs

    return conv_needs(tuple(arrays), plan, dtype)


def _conv_output_dtype(dtype: np.dtype, attributes: Mapping[str, Any], plan: Any) -> np.dtype:
    return np.dtype(dtype)


PAD_VERSIONS = (1, 2, 11, 13, 18, 19, 21, 23, 24, 25)
CONV_VERSIONS = (1, 11, 22)

PAD = Operator(
    name="Pad", command="pad", input_names=("data",), required_inputs=1, versions=PAD_VERSIONS,
    defaults={"pads": None, "constant_value": None, "axes": None, "mode": "constant"},
    plan=_plan_pad, run=_run_pad, needs=_pad_needs, output_dtype=_pad_output_dtype,
    output_name="output",
    max_inputs=lambda version: 1 if version < 11 else (4 if version >= 18 else 3),
    kernel=_pad_kernel,
)
CONV = Operator(
    name="Conv", command="conv", input_names=("X", "W", "B"), required_inputs=2,
    versions=CONV_VERSIONS,
    defaults={"auto_pad": "NOTSET", "dilations": None, "group": 1, "kernel_shape": None,
              "pads": None, "strides": None},
    plan=_plan_conv, run=_run_conv, needs=_conv_needs, output_dtype=_conv_output_dtype,
    max_inputs=lambda version: 3, accumulates=True, kernel=_conv_kernel,
)
OPERATORS: dict[str, Operator] = {entry.name: entry for entry in (PAD, CONV)}
COMMANDS: dict[str, Operator] = {entry.command: entry for entry in (PAD, CONV)}


def operator(name: str) -> Operator:
    """The table entry of ``name`` (``Pad``/``Conv``, or the command ``pad``/``conv``)."""
    entry = OPERATORS.get(name) or COMMANDS.get(name)
    if entry is None:
        raise AttributeValueError(
            f"padconv implements {', '.join(OPERATORS)}, not {name!r}", param="operator"
        )
    return entry


def shape_of(value: Any) -> tuple[int, ...] | None:
    """The shape of an input (array, memory-mapped file, declared store) without reading it."""
    if value is None:
        return None
    shape = getattr(value, "shape", None)
    return tuple(int(d) for d in (shape if shape is not None else np.shape(value)))


def dtype_of(value: Any) -> np.dtype:
    """The element type of an input without reading it."""
    dtype = getattr(value, "dtype", None)
    return np.dtype(dtype) if dtype is not None else np.asarray(value).dtype


def plan_call(call: Any) -> Any:
    """The plan of a KernelCall (:class:`padconv_cli.onnx_nodes.KernelCall`) from its inputs'
    shapes and its attributes, by the operator's own planner."""
    entry = operator(call.op_type)
    shapes = [shape_of(a) for a in call.arrays]
    return entry.plan(shapes, dtype_of(call.arrays[0]), call.attributes)
