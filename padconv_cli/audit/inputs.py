"""The inputs of an audited model (its graph inputs that are not initializers): given files
or random ones.

``NAME=SOURCE`` gives input NAME (an unknown NAME is an error, unless the whole word names an
existing file); any other word is the next input in graph order.  A given tensor must have the
declared element type and fixed dimensions.  An input not given is random, from ``seed``:
standard normal floats, integers in ``[0, 4)``, random bools.

Dimensions: a declared size >= 0 is fixed; a name (``batch``), ``?`` or ``-1`` is dynamic.  For
a random input a named dimension takes its value from ``dims`` (``--dim batch=1``), any other a
default, the same for one name: axis 0 (batch) 1; axis 1 of a rank 3+ input (channels) what
the first Conv reading it takes (``W.shape[1] * group``), else 3; other axes (spatial)
:data:`DEFAULT_SPATIAL`, or that Conv's dilated kernel extent when larger.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from padconv_cli.errors import InputError

RANDOM_INT_HIGH = 4
DEFAULT_BATCH = 1
DEFAULT_CHANNELS = 3
DEFAULT_SPATIAL = 64  # divisible by 32: detectors downsample 5 times
CHOSEN = "unknown dims chosen by default"


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


def declared_inputs(model: Any, path: str = "model") -> list[DeclaredInput]:
    """The model's inputs in graph order (graph inputs that are not initializers); an input
    that is not a typed tensor (a sequence, a map) is an :class:`InputError`."""
    stored = {tensor.name for tensor in model.graph.initializer}
    inputs = []
    for value in model.graph.input:
        if value.name in stored:
            continue
        tensor_type = value.type.tensor_type
        if value.type.WhichOneof("value") != "tensor_type" or not tensor_type.elem_type:
            raise InputError(f"{path}: input {value.name!r} is not a typed tensor; audit feeds "
                             "tensor inputs only", source=path)
        dims = tuple(_dim(d) for d in tensor_type.shape.dim) \
            if tensor_type.HasField("shape") else None
        inputs.append(DeclaredInput(value.name, tensor_type.elem_type, dims))
    return inputs


def _dim(dim: Any) -> int | str | None:
    """A fixed size, a name, or None (unknown: no size, or a negative one such as -1)."""
    if dim.HasField("dim_value"):
        return int(dim.dim_value) if dim.dim_value >= 0 else None
    return dim.dim_param or None


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


def random_shape(model: Any, declared: DeclaredInput, dims: Mapping[str, int],
                 path: str) -> tuple[tuple[int, ...], bool]:
    """(shape of a random input, whether some size was chosen by default): fixed dims as
    declared, named ones from ``dims``, any other its default (module rules)."""
    if declared.dims is None:
        raise InputError(f"{path}: input {declared.name!r} has no declared shape; give it "
                         "as a file", source=path)
    channels, extent = _first_conv_needs(model, declared.name)
    by_name: dict[str, int] = {}
    shape, chosen = [], False
    for axis, dim in enumerate(declared.dims):
        if isinstance(dim, int) or (isinstance(dim, str) and dim in dims):
            shape.append(dim if isinstance(dim, int) else dims[dim])
            continue
        size = DEFAULT_BATCH if axis == 0 else channels if axis == 1 and len(declared.dims) >= 3 \
            else max(DEFAULT_SPATIAL, extent)
        if isinstance(dim, str) and dim != "?":
            size = by_name.setdefault(dim, size)
        shape.append(size)
        chosen = True
    return tuple(shape), chosen


def _first_conv_needs(model: Any, name: str) -> tuple[int, int]:
    """(channels, largest dilated kernel extent) of the first Conv reading input ``name``
    with stored weights; (:data:`DEFAULT_CHANNELS`, 0) when there is none."""
    from onnx import helper

    stored = {tensor.name: tensor for tensor in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type != "Conv" or node.input[:1] != [name] or len(node.input) < 2:
            continue
        w_dims = list(stored[node.input[1]].dims) if node.input[1] in stored else []
        if len(w_dims) < 3:
            continue
        values = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        dilations = list(values.get("dilations", [])) or [1] * (len(w_dims) - 2)
        extent = max((k - 1) * d + 1 for k, d in zip(w_dims[2:], dilations, strict=False))
        return int(w_dims[1]) * max(int(values.get("group", 1)), 1), int(extent)
    return DEFAULT_CHANNELS, 0


def random_input(declared: DeclaredInput, shape: tuple[int, ...], rng: np.random.Generator,
                 path: str) -> np.ndarray:
    """A random tensor of the declared type (module rules); one larger than a tenth of the
    memory available is refused (the model's activations need many times more)."""
    import math

    from padconv_cli.resources import available_memory_bytes
    from padconv_cli.units import human_bytes

    dtype = declared.dtype
    size = math.prod(shape) * max(dtype.itemsize, 1)
    if size > available_memory_bytes() // 10:
        raise InputError(f"{path}: input {declared.name!r} of shape {list(shape)} needs "
                         f"{human_bytes(size)}, over a tenth of the memory available; give "
                         "smaller sizes with dim NAME=VALUE", param="dim", source=path)
    if dtype.kind in "fV":
        return rng.standard_normal(shape).astype(dtype)
    if dtype.kind in "iu":
        return rng.integers(0, RANDOM_INT_HIGH, size=shape).astype(dtype)
    if dtype.kind == "b":
        return rng.random(shape) < 0.5
    raise InputError(f"{path}: input {declared.name!r} of type {dtype.name} cannot be random; "
                     "give it as a file", source=path)


def _split_given(given: Sequence[str], names: list[str], path: str) -> dict[str, str]:
    """Input name -> source text of the INPUT words (``NAME=SOURCE`` or positional)."""
    from padconv_cli.models import _close_matches

    by_name: dict[str, str] = {}
    position = 0
    for word in given:
        name, equal, source = word.partition("=")
        if equal and name in names:
            by_name[name] = source
            continue
        if equal and not os.path.lexists(word):
            raise InputError(f"{path}: no input {name!r}{_close_matches(name, names)} "
                             f"(inputs: {', '.join(names) or 'none'})", source=path)
        while position < len(names) and names[position] in by_name:
            position += 1
        if position >= len(names):
            raise InputError(f"{path}: {word!r} is one input too many; the model takes "
                             f"{len(names)} ({', '.join(names) or 'none'})", source=path)
        by_name[names[position]] = word
        position += 1
    return by_name


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
        shown = ", ".join("?" if d is None else str(d) for d in dims)
        raise InputError(f"{source}: shape {list(array.shape)} does not fit input "
                         f"{declared.name!r} [{shown}]", source=source)
    return array


def model_feeds(model: Any, given: Sequence[str], dims: Mapping[str, int], seed: int,
                path: str) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """(input name -> array, input name -> where it came from) for every model input."""
    from padconv_cli.tensor_sources import read_tensor

    declared = declared_inputs(model, path)
    sources = _split_given(given, [d.name for d in declared], path)
    rng = np.random.default_rng(seed)
    feeds, origins = {}, {}
    for entry in declared:
        if entry.name in sources:
            source = sources[entry.name]
            feeds[entry.name] = _check_given(entry, read_tensor(source), source)
            origins[entry.name] = source
        else:
            shape, chosen = random_shape(model, entry, dims, path)
            feeds[entry.name] = random_input(entry, shape, rng, path)
            origins[entry.name] = (f"random {list(shape)} (seed {seed}; {CHOSEN})" if chosen
                                   else f"random (seed {seed})")
    return feeds, origins


def chose_dims(origins: Mapping[str, str]) -> bool:
    """True when some input's size was chosen by default (:func:`model_feeds`' origins)."""
    return any(CHOSEN in origin for origin in origins.values())
