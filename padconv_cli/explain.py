"""``--explain``: what a call will do, from shapes only (nothing is computed).

A JSON-ready dict (:func:`explanation`) and its text (:func:`format_explanation`): the
operator's ``explain`` gives the attributes (each with its source: ``flag``, ``model`` or
``default``), the output dimensions with their formulas and the FLOPs; the inputs, output and
memory are the resource gate's figures (the operator's ``needs``).  Out of core (``tiled``,
``dask``) the memory limit bounds what is held at once; the in-memory figures are also given.
"""

from __future__ import annotations

import math
from typing import Any

from padconv_cli.dtypes import dtype_name
from padconv_cli.emit import operator_version
from padconv_cli.ops import dtype_of, operator, shape_of
from padconv_cli.units import human_bytes


def _inputs(resolved: Any, names: tuple[str, ...]) -> list[dict[str, Any]]:
    """Name, type, shape, bytes and origin of each input given (a declared one is not read)."""
    return [{"name": name, "dtype": dtype_name(dtype_of(array)), "shape": list(shape_of(array)),
             "bytes": int(math.prod(shape_of(array))) * dtype_of(array).itemsize,
             "from": "model" if name in resolved.embedded else "command line"}
            for name, array in zip(names, resolved.call.arrays, strict=False)
            if array is not None]


def explanation(resolved: Any, plan: Any, flags: set[str] | frozenset[str],
                fmt: str = "npy", engine: str = "memory",
                memory_limit: int | None = None) -> dict[str, Any]:
    """The explanation of a resolved call (module docstring); ``flags``: the attributes given
    on the command line; ``fmt``: the output's format (its bytes are the gate's figures);
    ``engine``: the engine the call runs on, within ``memory_limit`` bytes out of core."""
    call = resolved.call
    entry = operator(call.op_type)
    dtype = dtype_of(call.arrays[0])
    needs = entry.needs(call.arrays, plan, dtype, call.attributes, fmt)

    def source_of(name: str) -> str:
        return "flag" if name in flags else "model" if name in resolved.given else "default"

    described, origin = entry.explain(call, plan, source_of), resolved.origin
    info: dict[str, Any] = {"operator": call.op_type}
    if origin is not None:
        info["model"] = {"path": origin.path, "node": origin.label, "operator": origin.operator}
    choice = operator_version(call)
    info |= {
        "attributes": described["attributes"],
        "sources": described["sources"],
        "inputs": _inputs(resolved, entry.input_names),
        "output": {"shape": list(plan.output_shape), "bytes": needs.output,
                   "dtype": dtype_name(entry.output_dtype(dtype, call.attributes, plan)),
                   "format": fmt},
        **{key: described[key] for key in ("dims", "flops", "flops_formula")},
        "memory": {"inputs": needs.inputs, "output": needs.output_held,
                   "working": needs.working, "total": needs.total},
        "engine": {"name": engine} if engine == "memory" else
                  {"name": engine, "memory_limit": memory_limit},
        "onnx": {"operator": f"{choice.op_type}-{choice.version}", "opset": choice.opset,
                 "reason": choice.reason},
    }
    if described.get("rulings"):
        info["rulings"] = described["rulings"]
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
    lines += [f"  input  {entry['name']}: {_shape_text(entry)} ({entry['from']})"
              for entry in info["inputs"]]
    lines.append("  attributes:")
    width = max(len(name) for name in info["attributes"])
    for name, value in info["attributes"].items():
        shown = value if not isinstance(value, list) else "[" + ", ".join(map(str, value)) + "]"
        lines.append(f"    {name:<{width}}  {shown}  ({info['sources'][name]})")
    output = info["output"]
    lines.append(f"  output: {_shape_text(output)}, {human_bytes(output['bytes'])} written as "
                 f"{output['format']}")
    lines += [f"    dim {dim['axis']}: {dim['formula']}" for dim in info["dims"]]
    lines.append(f"  FLOPs: {info['flops']:,}  [{info['flops_formula']}]")
    memory, engine = info["memory"], info.get("engine", {"name": "memory"})
    in_memory = (f"{human_bytes(memory['total'])} = inputs {human_bytes(memory['inputs'])}"
                 f" + output {human_bytes(memory['output'])}"
                 f" + working {human_bytes(memory['working'])}")
    if engine["name"] == "memory":
        lines.append(f"  engine: memory; memory: {in_memory}")
    else:
        lines.append(f"  engine: {engine['name']}: the input read and the output written block"
                     f" by block, at most {human_bytes(engine['memory_limit'])} held at once"
                     f" (the memory limit)")
        lines.append(f"    in memory it would take {in_memory}")
    onnx = info["onnx"]
    lines.append(f"  ONNX: {onnx['operator']} at opset {onnx['opset']} ({onnx['reason']})")
    lines.extend(f"  ruling {r['name']}: {r['rule']}" for r in info.get("rulings", ()))
    lines.extend(f"  note: {note}" for note in info.get("notes", ()))
    return "\n".join(lines)

