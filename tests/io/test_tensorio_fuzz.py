"""Properties: arbitrary bytes and text never escape as anything but a PadconvError."""

from __future__ import annotations

import re

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from npy_bytes import header_dict, header_text, npy_image

from padconv_cli.dtypes import numpy_dtype_of_elem_type
from padconv_cli.errors import PadconvError
from padconv_cli.tensorio import tensor_to_bytes
from padconv_cli.tensorio.literal import parse_literal
from padconv_cli.tensorio.npy import read_npy_bytes
from padconv_cli.tensorio.npz import read_npz_bytes
from padconv_cli.tensorio.protobuf import read_pb_bytes
from padconv_cli.tensorio.sniff import read_sniffed_bytes

FUZZ = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])

npy_headers = st.builds(
    header_text,
    st.one_of(
        st.sampled_from(
            [
                "'<f4'",
                "'>i8'",
                "'|b1'",
                "'O'",
                "'<U3'",
                "'|V0'",
                "'>M8[D]'",
                "'<m8'",
                "'S0'",
                "[('a', '<i2')]",
                "[('a', '>i2', (2,)), ('', '|V3')]",
                "[('a', 'O', (2,))]",
                "('<i2', (3,))",
                "('<f8', (10**9,))",
                "[]",
                "5",
            ]
        ),
        st.text(max_size=12).map(repr),
    ),
    st.sampled_from(["False", "True", "0", "None"]),
    st.one_of(
        st.lists(st.integers(-3, 2**40), max_size=4).map(lambda dims: repr(tuple(dims))),
        st.text(max_size=20),
    ),
)


CONTROL_CHARACTERS = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def assert_only_padconv_errors(function, *args) -> None:
    try:
        function(*args)
    except PadconvError as exc:
        assert not CONTROL_CHARACTERS.search(str(exc)), repr(str(exc))


@FUZZ
@given(st.binary(max_size=300))
def test_npy_reader_on_arbitrary_bytes(data):
    assert_only_padconv_errors(read_npy_bytes, data, "f.npy")


@FUZZ
@given(npy_headers, st.binary(max_size=64), st.sampled_from([1, 2, 3]))
def test_npy_reader_on_plausible_headers(header, data, version):
    image = npy_image(header.encode("utf8"), data, (version, 0), aligned=False)
    assert_only_padconv_errors(read_npy_bytes, image, "f.npy")


@FUZZ
@given(st.binary(max_size=300))
def test_pb_reader_on_arbitrary_bytes(data):
    assert_only_padconv_errors(read_pb_bytes, data, "f.pb", None)


@FUZZ
@given(st.binary(max_size=300))
def test_stdin_sniffer_on_arbitrary_bytes(data):
    assert_only_padconv_errors(read_sniffed_bytes, data, "<stdin>")


@FUZZ
@given(st.binary(max_size=300))
def test_npz_reader_on_zip_prefixed_bytes(data):
    assert_only_padconv_errors(read_npz_bytes, b"PK\x03\x04" + data, None, "f.npz")


@FUZZ
@given(st.data())
def test_mutated_real_images_fail_cleanly(data):
    array = np.arange(6, dtype=np.float32).reshape(2, 3)
    fmt = data.draw(st.sampled_from(["npy", "pb"]))
    image = bytearray(tensor_to_bytes(array, fmt))
    for _ in range(data.draw(st.integers(1, 4))):
        position = data.draw(st.integers(0, len(image) - 1))
        image[position] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(image)))
    assert_only_padconv_errors(read_sniffed_bytes, bytes(image[:cut]), "<stdin>")


tensor_fields = st.fixed_dictionaries(
    {
        "data_type": st.integers(-2, 30),
        "dims": st.lists(st.integers(-2, 6), max_size=3),
        "raw_data": st.one_of(st.none(), st.binary(max_size=40)),
        "int32_data": st.lists(st.integers(-(2**31), 2**31 - 1), max_size=8),
        "float_data": st.lists(st.floats(width=32), max_size=8),
        "int64_data": st.lists(st.integers(-(2**63), 2**63 - 1), max_size=4),
        "string_data": st.lists(st.binary(max_size=5), max_size=4),
        "uint64_data": st.lists(st.integers(0, 2**64 - 1), max_size=4),
    }
)


@FUZZ
@given(tensor_fields)
def test_structured_tensor_protos_fail_cleanly_or_match_onnx(fields):
    tensor = onnx.TensorProto(data_type=fields["data_type"], dims=fields["dims"])
    if fields["raw_data"] is not None:
        tensor.raw_data = fields["raw_data"]
    for name in ("int32_data", "float_data", "int64_data", "string_data", "uint64_data"):
        getattr(tensor, name).extend(fields[name])
    try:
        _, array = read_pb_bytes(tensor.SerializeToString(), "f.pb", None)
    except PadconvError as exc:
        assert not CONTROL_CHARACTERS.search(str(exc)), repr(str(exc))
        return
    # Accepted: it must be exactly what onnx itself makes of the message.
    assert array.dtype == numpy_dtype_of_elem_type(tensor.data_type)
    assert array.shape == tuple(tensor.dims)
    expected = onnx.numpy_helper.to_array(tensor)
    assert np.asarray(array).tobytes() == np.asarray(expected).tobytes() or (
        array.dtype == object and array.tolist() == expected.tolist()
    )


@FUZZ
@given(st.text(max_size=60))
def test_literal_parser_on_arbitrary_text(text):
    assert_only_padconv_errors(parse_literal, text, None)


@FUZZ
@given(
    st.recursive(
        st.one_of(
            st.integers(-(2**70), 2**70),
            st.floats(),
            st.booleans(),
            st.text(max_size=3),
            st.complex_numbers(allow_nan=False),
        ),
        lambda children: st.lists(children, max_size=3),
        max_leaves=8,
    ),
    st.sampled_from(
        [
            None,
            "float",
            "int8",
            "uint4",
            "bfloat16",
            "float8e4m3fn",
            "bool",
            "string",
            "complex64",
            "float4e2m1",
            "float8e8m0",
            "uint64",
        ]
    ),
)
def test_literal_of_python_values_is_exact_or_refused(values, dtype):
    try:
        array = parse_literal(repr(values), dtype)
    except PadconvError as exc:
        assert not CONTROL_CHARACTERS.search(str(exc)), repr(str(exc))
        return
    assert array.shape == np.shape(np.array(values, dtype=object)) or array.size == 0


@pytest.mark.parametrize("version", [1, 2, 3])
def test_fuzz_helper_builds_readable_images(version):
    """Guard for the fuzz helper itself: a well-formed image must read back."""
    header = header_dict("<i2", (2,))
    image = npy_image(header, np.array([1, 2], dtype="<i2").tobytes(), (version, 0), aligned=False)
    assert read_npy_bytes(image, "f.npy").tolist() == [1, 2]


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field (payloads here stay under 128 bytes)."""
    return bytes([number << 3 | 2, len(payload)]) + payload


@FUZZ
@given(
    st.one_of(st.sampled_from([b"location", b"offset", b"length"]), st.binary(max_size=12)),
    st.binary(max_size=12),
    st.binary(max_size=8),
)
def test_external_entries_with_arbitrary_bytes_fail_cleanly(tmp_path_factory, key, value, name):
    """Invalid UTF-8 in string fields comes back from protobuf as bytes, not str."""
    folder = tmp_path_factory.mktemp("ext")
    entry = _field(1, key) + _field(2, value)
    message = (
        b"\x08\x02"  # dims: [2]
        + b"\x10\x01"  # data_type: FLOAT
        + _field(8, name)
        + _field(13, entry)
        + b"\x70\x01"  # data_location: EXTERNAL
    )
    assert_only_padconv_errors(read_pb_bytes, message, "f.pb", str(folder))
