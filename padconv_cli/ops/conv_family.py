"""Pieces the convolution family's operator modules share (ConvTranspose, ConvInteger,
QLinearConv): the Conv attributes written resolved into an emitted node, the rulings a plan
applied as explain lines, the per-dimension formulas of a Conv geometry, the node mapping of
an operator whose attributes are Conv's, and the integer operators' tiles.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from padconv_cli.ops.protocol import KernelCall


def ruling_lines(rulings: Sequence[str]) -> list[dict[str, str]]:
    """``[{name, rule}]`` for the rulings a plan applied (kernels/family_rulings.py)."""
    from padconv_cli.kernels.family_rulings import ruling_text

    return [{"name": name, "rule": ruling_text(name)} for name in rulings]


def conv_dims(geometry: Any) -> list[dict[str, Any]]:
    """N, M, then one spatial formula per axis of a Conv geometry (``ConvPlan``)."""
    n, m, *spatial = geometry.output_shape
    dims = [
        {"axis": 0, "size": n, "formula": f"N = x.shape[0] = {n}"},
        {"axis": 1, "size": m, "formula": f"M = w.shape[0] = {m}"},
    ]
    for index, (size, formula) in enumerate(zip(spatial, geometry.formulas, strict=True)):
        dims.append({"axis": index + 2, "size": size, "formula": formula})
    return dims


def conv_attributes(geometry: Any) -> dict[str, Any]:
    """A Conv geometry's attributes as resolved (kernel_shape from W, pads from auto_pad)."""
    return {
        "auto_pad": geometry.auto_pad,
        "kernel_shape": list(geometry.kernel_shape),
        "strides": list(geometry.strides),
        "dilations": list(geometry.dilations),
        "group": geometry.group,
        "pads": list(geometry.pads),
    }


def resolved_node_attributes(geometry: Any) -> dict[str, Any]:
    """The attributes an emitted node is written with: every one resolved, explicit pads
    (never auto_pad: the inputs have fixed shapes, and the pads leave no reading open)."""
    return {
        "kernel_shape": list(geometry.kernel_shape),
        "strides": list(geometry.strides),
        "dilations": list(geometry.dilations),
        "group": int(geometry.group),
        "pads": list(geometry.pads),
    }


def attribute_sources(attributes: Mapping[str, Any], auto_pad: str, source_of: Any
                      ) -> dict[str, str]:
    """Where each explained attribute came from; kernel_shape from W, pads from auto_pad."""
    sources = {name: source_of(name) for name in attributes}
    if sources.get("kernel_shape") == "default":
        sources["kernel_shape"] = "W.shape[2:]"
    if auto_pad in ("SAME_UPPER", "SAME_LOWER", "VALID"):
        sources["pads"] = f"auto_pad {auto_pad}"
    return sources


def node_call(name: str, version: int, attributes: dict[str, Any], inputs: list,
              attribute_names: Sequence[str], low: int, high: int,
              required: Sequence[str]) -> KernelCall:
    """A node whose attributes are named ``attribute_names`` (Conv's, plus ConvTranspose's
    own) and whose inputs number ``low`` to ``high``, the ``required`` ones given."""
    from padconv_cli.ops.node_rules import (
        check_attribute_names,
        check_input_count,
        require_inputs,
    )

    operator = f"{name}-{version}"
    check_attribute_names(operator, attributes, attribute_names)
    check_input_count(operator, inputs, low, high)
    arrays = (inputs + [None] * high)[:high]
    require_inputs(operator, required, arrays)
    kwargs = {attribute: attributes.get(attribute) for attribute in attribute_names}
    kwargs["auto_pad"] = str(kwargs["auto_pad"] or "NOTSET")
    kwargs["group"] = int(1 if kwargs["group"] is None else kwargs["group"])
    return KernelCall(name, version, tuple(arrays), kwargs)


def model_slots(inputs: Sequence[Any], origin: Any, arrays: tuple, embedded: set[str]
                ) -> list[Any]:
    """A node's input arrays: the command line's, else the stored ones."""
    return [origin.slot(index, given, declared.name, f"give {declared.name.upper()} on the "
                        "command line", embedded, declared.name)
            for index, (declared, given) in enumerate(zip(inputs, arrays, strict=True))]


def declared(shapes: Sequence[Any], dtype: Any) -> list[Any]:
    """Stand-ins of inputs of these shapes, all of element type ``dtype`` (nothing held)."""
    from types import SimpleNamespace

    import numpy as np

    return [None if shape is None else SimpleNamespace(shape=tuple(shape), dtype=np.dtype(dtype))
            for shape in shapes]


def integer_tiles(call: KernelCall, made: Any, limit: int, out_itemsize: int) -> Any:
    """The tiled engine's tiles of an integer convolution within ``limit`` bytes, the inputs
    other than x held whole besides them."""
    from padconv_cli.errors import OutputTooLargeError
    from padconv_cli.outofcore.integer_tiles import fixed_bytes, plan_integer_tiles

    held = fixed_bytes(call.arrays[1:])
    if limit - held <= 0:
        raise OutputTooLargeError("the inputs held whole exceed the limit", param="memory_limit")
    return plan_integer_tiles(made.conv, out_itemsize, limit - held, held)
