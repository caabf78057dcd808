"""``--constant-value`` text read as an element of the data's type (padconv_cli.constant_text):
the text rules, and the kernel's range rules on the number it writes."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from padconv_cli.constant_text import constant_from_text
from padconv_cli.errors import AttributeValueError


@pytest.mark.parametrize(
    ("text", "dtype", "expected"),
    [
        ("0", np.uint8, 0),
        ("255", np.uint8, 255),
        ("-128", np.int8, -128),
        ("1e3", np.int16, 1000),
        ("2.0", np.int32, 2),
        ("18446744073709551615", np.uint64, 18446744073709551615),
        ("-9223372036854775808", np.int64, -9223372036854775808),
        ("-1.5", np.float32, -1.5),
        ("1e-50", np.float32, 0.0),
        ("3.4028235e38", np.float32, 3.4028235e38),
        ("-inf", np.float16, -np.inf),
        ("inf", ml_dtypes.bfloat16, np.inf),
        ("inf", ml_dtypes.float8_e5m2, np.inf),
        ("448", ml_dtypes.float8_e4m3fn, 448.0),
        ("-6", ml_dtypes.float4_e2m1fn, -6.0),
        ("7", ml_dtypes.int4, 7),
        ("15", ml_dtypes.uint4, 15),
        ("true", np.bool_, True),
        ("FALSE", np.bool_, False),
        ("1", np.bool_, True),
        ("0", np.bool_, False),
        ("1+2j", np.complex64, 1 + 2j),
        ("1 + 2j", np.complex128, 1 + 2j),
        ("-2.5", np.complex128, -2.5),
        ("3", "<U1", "3"),
        ("abc", object, "abc"),
        ("", object, ""),
    ],
)
def test_text_accepted(text, dtype, expected):
    result = constant_from_text(text, dtype)
    if np.dtype(dtype).kind in "OU":
        assert type(result) is str and result == expected
    else:
        assert isinstance(result, np.generic) and result.dtype == np.dtype(dtype)
        assert result == np.array(expected).astype(dtype)[()]


@pytest.mark.parametrize("text", ["nan", "NaN", "-nan"])
@pytest.mark.parametrize(
    "dtype", [np.float16, np.float32, np.float64, ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn]
)
def test_nan_text_for_float_types(text, dtype):
    assert np.isnan(float(constant_from_text(text, dtype)))


@pytest.mark.parametrize(
    ("text", "dtype", "message"),
    [
        ("300", np.uint8, r"^constant_value 300 does not fit uint8 \[0, 255\]$"),
        ("-1", np.uint32, r"^constant_value -1 does not fit uint32 \[0, 4294967295\]$"),
        ("-1", np.uint64, r"does not fit uint64"),
        ("128", np.int8, r"does not fit int8 \[-128, 127\]$"),
        ("8", ml_dtypes.int4, r"does not fit int4 \[-8, 7\]$"),
        ("1.5", np.int32,
         r"^constant_value '1.5' is not an integer; an int32 tensor needs an integer$"),
        ("nan", np.int64, r"is not an integer"),
        ("inf", np.int16, r"is not an integer"),
        ("true", np.int8, r"is not an integer"),
        ("abc", np.float32,
         r"^constant_value 'abc' is not a number; a float32 tensor needs a real number$"),
        ("", np.float64, r"is not a number"),
        ("1+2j", np.float32,
         r"^constant_value 1\+2j is complex; a float32 tensor needs a real number$"),
        ("1e40", np.float32,
         r"^constant_value 1e40 does not fit float32 \[-3.40282e\+38, 3.40282e\+38\]$"),
        ("1e400", np.float64, r"does not fit float64"),
        ("70000", np.float16, r"does not fit float16"),
        ("500", ml_dtypes.float8_e4m3fn, r"does not fit float8_e4m3fn"),
        ("inf", ml_dtypes.float8_e4m3fn, r"^constant_value inf: float8_e4m3fn has no infinity$"),
        ("nan", ml_dtypes.float4_e2m1fn, r"^constant_value nan: float4_e2m1fn has no NaN$"),
        ("0", ml_dtypes.float8_e8m0fnu, r"does not fit float8_e8m0fnu"),
        ("2", np.bool_,
         r"^constant_value '2' is not a boolean; a bool tensor needs true, false, 0 or 1$"),
        ("yes", np.bool_, r"is not a boolean"),
        ("1e39+1j", np.complex64, r"does not fit complex64"),
        ("x+1j", np.complex128, r"is not a number"),
        ("9" * 80, np.int8, r"^constant_value 9{37}\.\.\. does not fit int8"),
    ],
)
def test_text_refused(text, dtype, message):
    with pytest.raises(AttributeValueError, match=message):
        constant_from_text(text, dtype)


@pytest.mark.parametrize("engine", ["memory", "tiled", "dask"])
def test_cli_text_reaches_every_engine_typed(run_cli, tmp_path, engine):
    """The same text gives the same fill on every engine (it is read once, by the data type)."""
    np.save(tmp_path / "d.npy", np.arange(4, dtype=np.int16).reshape(2, 2))
    out = tmp_path / "y.npy"
    result = run_cli("pad", str(tmp_path / "d.npy"), "--pads", "1", "0", "0", "0",
                     "--constant-value", "1e3", "--engine", engine, "-o", str(out))
    assert result.exit_code == 0, result.stderr
    assert np.load(out).tolist() == [[1000, 1000], [0, 1], [2, 3]]


@pytest.mark.parametrize("engine", ["memory", "tiled"])
def test_cli_bad_text_is_one_line_naming_the_flag(run_cli, tmp_path, engine):
    np.save(tmp_path / "d.npy", np.zeros((2, 2), dtype=np.uint8))
    result = run_cli("pad", str(tmp_path / "d.npy"), "--pads", "1", "0", "0", "0",
                     "--constant-value", "300", "--engine", engine, "-o", str(tmp_path / "y.npy"))
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        "padconv pad: error: --constant-value 300 does not fit uint8 [0, 255]"
    )
    assert not (tmp_path / "y.npy").exists()


@pytest.mark.parametrize("text", ["1_5", "1_000.5", "\u0661", "\uff11", "\u0661e3", "tru\u0435"])
@pytest.mark.parametrize("dtype", [np.int32, np.float32, np.complex64, np.bool_])
def test_number_text_that_python_reads_loosely_is_refused(text, dtype):
    with pytest.raises(AttributeValueError, match="ASCII"):
        constant_from_text(text, dtype)


def test_a_string_constant_may_be_any_text():
    assert constant_from_text("1_5 \u0661", np.dtype(object)) == "1_5 \u0661"
