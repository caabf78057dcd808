"""ONNX element types <-> numpy dtypes.  Each has one canonical name (``dtype_name``): numpy's
where numpy has the type, ``string`` for strings (``object`` of ``str``, or ``<U``), else the
ONNX spelling in lower case (``bfloat16``, ``int4``), backed by ``ml_dtypes`` (imported when
one of its types is asked for)."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from padconv_cli.errors import UnsupportedDtypeError

STRING_ELEM_TYPE = 8


class ElemType(NamedTuple):
    """One ONNX element type: its number, canonical name, bit width and numpy backing."""

    elem_type: int
    name: str
    bits: int  # bits per element in raw_data; 0 for strings (variable length)
    numpy_name: str  # np.dtype name, or the ml_dtypes attribute when ``from_ml_dtypes``
    from_ml_dtypes: bool = False

    def raw_byte_count(self, count: int) -> int:
        """Bytes that ``count`` elements occupy in ``raw_data``: ceil(count * bits / 8)."""
        return -(-count * self.bits // 8)


# number name bits [ml_dtypes name]: the numbers of TensorProto.DataType; from 16 on, the
# types are ml_dtypes'
_TABLE = """1 float32 32; 2 uint8 8; 3 int8 8; 4 uint16 16; 5 int16 16; 6 int32 32; 7 int64 64;
8 string 0 object; 9 bool 8; 10 float16 16; 11 float64 64; 12 uint32 32; 13 uint64 64;
14 complex64 64; 15 complex128 128; 16 bfloat16 16; 17 float8e4m3fn 8 float8_e4m3fn;
18 float8e4m3fnuz 8 float8_e4m3fnuz; 19 float8e5m2 8 float8_e5m2;
20 float8e5m2fnuz 8 float8_e5m2fnuz; 21 uint4 4; 22 int4 4; 23 float4e2m1 4 float4_e2m1fn;
24 float8e8m0 8 float8_e8m0fnu; 25 uint2 2; 26 int2 2; 27 float6e2m3 6 float6_e2m3fn;
28 float6e3m2 6 float6_e3m2fn"""
_ELEM_TYPES = tuple(
    ElemType(int(number), name, int(bits), backing[0] if backing else name, int(number) >= 16)
    for number, name, bits, *backing in (row.split() for row in _TABLE.split(";")))
_BY_ELEM_TYPE = {t.elem_type: t for t in _ELEM_TYPES}
_BY_NAME = {t.name: t for t in _ELEM_TYPES}
# np.dtype(...).name of the backing dtype -> element type (strings are handled by kind).
_BY_NUMPY_NAME = {t.numpy_name: t for t in _ELEM_TYPES if t.elem_type != STRING_ELEM_TYPE}
_ALIASES = {"float": "float32", "double": "float64", "half": "float16", "str": "string",
            "boolean": "bool", "complex": "complex128",
            **{t.numpy_name: t.name for t in _ELEM_TYPES if t.from_ml_dtypes}}

ONNX_TYPE_NAMES = tuple(t.name for t in _ELEM_TYPES)


def _ml_dtypes() -> Any:
    import ml_dtypes  # deferred: only tensors of these types pay for the import

    return ml_dtypes


def elem_type_info(elem_type: int) -> ElemType:
    """The :class:`ElemType` of an ONNX ``TensorProto.DataType`` number (UNDEFINED=0 refused)."""
    info = _BY_ELEM_TYPE.get(elem_type)
    if info is None:
        raise UnsupportedDtypeError(f"unknown ONNX element type {elem_type} "
                                    f"(known: 1..{max(_BY_ELEM_TYPE)})")
    return info


def _numpy_dtype(info: ElemType) -> np.dtype:
    if not info.from_ml_dtypes:
        return np.dtype(info.numpy_name)
    scalar_type = getattr(_ml_dtypes(), info.numpy_name, None)
    if scalar_type is None:
        raise UnsupportedDtypeError(f"element type {info.name} needs a newer ml_dtypes "
                                    f"(no ml_dtypes.{info.numpy_name})")
    return np.dtype(scalar_type)


def numpy_dtype_of_elem_type(elem_type: int) -> np.dtype:
    """The numpy dtype backing an ONNX element type (STRING -> object, BFLOAT16 -> bfloat16)."""
    return _numpy_dtype(elem_type_info(elem_type))


def _dtype_from_numpy_spelling(name: str) -> np.dtype | None:
    """Numpy's own spellings ('f4', '<i8', 'float_' ...) mapped onto an ONNX type, else None."""
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            dtype = np.dtype(name)
    except Exception:  # np.dtype raises TypeError/ValueError/SyntaxError on odd spellings
        return None
    if dtype.kind in "OUSV" or dtype.name not in _BY_NUMPY_NAME:
        return None
    return dtype.newbyteorder("=")


def parse_dtype(name: str) -> np.dtype:
    """The numpy dtype named by :data:`ONNX_TYPE_NAMES`, an ONNX spelling in any case
    (``FLOAT``, ``tensor(float16)``), an alias (float, double, half, str), an ``ml_dtypes``
    name (``float8_e4m3fn``) or a numpy spelling of a type ONNX has (``f4``, ``<i8``);
    ``string`` gives the object dtype."""
    if not isinstance(name, str):
        raise UnsupportedDtypeError(f"dtype name must be a string, got {type(name).__name__}")
    text = name.strip()
    if text.lower().startswith("tensor(") and text.endswith(")"):
        text = text[len("tensor(") : -1]
    text = text.strip().lower()
    info = _BY_NAME.get(_ALIASES.get(text, text))
    if info is not None:
        return _numpy_dtype(info)
    dtype = _dtype_from_numpy_spelling(name.strip())
    if dtype is None:
        raise UnsupportedDtypeError(f"unknown dtype {name!r}; expected one of: "
                                    f"{', '.join(ONNX_TYPE_NAMES)}")
    return dtype


def _is_ml_dtype(dtype: np.dtype) -> bool:
    return getattr(dtype.type, "__module__", "").startswith("ml_dtypes")


def _info_of_dtype(dtype: np.dtype) -> ElemType | None:
    if dtype.kind in "OUS":
        return _BY_ELEM_TYPE[STRING_ELEM_TYPE]
    info = _BY_NUMPY_NAME.get(dtype.name)
    if info is None or info.from_ml_dtypes != _is_ml_dtype(dtype) or dtype.fields:
        return None
    return info


def _as_dtype(dtype: Any) -> np.dtype:
    try:
        return np.dtype(dtype)
    except Exception as exc:  # np.dtype raises several types on garbage
        raise UnsupportedDtypeError(f"not a numpy dtype: {dtype!r}") from exc


def dtype_name(dtype: Any) -> str:
    """Canonical ONNX-style name of a numpy dtype (float32, bfloat16, int4); object, ``<U``
    and ``|S`` are ``string``; one with no ONNX counterpart keeps numpy's name (messages)."""
    dtype = _as_dtype(dtype)
    info = _info_of_dtype(dtype)
    return info.name if info is not None else str(dtype)


def onnx_elem_type(dtype: Any) -> int:
    """ONNX ``TensorProto.DataType`` number of a numpy dtype (float32 -> 1, string -> 8 ...)."""
    dtype = _as_dtype(dtype)
    info = _info_of_dtype(dtype)
    if info is None:
        raise UnsupportedDtypeError(f"dtype {dtype} has no ONNX element type")
    return info.elem_type


def is_npy_native(dtype: Any) -> bool:
    """True when ``.npy`` stores this dtype without pickles and reads it back the same: numpy's
    built-in types and structures of them; not ``object`` nor ``ml_dtypes`` types (``V``)."""
    dtype = _as_dtype(dtype)
    if dtype.hasobject or dtype.isbuiltin == 2:
        return False
    if dtype.subdtype is not None:
        return is_npy_native(dtype.subdtype[0])
    if dtype.fields:
        return all(is_npy_native(field[0]) for field in dtype.fields.values())
    return True


_KINDS = {"b": "bool", "i": "int", "u": "int", "f": "float", "c": "complex", "O": "string",
          "U": "string", "S": "string"}


def element_kind(dtype: Any) -> str:
    """The one classification of a dtype: numpy kinds ``b`` -> ``bool``, ``i``/``u`` ->
    ``int``, ``f`` -> ``float``, ``c`` -> ``complex``, ``O``/``U``/``S`` -> ``string``; the
    ``ml_dtypes`` floats -> ``float``, its int2/int4 (unsigned too) -> ``int``; else ``other``."""
    dtype = _as_dtype(dtype)
    if dtype.kind in _KINDS:
        return _KINDS[dtype.kind]
    if _is_ml_dtype(dtype) and not dtype.fields:
        if dtype.name.startswith(("float", "bfloat")):
            return "float"
        if dtype.name.startswith(("int", "uint")):
            return "int"
    return "other"


def integer_range(dtype: Any) -> tuple[int, int] | None:
    """(min, max) of an integer dtype, including int4/uint4/int2/uint2; None for non-integers."""
    dtype = _as_dtype(dtype)
    if element_kind(dtype) != "int":
        return None
    limits = _ml_dtypes().iinfo(dtype) if _is_ml_dtype(dtype) else np.iinfo(dtype)
    return int(limits.min), int(limits.max)


def float_info(dtype: Any) -> Any:
    """``finfo`` of a float type (numpy's or ml_dtypes'), or of a complex type's parts."""
    dtype = _as_dtype(dtype)
    return _ml_dtypes().finfo(dtype) if _is_ml_dtype(dtype) else np.finfo(dtype)

