"""The one table of operators: what padconv knows about Pad and Conv, in one place.

Each :class:`Operator` entry knows its command name, its data inputs, the attribute defaults of
a call built from flags alone, the ONNX versions it implements (``--emit-onnx`` and
``--from-model`` choose among them), and four functions working from a plan:

* ``plan(shapes, dtype, attributes)``: the public planner (``plan_pad`` / ``plan_conv``),
  called once per call by :mod:`padconv_cli.pipeline`;
* ``run(plan, arrays, attributes)``: the in-memory kernel on that plan (no planning again);
* ``needs(arrays, plan, dtype, attributes, fmt)``: output bytes as written and working memory
  (:mod:`padconv_cli.needs`), which the resource gate checks;
* ``output_dtype(dtype, attributes, plan)``: the result's element type;
* ``run_engine(engine, source, others, plan, attributes, settings)``: the tiled or dask
  engine on that plan.

Code that would otherwise test ``op_type == "Pad"`` asks :func:`operator` for the entry.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from padconv_cli.errors import AttributeValueError


@dataclass(frozen=True)
class Operator:
    """One operator padconv implements (module docstring)."""

    name: str
    command: str
    input_names: tuple[str, ...]
    versions: tuple[int, ...]
    defaults: Mapping[str, Any]
    plan: Callable[[Sequence[Any], np.dtype, Mapping[str, Any]], Any]
    run: Callable[[Any, Sequence[Any], Mapping[str, Any]], np.ndarray]
    needs: Callable[..., Any]
    output_dtype: Callable[[np.dtype, Mapping[str, Any], Any], np.dtype]
    run_engine: Callable[..., Any]
    output_name: str = "Y"
    extra: Mapping[str, Any] = field(default_factory=dict)

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
    from padconv_cli.kernels.pad_values import fill_value

    return fill_value(attributes.get("constant_value"), dtype, plan)


def _run_pad(plan: Any, arrays: Sequence[Any], attributes: Mapping[str, Any]) -> np.ndarray:
    from padconv_cli.kernels.pad import pad_planned

    data = np.asarray(arrays[0])
    return pad_planned(data, plan, _pad_fill(data.dtype, attributes, plan))


def _pad_needs(arrays: Sequence[Any], plan: Any, dtype: np.dtype,
               attributes: Mapping[str, Any], fmt: str) -> Any:
    from padconv_cli.needs import pad_needs

    fill = _pad_fill(dtype, attributes, plan)
    return pad_needs(arrays[0], plan, _pad_output_dtype(dtype, attributes, plan), fill, fmt)


def _pad_output_dtype(dtype: np.dtype, attributes: Mapping[str, Any], plan: Any) -> np.dtype:
    from padconv_cli.kernels.pad_values import output_dtype

    return output_dtype(dtype, _pad_fill(dtype, attributes, plan))


def _pad_engine(engine: str, source: Any, others: Sequence[Any], plan: Any,
                attributes: Mapping[str, Any], settings: Mapping[str, Any]) -> Any:
    arguments = (attributes["pads"], attributes.get("constant_value"), attributes.get("axes"),
                 attributes.get("mode", "constant"))
    if engine == "tiled":
        from padconv_cli.outofcore.pad_tiles import tiled_pad

        return tiled_pad(source, settings["output"], *arguments, plan=plan,
                         memory_limit=settings["memory_limit"],
                         show_progress=settings["show_progress"])
    from padconv_cli.engines.dask_engine import dask_pad

    return dask_pad(settings["source_path"], settings["output"], *arguments, plan=plan,
                    **settings["dask"])


# --- Conv ------------------------------------------------------------------------------------


def _plan_conv(shapes: Sequence[Any], dtype: np.dtype, attributes: Mapping[str, Any]) -> Any:
    from padconv_cli.kernels.conv_plan import plan_conv

    shapes = list(shapes) + [None] * (3 - len(shapes))
    if shapes[1] is None:
        raise AttributeValueError("Conv needs W", param="W")
    return plan_conv(shapes[0], shapes[1], shapes[2], **attributes)


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


def _conv_engine(engine: str, source: Any, others: Sequence[Any], plan: Any,
                 attributes: Mapping[str, Any], settings: Mapping[str, Any]) -> Any:
    from padconv_cli.errors import InputError

    w, b = (list(others) + [None, None])[:2]
    if w is None:
        raise InputError("conv: W is required", param="W")
    if engine == "tiled":
        from padconv_cli.outofcore.conv_tiles import tiled_conv

        return tiled_conv(source, w, b, settings["output"], plan=plan,
                          memory_limit=settings["memory_limit"],
                          show_progress=settings["show_progress"], **attributes)
    from padconv_cli.engines.dask_engine import dask_conv

    return dask_conv(settings["source_path"], w, b, settings["output"], plan=plan,
                     **settings["dask"], **attributes)


PAD_VERSIONS = (1, 2, 11, 13, 18, 19, 21, 23, 24, 25)
CONV_VERSIONS = (1, 11, 22)

PAD = Operator(
    name="Pad", command="pad", input_names=("data",), versions=PAD_VERSIONS,
    defaults={"pads": None, "constant_value": None, "axes": None, "mode": "constant"},
    plan=_plan_pad, run=_run_pad, needs=_pad_needs, output_dtype=_pad_output_dtype,
    run_engine=_pad_engine, output_name="output",
)
CONV = Operator(
    name="Conv", command="conv", input_names=("X", "W", "B"), versions=CONV_VERSIONS,
    defaults={"auto_pad": "NOTSET", "dilations": None, "group": 1, "kernel_shape": None,
              "pads": None, "strides": None},
    plan=_plan_conv, run=_run_conv, needs=_conv_needs, output_dtype=_conv_output_dtype,
    run_engine=_conv_engine,
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
