"""The quantization parameters of a tensor a model stores (``padconv show MODEL.onnx:NAME``).

A tensor is quantized when a node of the model reads it, or writes it, together with a scale
and a zero point: QLinearConv's ``x`` (scale and zero point at inputs 1, 2), ``w`` (4, 5) and
its output (6, 7); QuantizeLinear's output and DequantizeLinear's input (1, 2).  The real
value of an element ``q`` is ``(q - zero_point) * scale`` (per output channel when the scale
is a vector).
"""

from __future__ import annotations

from typing import Any

import numpy as np

# (op_type, "input" or "output", position of the tensor) -> positions of scale and zero point
QUANTIZED_SLOTS = {
    ("QLinearConv", "input", 0): (1, 2),
    ("QLinearConv", "input", 3): (4, 5),
    ("QLinearConv", "output", 0): (6, 7),
    ("QuantizeLinear", "output", 0): (1, 2),
    ("DequantizeLinear", "input", 0): (1, 2),
}


def _node_slots(node: Any, name: str) -> list[tuple[int, int]]:
    """The (scale, zero point) input positions of every slot of ``node`` holding ``name``."""
    found = []
    for (op_type, side, position), params in QUANTIZED_SLOTS.items():
        names = node.input if side == "input" else node.output
        if node.op_type == op_type and position < len(names) and names[position] == name:
            found.append(params)
    return found


def quantization_of(path: str, name: str, policy: Any = None) -> dict[str, Any] | None:
    """``{scale, zero_point, node, real_min, real_max}`` for the stored tensor ``name`` of the
    model at ``path`` (module rules), or None when no node gives it a stored scale."""
    from padconv_cli.models import load_model, stored_values

    model = load_model(path, policy)
    values = stored_values(path, policy)
    for index, node in enumerate(model.graph.node):
        for scale_at, zero_at in _node_slots(node, name):
            scale_name = node.input[scale_at] if scale_at < len(node.input) else ""
            zero_name = node.input[zero_at] if zero_at < len(node.input) else ""
            if scale_name not in values:
                continue
            scale = np.asarray(values[scale_name]()).astype(np.float64)
            zero = np.asarray(values[zero_name]()) if zero_name in values else np.zeros(())
            return {"scale": scale.tolist(), "zero_point": zero.astype(np.int64).tolist(),
                    "node": f"{node.op_type} {node.name or '#' + str(index)!r}"}
    return None


def real_range(array: np.ndarray, quantization: dict[str, Any]) -> tuple[float, float]:
    """Smallest and largest real value ``(q - zero_point) * scale`` of ``array`` (a vector scale
    applies along axis 0 for weights, axis 1 otherwise; a scalar to every element)."""
    scale = np.asarray(quantization["scale"], np.float64)
    zero = np.asarray(quantization["zero_point"], np.float64)
    q = np.asarray(array).astype(np.float64)
    if scale.ndim and q.ndim and q.shape[0] == scale.shape[0]:
        shape = (-1,) + (1,) * (q.ndim - 1)
    elif scale.ndim and q.ndim > 1 and q.shape[1] == scale.shape[0]:
        shape = (1, -1) + (1,) * (q.ndim - 2)
    else:
        shape = ()
    real = (q - zero.reshape(shape if zero.ndim else ())) * scale.reshape(shape)
    return (float(real.min()), float(real.max())) if real.size else (0.0, 0.0)


def quantization_line(array: np.ndarray, quantization: dict[str, Any]) -> str:
    """``quantized (QLinearConv 'c' input w): scale 0.05, zero point 128; real [-6.4, 6.35]``."""
    low, high = real_range(array, quantization)

    def short(value: Any) -> str:
        if isinstance(value, list):
            shown = ", ".join(f"{v:.6g}" if isinstance(v, float) else str(v) for v in value[:4])
            return f"[{shown}{', ...' if len(value) > 4 else ''}] (per channel)"
        return f"{value:.6g}" if isinstance(value, float) else str(value)

    return (f"  quantized ({quantization['node']}): scale {short(quantization['scale'])}, "
            f"zero point {short(quantization['zero_point'])}; real values "
            f"[{low:.6g}, {high:.6g}] = (q - zero point) * scale")
