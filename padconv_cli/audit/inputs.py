"""The inputs of an audited model: given files (by name or position) or random ones.

Rules: the model's inputs are its graph inputs that are not initializers.  ``NAME=SOURCE``
gives input NAME (an unknown NAME is an error listing the inputs, unless the whole word names
an existing file); any other word is the next input in graph order.  A given tensor must have
the declared element type and every declared fixed dimension.  An input not given is random,
drawn from ``seed``: standard normal values for floats, integers in ``[0, 4)``, random bools.
Symbolic dimensions (``batch``) take their value from ``dims`` (``--dim batch=1``); a random
input with a symbolic dimension missing there, or a dimension of unknown size, is an error.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from padconv_cli.errors import InputError

RANDOM_INT_HIGH = 4


@dataclass(frozen=True)
class DeclaredInput:
    """A graph input: name, element type (ONNX enum) and dims (int, name or None each)."""

    name: str
    elem_type: int
    dims: tuple[int | str | None, ...] | None  # None: rank unknown

    @property
    def dtype(self) -> np.dtype:
        """The numpy dtype of the element type."""
        from onnx import helper

        return np.dtype(helper.tensor_dtype_to_np_dtype(self.elem_type))

    def shape_text(self) -> str:
        """``[batch, 3, 224, 224]``; ``?`` for a dimension of unknown size."""
        if self.dims is None:
            return "[unknown rank]"
        return "[" + ", ".join("?" if d is None else str(d) for d in self.dims) + "]"


def declared_inputs(model: Any, path: str = "model") -> list[DeclaredInput]:
    """The model's inputs in graph order (graph inputs that are not initializers); an input
    that is not a typed tensor (a sequence, a map) is an :class:`InputError`."""
    stored = {tensor.name for tensor in model.graph.initializer}
    inputs = []
    for value in model.graph.input:
        if value.name in stored:
            continue
        if value.type.WhichOneof("value") != "tensor_type" or not value.type.tensor_type.elem_type:
            raise InputError(f"{path}: input {value.name!r} is not a typed tensor; audit feeds "
                             "tensor inputs only", source=path)
        tensor_type = value.type.tensor_type
        dims = None
        if tensor_type.HasField("shape"):
            dims = tuple(_dim(d) for d in tensor_type.shape.dim)
        inputs.append(DeclaredInput(value.name, tensor_type.elem_type, dims))
    return inputs


def _dim(dim: Any) -> int | str | None:
    if dim.HasField("dim_value"):
        return int(dim.dim_value)
    if dim.HasField("dim_param") and dim.dim_param:
        return dim.dim_param
    return None


def parse_dims(texts: Sequence[str]) -> dict[str, int]:
    """``["batch=1", "seq=8"]`` -> ``{"batch": 1, "seq": 8}``; values are integers >= 0."""
    dims: dict[str, int] = {}
    for text in texts:
        name, equal, value = text.partition("=")
        if not equal or not name or not value.strip().isdigit():
            raise InputError(f"dim {text!r} is not NAME=VALUE with an integer VALUE >= 0",
                             param="dim")
        dims[name] = int(value)
    return dims


def concrete_shape(declared: DeclaredInput, dims: Mapping[str, int], path: str
                   ) -> tuple[int, ...]:
    """The shape of a random input: fixed dims as declared, symbolic ones from ``dims``."""
    if declared.dims is None:
        raise InputError(f"{path}: input {declared.name!r} has no declared shape; give it "
                         "as a file", source=path)
    shape = []
    for axis, dim in enumerate(declared.dims):
        if isinstance(dim, int):
            shape.append(dim)
        elif isinstance(dim, str) and dim in dims:
            shape.append(dims[dim])
        elif isinstance(dim, str):
            raise InputError(f"{path}: input {declared.name!r} dim {axis} is symbolic "
                             f"({dim!r}); set it with dim {dim}=VALUE or give the input",
                             param="dim", source=path)
        else:
            raise InputError(f"{path}: input {declared.name!r} dim {axis} has no size; give "
                             "the input as a file", source=path)
    return tuple(shape)


def random_input(declared: DeclaredInput, shape: tuple[int, ...], rng: np.random.Generator,
                 path: str) -> np.ndarray:
    """A random tensor of the declared type (module rules)."""
    dtype = declared.dtype
    if dtype.kind == "f" or dtype.kind == "V":
        return rng.standard_normal(shape).astype(dtype)
    if dtype.kind in "iu":
        return rng.integers(0, RANDOM_INT_HIGH, size=shape).astype(dtype)
    if dtype.kind == "b":
        return rng.random(shape) < 0.5
    raise InputError(f"{path}: input {declared.name!r} of type {dtype.name} cannot be random; "
                     "give it as a file", source=path)


def _split_given(given: Sequence[str], names: list[str], path: str) -> dict[str, str]:
    """Input name -> source text of the INPUT words (``NAME=SOURCE`` or positional)."""
    by_name: dict[str, str] = {}
    position = 0
    for word in given:
        name, equal, source = word.partition("=")
        if equal and name in names:
            by_name[name] = source
            continue
        if equal and not os.path.lexists(word):
            raise InputError(f"{path}: no input {name!r}{_close(name, names)}", source=path)
        while position < len(names) and names[position] in by_name:
            position += 1
        if position >= len(names):
            raise InputError(f"{path}: {word!r} is one input too many; the model takes "
                             f"{len(names)} ({', '.join(names) or 'none'})", source=path)
        by_name[names[position]] = word
        position += 1
    return by_name


def _close(name: str, names: list[str]) -> str:
    """``; did you mean 'x'? inputs: x, y`` for an unknown input name."""
    import difflib

    close = difflib.get_close_matches(name, names, n=3)
    guess = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    return f"{guess} (inputs: {', '.join(names) or 'none'})"


def _check_given(declared: DeclaredInput, array: np.ndarray, source: str) -> np.ndarray:
    """A given tensor must match the declared element type and fixed dimensions."""
    from padconv_cli.dtypes import dtype_name
    from padconv_cli.verification.compare import same_element_type

    if array.dtype.kind in "US" and declared.dtype.kind == "O":
        array = array.astype(object)  # ONNX strings: one type however numpy stores them
    if not same_element_type(array.dtype, declared.dtype):
        raise InputError(f"{source}: holds {dtype_name(array.dtype)}, input {declared.name!r} "
                         f"is {dtype_name(declared.dtype)}", source=source)
    dims = declared.dims
    if dims is not None and (len(dims) != array.ndim or any(
            isinstance(d, int) and d != n for d, n in zip(dims, array.shape, strict=True))):
        raise InputError(f"{source}: shape {list(array.shape)} does not fit input "
                         f"{declared.name!r} {declared.shape_text()}", source=source)
    return array


def model_feeds(model: Any, given: Sequence[str], dims: Mapping[str, int], seed: int,
                path: str) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """(input name -> array, input name -> where it came from) for every model input."""
    from padconv_cli.tensor_sources import read_tensor

    declared = declared_inputs(model, path)
    names = [d.name for d in declared]
    sources = _split_given(given, names, path)
    rng = np.random.default_rng(seed)
    feeds, origins = {}, {}
    for entry in declared:
        if entry.name in sources:
            array = read_tensor(sources[entry.name])
            feeds[entry.name] = _check_given(entry, array, sources[entry.name])
            origins[entry.name] = sources[entry.name]
        else:
            shape = concrete_shape(entry, dims, path)
            feeds[entry.name] = random_input(entry, shape, rng, path)
            origins[entry.name] = f"random (seed {seed})"
    return feeds, origins
