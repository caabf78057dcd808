"""ONNX ``TensorProto`` (``.pb``) reading and writing; ``onnx`` is imported when one is met.

Reading never trusts the message.  Before anything is allocated or converted it checks: a known
``data_type``; dims >= 0 and no ``segment``; exactly one data field (``raw_data``, the type's
typed field, or external data; strings never raw), holding exactly what the dims need
(``ceil(n * bits / 8)`` raw bytes; ``n`` typed entries, ``2n`` complex, ``ceil(n / 2)`` 4-bit,
``ceil(n / 4)`` 2-bit); typed ``int32_data``/``uint64_data`` within the element's storage
range; external data inside the ``.pb`` file's folder (no absolute path, no ``..``, no symlink
out), a regular file holding exactly the bytes needed at the offset; then
``onnx.checker.check_tensor``.  Only then ``onnx.numpy_helper.to_array`` converts it (strings
are converted here, one ``str`` per element, keeping sizes and trailing NULs).
"""

from __future__ import annotations

import math
import os
import re
from typing import Any, BinaryIO

import numpy as np

from padconv_cli.dtypes import STRING_ELEM_TYPE, ElemType, elem_type_info, onnx_elem_type
from padconv_cli.errors import InputError, OutputError, UnsupportedDtypeError
from padconv_cli.messages import bounded_sequence
from padconv_cli.tensorio.files import (
    ReadPolicy,
    check_input_size,
    check_link_count,
    one_line,
    open_regular_file,
    printable,
    read_exact,
    read_into,
)
from padconv_cli.tensorio.npy import check_bool_bytes

PROTOBUF_LIMIT = 2**31 - 1  # protobuf refuses to parse or serialize messages of 2 GiB or more
_EXTERNAL = 1  # TensorProto.DataLocation.EXTERNAL
_TYPED_FIELDS = ("float_data", "int32_data", "string_data", "int64_data", "double_data",
                 "uint64_data")
# element type -> the typed field that carries it (onnx.proto's table); int32_data otherwise
_STORAGE_FIELDS = {STRING_ELEM_TYPE: "string_data", 1: "float_data", 14: "float_data",
                   11: "double_data", 15: "double_data", 7: "int64_data", 12: "uint64_data",
                   13: "uint64_data"}
# element type -> (typed entries, elements they hold): complex, 4-bit and 2-bit types
_ENTRY_RATIOS = {14: (2, 1), 15: (2, 1), **dict.fromkeys((21, 22, 23), (1, 2)), 25: (1, 4),
                 26: (1, 4)}
# Ranges the typed int32_data (uint64_data for UINT32) entries must respect (storage value,
# per onnx.proto).
_TYPED_DATA_RANGES = {
    **dict.fromkeys((2, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26), (0, 255)),
    **dict.fromkeys((4, 10, 16), (0, 65535)),
    3: (-128, 127), 5: (-32768, 32767), 9: (0, 1), 27: (0, 63), 28: (0, 63), 12: (0, 2**32 - 1),
}
_EXTERNAL_KEYS = {"location", "offset", "length", "checksum"}


def _parse(data: bytes, label: str) -> Any:
    from google.protobuf.message import DecodeError
    from onnx import TensorProto

    tensor = TensorProto()
    try:
        tensor.ParseFromString(data)
    except (DecodeError, ValueError, RuntimeError) as exc:
        raise InputError(f"{label}: not a TensorProto ({one_line(exc, 120)})") from None
    return tensor


def _check_type(tensor: Any, label: str) -> ElemType:
    if tensor.data_type == 0:
        raise InputError(f"{label}: not a TensorProto (data_type is UNDEFINED)")
    try:
        return elem_type_info(tensor.data_type)
    except UnsupportedDtypeError as exc:
        raise InputError(f"{label}: {exc}") from None


def _check_dims(tensor: Any, label: str) -> int:
    """Element count: the product of the dimensions, each of which must be >= 0."""
    dims = list(tensor.dims)
    if any(dim < 0 for dim in dims):
        raise InputError(f"{label}: TensorProto dims {bounded_sequence(dims)} has a negative "
                         "dimension")
    if tensor.HasField("segment"):
        raise InputError(f"{label}: TensorProto segments are not supported")
    return math.prod(dims)


def _check_single_field(tensor: Any, info: ElemType, count: int, label: str) -> str | None:
    """The one data field in use (None for an empty tensor without data)."""
    present = [name for name in _TYPED_FIELDS if len(getattr(tensor, name))]
    present += ["raw_data"] * tensor.HasField("raw_data")
    present += ["external_data"] * (tensor.data_location == _EXTERNAL)
    if len(tensor.external_data) and tensor.data_location != _EXTERNAL:
        raise InputError(f"{label}: TensorProto has external_data entries but is not EXTERNAL")
    if len(present) > 1:
        raise InputError(f"{label}: TensorProto sets several data fields at once "
                         f"({', '.join(present)})")
    if not present:
        if count:
            raise InputError(f"{label}: TensorProto of {count} elements holds no data")
        return None
    field = present[0]
    allowed = {_STORAGE_FIELDS.get(info.elem_type, "int32_data")}
    if info.elem_type != STRING_ELEM_TYPE:
        allowed |= {"raw_data", "external_data"}
    if field not in allowed:
        raise InputError(f"{label}: TensorProto of type {info.name} cannot carry its data in "
                         f"{field} (allowed: {', '.join(sorted(allowed))})")
    return field


def _check_amount(tensor: Any, info: ElemType, field: str, count: int, label: str) -> None:
    if field == "raw_data":
        expected, actual, unit = info.raw_byte_count(count), len(tensor.raw_data), "bytes"
    else:  # one typed entry per element, but complex (2), 4-bit and 2-bit (packed) types
        entries, elements = _ENTRY_RATIOS.get(info.elem_type, (1, 1))
        expected = -(-count * entries // elements)
        actual, unit = len(getattr(tensor, field)), "entries"
    if actual != expected:
        raise InputError(f"{label}: TensorProto dims {bounded_sequence(tensor.dims)} of "
                         f"{info.name} need {expected} {unit} of {field} but it holds {actual}")


def _check_typed_range(tensor: Any, info: ElemType, field: str, label: str) -> None:
    bounds = _TYPED_DATA_RANGES.get(info.elem_type)
    if field == "raw_data" or bounds is None:
        return
    values = np.asarray(getattr(tensor, field))
    low, high = int(values.min()), int(values.max())
    if low < bounds[0] or high > bounds[1]:
        raise InputError(f"{label}: {field} of a {info.name} TensorProto holds values in "
                         f"[{low}, {high}], outside [{bounds[0]}, {bounds[1]}]")


def _external_entries(tensor: Any, label: str) -> dict[str, str]:
    entries: dict[str, str] = {}
    for entry in tensor.external_data:
        # protobuf hands out bytes instead of str for string fields that are not valid UTF-8
        if not isinstance(entry.key, str) or not isinstance(entry.value, str):
            raise InputError(f"{label}: external_data entry is not valid UTF-8")
        if entry.key not in _EXTERNAL_KEYS:
            raise InputError(f"{label}: unknown external_data key {entry.key!r}")
        if entry.key in entries:
            raise InputError(f"{label}: external_data key {entry.key!r} given twice")
        entries[entry.key] = entry.value
    if not entries.get("location"):
        raise InputError(f"{label}: external data without a location")
    return entries


def _external_int(entries: dict[str, str], key: str, label: str) -> int | None:
    text = entries.get(key)
    if text is None:
        return None
    if not re.fullmatch(r"[0-9]{1,19}", text):
        raise InputError(f"{label}: external_data {key} {text!r} is not an integer >= 0")
    return int(text)


def _external_path(location: str, base_dir: str, label: str) -> str:
    """Rule: a relative path without ``..`` whose real path stays inside realpath(base_dir)."""
    if os.path.isabs(location) or re.match(r"[/\\]|[A-Za-z]:", location):
        raise InputError(f"{label}: external data location {location!r} is an absolute path")
    if ".." in re.split(r"[/\\]", location):
        raise InputError(f"{label}: external data location {location!r} contains '..'")
    if "\x00" in location:
        raise InputError(f"{label}: external data location contains a NUL byte")
    folder = os.path.realpath(base_dir)
    path = os.path.realpath(os.path.join(folder, location))
    if os.path.commonpath([folder, path]) != folder:
        raise InputError(f"{label}: external data location {location!r} leads outside "
                         f"{printable(folder)} (through a symlink)")
    return path


def _load_external(tensor: Any, info: ElemType, count: int, base_dir: str | None, label: str,
                   policy: ReadPolicy | None) -> bytearray:
    if base_dir is None:
        raise InputError(f"{label}: a tensor read from stdin cannot use external data")
    entries = _external_entries(tensor, label)
    path = _external_path(entries["location"], base_dir, label)
    offset = _external_int(entries, "offset", label) or 0
    length = _external_int(entries, "length", label)
    where = f"{label}: external data {printable(entries['location'])}"
    stream, size = open_regular_file(path, where)
    with stream:
        check_link_count(os.fstat(stream.fileno()).st_nlink, where, f"{where}: the file",
                         "the tensor's folder", policy)
        available = size - offset if offset <= size else -1
        if available < 0 or (length is not None and length > available):
            raise InputError(f"{where}: offset {offset} + length {length} is past its end "
                             f"({size} bytes)")
        actual = available if length is None else length
        expected = info.raw_byte_count(count)
        if actual != expected:
            raise InputError(f"{where}: dims {bounded_sequence(tensor.dims)} of {info.name} need "
                             f"{expected} bytes but {actual} are given")
        check_input_size(expected, where, policy=policy)
        stream.seek(offset)
        data = bytearray(expected)
        if read_into(stream, memoryview(data)) != expected:
            raise InputError(f"{where}: file shrank while reading")
    return data


def _strings_to_array(tensor: Any, label: str) -> np.ndarray:
    try:
        texts = [item.decode("utf-8") for item in tensor.string_data]
    except UnicodeDecodeError as exc:
        raise InputError(f"{label}: string_data is not valid UTF-8 ({exc.reason})") from None
    array = np.empty(len(texts), dtype=object)
    array[:] = texts
    return array.reshape(list(tensor.dims))


def _to_array(tensor: Any, label: str) -> np.ndarray:
    import onnx.checker
    from onnx import numpy_helper

    try:
        onnx.checker.check_tensor(tensor)
    except Exception as exc:  # ValidationError and protobuf errors from the C++ checker
        raise InputError(f"{label}: invalid TensorProto ({one_line(exc, 200)})") from None
    if tensor.data_type == STRING_ELEM_TYPE:
        return _strings_to_array(tensor, label)
    try:
        array = numpy_helper.to_array(tensor)
    except Exception as exc:  # the checks above should make this unreachable
        raise InputError(f"{label}: cannot convert TensorProto ({one_line(exc, 200)})") from None
    check_bool_bytes(array, label)
    return array if array.flags.writeable else array.copy()


def tensor_from_proto(tensor: Any, label: str, base_dir: str | None = None,
                      policy: ReadPolicy | None = None) -> np.ndarray:
    """A parsed ``TensorProto``, validated (module rules), as numpy; its external data must
    stay in ``base_dir`` (None: none allowed) and is read under ``policy``."""
    info = _check_type(tensor, label)
    count = _check_dims(tensor, label)
    field = _check_single_field(tensor, info, count, label)
    if field not in (None, "external_data"):
        _check_amount(tensor, info, field, count, label)
        _check_typed_range(tensor, info, field, label)
    if field == "external_data":
        data = _load_external(tensor, info, count, base_dir, label, policy)
        if len(data) >= PROTOBUF_LIMIT - 1024:  # too large for a message: decoded here
            if info.bits % 8:
                raise InputError(f"{label}: external {info.name} data over 2 GiB is not supported")
            from padconv_cli.dtypes import numpy_dtype_of_elem_type

            dtype = numpy_dtype_of_elem_type(info.elem_type)
            array = np.frombuffer(data, dtype=dtype.newbyteorder("<")).reshape(list(tensor.dims))
            check_bool_bytes(array, label)
            return array if array.dtype.isnative else array.astype(dtype)
        inline = type(tensor)()
        inline.CopyFrom(tensor)
        inline.ClearField("external_data")
        inline.data_location = 0  # DEFAULT
        inline.raw_data = bytes(data)
        tensor = inline
    return _to_array(tensor, label)


def read_pb_stream(stream: BinaryIO, size: int, label: str, base_dir: str | None,
                   policy: ReadPolicy | None = None) -> tuple[str, np.ndarray]:
    """(tensor name, array) of a serialized ``TensorProto`` of ``size`` bytes in ``stream``
    (:func:`tensor_from_proto`); its external data must stay in ``base_dir``."""
    if size > PROTOBUF_LIMIT:
        raise InputError(f"{label}: {size} bytes is over the 2 GiB TensorProto limit; store "
                         "large tensors as .npy")
    check_input_size(size, label, policy=policy)
    tensor = _parse(read_exact(stream, size), label)
    name = tensor.name  # bytes when it is not valid UTF-8
    name = name.decode("utf-8", "replace") if isinstance(name, bytes) else name
    return name, tensor_from_proto(tensor, label, base_dir, policy)


def read_pb_bytes(data: bytes, label: str, base_dir: str | None = None,
                  policy: ReadPolicy | None = None) -> tuple[str, np.ndarray]:
    """:func:`read_pb_stream` of an image held in memory."""
    import io

    return read_pb_stream(io.BytesIO(data), len(data), label, base_dir, policy)


def _proto_of_array(array: np.ndarray, name: str | None, target: str) -> Any:
    from onnx import numpy_helper

    try:
        info = elem_type_info(onnx_elem_type(array.dtype))
    except UnsupportedDtypeError as exc:
        raise UnsupportedDtypeError(f"{target}: cannot write as TensorProto: {exc}") from None
    try:
        tensor = numpy_helper.from_array(array, name=name)
    except (NotImplementedError, TypeError, ValueError, UnicodeEncodeError) as exc:
        raise UnsupportedDtypeError(f"{target}: cannot write {info.name} array as TensorProto "
                                    f"({one_line(exc, 160)})") from None
    if tensor.data_type != info.elem_type:
        raise UnsupportedDtypeError(f"{target}: onnx wrote element type {tensor.data_type} for "
                                    f"{info.name}")
    return tensor


def tensor_proto_bytes(array: np.ndarray, name: str | None = None, target: str = "-") -> bytes:
    """Serialized ``TensorProto`` of ``array`` (raw_data, little-endian, sub-byte types packed),
    refused over protobuf's 2 GiB limit."""
    array = np.asarray(array)
    if array.nbytes > PROTOBUF_LIMIT:
        raise OutputError(f"{target}: {array.nbytes} bytes of data exceed the 2 GiB TensorProto "
                          "limit; write .npy instead")
    if not array.dtype.isnative:  # onnx maps only native-order dtypes to element types
        array = array.astype(array.dtype.newbyteorder("="))
    tensor = _proto_of_array(array, name, target)
    size = tensor.ByteSize()
    if size > PROTOBUF_LIMIT:
        raise OutputError(f"{target}: the TensorProto would be {size} bytes, over the 2 GiB "
                          "limit; write .npy instead")
    return tensor.SerializeToString()
