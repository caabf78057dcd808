"""``--explain``: what a Pad or Conv call will do, from shapes only (nothing is computed).

The explanation is a JSON-ready dict (:func:`explanation`) and its text form
(:func:`format_explanation`): the resolved attributes with where each came from (``flag``,
``model`` or ``default``), every output dimension with the formula that gave it, the FLOPs and
the memory the call needs.

FLOPs: Pad does no arithmetic (0).  Conv counts a multiply-add as 2:
``2 * N * M * prod(out_spatial) * (C/group) * prod(kernel)``, plus ``N * M * prod(out_spatial)``
additions for a bias.

Memory: the inputs, the output, and the working memory of the kernel.  Pad's are the
resource gate's (:func:`padconv_cli.needs.pad_needs`): nothing besides its output, except for a
string result, held as python strings and written at fixed width in pieces.  Conv needs the
native core's buffers (W packed for its register tiles and one panel of gathered inputs per
thread, or the padded input rows of one output row per thread for a depthwise Conv:
:func:`padconv_cli.kernels.conv_paths.scratch_bytes`; X is never copied padded) and, when the
element type is not float32/float64, float32 copies of X, W and the
output (sums are kept in float32).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from padconv_cli.onnx_nodes import CONV_INPUT_NAMES, PAD_INPUT_NAMES
from padconv_cli.operators import CONV, PAD, operator
from padconv_cli.units import human_bytes


def _python(value: Any) -> Any:
    """An attribute value as a Python value (numpy scalars -> Python); the JSON form is
    :func:`padconv_cli.json_output.jsonable`'s."""
    return value.item() if isinstance(value, np.generic) else value


def _attribute_sources(resolved: Any, names: list[str], flags: set[str]) -> dict[str, str]:
    """flag / model / default for each attribute name."""
    sources = {}
    for name in names:
        if name in flags:
            sources[name] = "flag"
        elif name in resolved.given:
            sources[name] = "model"
        else:
            sources[name] = "default"
    return sources


def _inputs(resolved: Any, names: tuple[str, ...]) -> list[dict[str, Any]]:
    from padconv_cli.dtypes import dtype_name

    described = []
    for name, array in zip(names, resolved.call.arrays, strict=False):
        if array is None:
            continue
        array = np.asarray(array)
        described.append({
            "name": name,
            "dtype": dtype_name(array.dtype),
            "shape": list(array.shape),
            "bytes": int(array.nbytes),
            "from": "model" if name in resolved.embedded else "command line",
        })
    return described


def _signed(value: int) -> str:
    return f"({value})" if value < 0 else str(value)


def _pad_dims(plan: Any, pads_by_axis: dict[int, tuple[int, int]]) -> list[dict[str, Any]]:
    """One entry per axis: ``out = dim + begin + end`` (negative pads crop first)."""
    dims = []
    for axis, ax in enumerate(plan.per_axis):
        begin, end = pads_by_axis.get(axis, (0, 0))
        formula = f"{ax.dim} + {_signed(begin)} + {_signed(end)} = {ax.out_dim}"
        dims.append({"axis": axis, "size": ax.out_dim, "formula": formula})
    return dims


def _pad_explanation(resolved: Any, plan: Any, flags: set[str], needs: Any) -> dict[str, Any]:
    from padconv_cli.kernels.pad import coerce_constant_value

    call = resolved.call
    data = np.asarray(call.arrays[0])
    value = call.attributes.get("constant_value")
    effective_value = coerce_constant_value(0 if data.dtype.kind not in "OU" else "", data.dtype)
    if value is not None:
        effective_value = value
    pads = [int(p) for p in call.attributes["pads"]]
    count = len(plan.axes)
    pads_by_axis = {axis: (pads[i], pads[count + i]) for i, axis in enumerate(plan.axes)}
    attributes = {
        "mode": plan.mode,
        "pads": pads,
        "axes": list(plan.axes),
        "constant_value": _python(effective_value),
    }
    return {
        "attributes": attributes,
        "sources": _attribute_sources(resolved, list(attributes), flags),
        "inputs": _inputs(resolved, PAD_INPUT_NAMES),
        "output": {"shape": list(plan.output_shape), "bytes": needs.output},
        "dims": _pad_dims(plan, pads_by_axis),
        "flops": 0,
        "flops_formula": "0 (Pad copies elements, no arithmetic)",
        "memory": {"inputs": needs.inputs, "output": needs.output_held,
                   "working": needs.working, "total": needs.total},
    }


def conv_working_bytes(plan: Any, dtype: np.dtype) -> int:
    """Conv's working memory: :func:`padconv_cli.kernels.conv_paths.working_bytes`, the one
    formula the kernel's paths state."""
    from padconv_cli.kernels.conv_paths import working_bytes

    return working_bytes(plan, np.dtype(dtype))


def _conv_dims(plan: Any) -> list[dict[str, Any]]:
    """N, M, then one spatial formula per axis (from the plan)."""
    n, m, *spatial = plan.output_shape
    dims = [
        {"axis": 0, "size": n, "formula": f"N = X.shape[0] = {n}"},
        {"axis": 1, "size": m, "formula": f"M = W.shape[0] = {m}"},
    ]
    for index, (size, formula) in enumerate(zip(spatial, plan.formulas, strict=True)):
        dims.append({"axis": index + 2, "size": size, "formula": formula})
    return dims


def _conv_explanation(resolved: Any, plan: Any, flags: set[str], needs: Any) -> dict[str, Any]:
    call = resolved.call
    has_bias = len(call.arrays) > 2 and call.arrays[2] is not None
    attributes = {
        "auto_pad": plan.auto_pad,
        "kernel_shape": list(plan.kernel_shape),
        "strides": list(plan.strides),
        "dilations": list(plan.dilations),
        "group": plan.group,
        "pads": list(plan.pads),
    }
    sources = _attribute_sources(resolved, list(attributes), flags)
    if sources["kernel_shape"] == "default":
        sources["kernel_shape"] = "W.shape[2:]"
    if plan.auto_pad in ("SAME_UPPER", "SAME_LOWER", "VALID"):
        sources["pads"] = f"auto_pad {plan.auto_pad}"
    bias_adds = math.prod(plan.output_shape) if has_bias else 0
    formula = "2 * N * M * prod(out_spatial) * (C/group) * prod(kernel_shape)"
    return {
        "attributes": attributes,
        "sources": sources,
        "inputs": _inputs(resolved, CONV_INPUT_NAMES),
        "output": {"shape": list(plan.output_shape), "bytes": needs.output},
        "dims": _conv_dims(plan),
        "flops": plan.flops + bias_adds,
        "flops_formula": formula + (" + N * M * prod(out_spatial) (bias)" if has_bias else ""),
        "memory": {"inputs": needs.inputs, "output": needs.output_held,
                   "working": needs.working, "total": needs.total},
    }


def explanation(resolved: Any, plan: Any, flags: set[str] | frozenset[str],
                fmt: str = "npy") -> dict[str, Any]:
    """The explanation of a resolved call (module docstring); ``flags`` names the attributes
    given on the command line; ``fmt`` is the output's format (npy or pb): the output bytes
    and memory are those that format writes, the figures the resource gate checks
    (:func:`padconv_cli.needs.pad_needs`, :func:`padconv_cli.needs.conv_needs`)."""
    from padconv_cli.dtypes import dtype_name
    from padconv_cli.emit import operator_version
    call = resolved.call
    entry = operator(call.op_type)
    dtype = np.asarray(call.arrays[0]).dtype
    needs = entry.needs(call.arrays, plan, dtype, call.attributes, fmt)
    body = _EXPLANATIONS[entry.name](resolved, plan, set(flags), needs)
    body["output"].update(dtype=dtype_name(dtype), format=fmt)
    choice = operator_version(call)
    info: dict[str, Any] = {"operator": call.op_type}
    if resolved.origin is not None:
        origin = resolved.origin
        info["model"] = {"path": origin.path, "node": origin.label, "operator": origin.operator}
    info.update(body)
    info["onnx"] = {"operator": f"{choice.op_type}-{choice.version}", "opset": choice.opset,
                    "reason": choice.reason}
    if call.notes:
        info["notes"] = list(call.notes)
    return info


def _shape_text(entry: dict[str, Any]) -> str:
    return f"{entry['dtype']}[{', '.join(str(d) for d in entry['shape'])}]"


def format_explanation(info: dict[str, Any]) -> str:
    """The text form of :func:`explanation`."""
    lines = [info["operator"]]
    if "model" in info:
        model = info["model"]
        lines[0] += f" from {model['path']} node {model['node']!r} ({model['operator']})"
    for entry in info["inputs"]:
        lines.append(f"  input  {entry['name']}: {_shape_text(entry)} ({entry['from']})")
    lines.append("  attributes:")
    width = max(len(name) for name in info["attributes"])
    for name, value in info["attributes"].items():
        shown = value if not isinstance(value, list) else "[" + ", ".join(map(str, value)) + "]"
        lines.append(f"    {name:<{width}}  {shown}  ({info['sources'][name]})")
    output = info["output"]
    lines.append(f"  output: {_shape_text(output)}, {human_bytes(output['bytes'])} written as "
                 f"{output['format']}")
    for dim in info["dims"]:
        lines.append(f"    dim {dim['axis']}: {dim['formula']}")
    lines.append(f"  FLOPs: {info['flops']:,}  [{info['flops_formula']}]")
    memory = info["memory"]
    lines.append(
        f"  memory: {human_bytes(memory['total'])} = inputs {human_bytes(memory['inputs'])}"
        f" + output {human_bytes(memory['output'])} + working {human_bytes(memory['working'])}"
    )
    onnx = info["onnx"]
    lines.append(f"  ONNX: {onnx['operator']} at opset {onnx['opset']} ({onnx['reason']})")
    lines.extend(f"  note: {note}" for note in info.get("notes", ()))
    return "\n".join(lines)


_EXPLANATIONS = {PAD.name: _pad_explanation, CONV.name: _conv_explanation}
