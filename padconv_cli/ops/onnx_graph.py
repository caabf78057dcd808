"""The pieces an operator module builds its emitted ONNX node from (``--emit-onnx``, ``--check``).

:class:`VersionChoice` is the operator version a model uses and the feature that forced it;
:class:`GraphParts` the graph inputs, initializers, node inputs and attributes an operator's
``graph_parts`` returns; :mod:`padconv_cli.emit` assembles and checks the model from them.
onnx is imported only inside these functions (start-up time).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from padconv_cli.dtypes import onnx_elem_type
from padconv_cli.errors import UnsupportedDtypeError

MIN_RUNTIME_OPSET = 7


@dataclass(frozen=True)
class VersionChoice:
    """The operator version an emitted model uses, and the feature that forced it."""

    op_type: str
    version: int
    reason: str

    @property
    def opset(self) -> int:
        """Opset of the model: ``max(version, MIN_RUNTIME_OPSET)``."""
        return max(self.version, MIN_RUNTIME_OPSET)


def onnx_type_string(dtype: np.dtype) -> str:
    """``tensor(float)``, ``tensor(bfloat16)``, ``tensor(string)``: the schema spelling."""
    from onnx import TensorProto

    return f"tensor({TensorProto.DataType.Name(onnx_elem_type(dtype)).lower()})"


def first_version_for_type(op_type: str, versions: Sequence[int], dtype: np.dtype,
                           type_param: str = "T") -> int:
    """Oldest version in ``versions`` whose schema's type constraint ``type_param`` lists
    ``dtype``."""
    import onnx.defs

    type_string = onnx_type_string(dtype)
    for version in versions:
        constraints = onnx.defs.get_schema(op_type, version).type_constraints
        if any(c.type_param_str == type_param and type_string in c.allowed_type_strs
               for c in constraints):
            return version
    raise UnsupportedDtypeError(f"{op_type}: no ONNX version accepts {type_string}")


def fits_float_attribute(value: Any) -> bool:
    """True when ``value`` is a real number that a float32 attribute stores exactly."""
    if value is None:
        return True
    number = np.asarray(value)
    if number.dtype.kind not in "fiub":
        return False
    as_float = float(number)
    return bool(np.isnan(as_float) or float(np.float32(as_float)) == as_float)


def value_info(name: str, dtype: np.dtype, shape: Sequence[int]) -> Any:
    """A typed and shaped ValueInfoProto."""
    from onnx import helper

    return helper.make_tensor_value_info(name, onnx_elem_type(dtype), [int(d) for d in shape])


def initializer(array: Any, name: str) -> Any:
    """``array`` as a TensorProto called ``name``."""
    from onnx import numpy_helper

    return numpy_helper.from_array(np.asarray(array), name=name)


def scalar_of(value: Any, dtype: np.dtype) -> np.ndarray:
    """A 0-d array holding ``value`` as ``dtype`` (strings as a python ``str`` object array)."""
    if dtype.kind in "OU":
        return np.array(str(value), dtype=object)
    return np.asarray(value).astype(dtype).reshape(())


@dataclass
class GraphParts:
    """Inputs, initializers and the node being assembled."""

    inputs: list = field(default_factory=list)
    initializers: list = field(default_factory=list)
    node_inputs: list = field(default_factory=list)
    attributes: dict = field(default_factory=dict)

    def add_data_input(self, name: str, array: Any, embedded: Collection[str]) -> None:
        """A data tensor: an initializer when embedded, else a typed and shaped graph input."""
        array = np.asarray(array)
        if name in embedded:
            self.initializers.append(initializer(array, name))
        else:
            self.inputs.append(value_info(name, array.dtype, array.shape))
        self.node_inputs.append(name)

    def add_constant_input(self, name: str, array: Any) -> None:
        """A node input stored in the model (``pads``), or an omitted slot for ``array``
        None (written as the empty name)."""
        if array is None:
            self.node_inputs.append("")
            return
        self.initializers.append(initializer(array, name))
        self.node_inputs.append(name)
