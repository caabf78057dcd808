"""Tiny inputs that ask for gigabytes are refused up front by the one resource gate.

Each case builds its input in ``tmp_path`` and runs ``padconv`` as a child (forked from a
server with the imports done: hostile/fork_server.py; the installed command under ``ulimit -v``)
whose peak resident memory is measured: a refusal is exit 2, one line on stderr naming the limit,
what was needed and the flag that changes it, nothing written, and a peak under 300 MiB.
"""

from __future__ import annotations

import re
import resource
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

TESTS_DIR = Path(__file__).resolve().parents[1]
if str(TESTS_DIR) not in sys.path:
    sys.path.insert(0, str(TESTS_DIR))

from hostile.runner import run_padconv  # noqa: E402
from npy_bytes import header_dict, npy_image  # noqa: E402

PEAK_LIMIT = 300 * 2**20
HUGE = 30_000_000
INT62 = 2**62
# Strides and dilations of 3e7 with pads of 6e7: three outputs per axis, each read by another
# tap of X's one pixel (o + k = 2). The taps and outputs that read X span 3e7 positions: the
# kernels' rows would hold 3e7 zeros each; 72 GiB of working memory for a 36-byte result.
DIAGONAL = ["--pads", *(str(2 * HUGE),) * 4, "--strides", str(HUGE), str(HUGE),
            "--dilations", str(HUGE), str(HUGE)]


@pytest.fixture()
def tiny_conv(tmp_path: Path) -> Path:
    """A 1x1x5x5 X and a 1x1x3x3 W of ones."""
    np.save(tmp_path / "x.npy", np.ones((1, 1, 5, 5), np.float32))
    np.save(tmp_path / "w.npy", np.ones((1, 1, 3, 3), np.float32))
    np.save(tmp_path / "x0.npy", np.ones((0, 1, 5, 5), np.float32))
    return tmp_path


def _refused(run, folder: Path, flag: str | None, written: str | None = None) -> str:
    assert not run.timed_out
    assert run.returncode == 2, run.stderr_text
    assert len(run.stderr_lines) == 1, run.stderr_text
    line = run.stderr_lines[0]
    assert re.match(r"padconv( \w+)?: error: ", line), line
    assert "Traceback" not in run.stderr_text
    if flag is not None:
        assert flag in line
    assert 0 < run.peak_rss_bytes < PEAK_LIMIT
    if written is not None:
        assert not (folder / written).exists()
    return line


def _ints(*values: int) -> list[str]:
    return [str(v) for v in values]


def test_working_memory_over_the_limit_is_refused(tiny_conv, forked_run):
    run = forked_run(
        ["conv", "x.npy", "w.npy", *DIAGONAL, "--memory-limit", "200M", "-o", "y.pb"],
        tiny_conv)
    line = _refused(run, tiny_conv, "--memory-limit", "y.pb")
    assert "working" in line and "200.0 MiB" in line
    assert "tiled" not in line  # a .pb output cannot go to the tiled engine


@pytest.mark.parametrize("engine", ["memory", "tiled"])
@pytest.mark.parametrize(
    "attributes",
    [
        {"pads": [0, HUGE, 0, HUGE], "strides": [1, HUGE]},
        {"pads": [HUGE] * 4, "strides": [HUGE, HUGE]},
        {"pads": [10**8] * 4, "strides": [10**8, 10**8]},
        {"auto_pad": "SAME_UPPER", "dilations": [1, HUGE]},
        {"auto_pad": "SAME_UPPER", "dilations": [HUGE, HUGE]},
        {"pads": [HUGE, 0, HUGE, 0], "dilations": [HUGE, 1]},
    ],
    ids=["pads_and_strides_3e7_on_one_axis", "pads_and_strides_3e7", "pads_and_strides_1e8",
         "same_upper_dilation_3e7_on_one_axis", "same_upper_dilation_3e7",
         "pads_and_dilation_3e7"],
)
def test_tiny_conv_with_huge_geometry_runs_in_little_memory(tiny_conv, attributes, engine,
                                                             forked_run):
    """Taps and outputs that read only padding are not computed on rows of zeros: the spec's
    result, in a few MiB."""
    from oracles import oracle_conv

    flags = []
    for name, values in attributes.items():
        flags += [f"--{name.replace('_', '-')}", *map(str, np.atleast_1d(values))]
    x = np.arange(25, dtype=np.float32).reshape(1, 1, 5, 5)
    np.save(tiny_conv / "x.npy", x)
    run = forked_run(
        ["conv", "x.npy", "w.npy", *flags, "--engine", engine, "-o", "y.npy"],
        tiny_conv)
    assert run.returncode == 0, run.stderr_text
    assert run.stderr_text == ""
    assert 0 < run.peak_rss_bytes < PEAK_LIMIT
    expected = oracle_conv(x, np.ones((1, 1, 3, 3), np.float32), **attributes)
    np.testing.assert_array_equal(np.load(tiny_conv / "y.npy"), expected.astype(np.float32))


def test_refusal_names_the_tiled_engine_when_it_would_fit(tmp_path, forked_run):
    np.save(tmp_path / "d.npy", np.ones((2048, 1024), np.float32))  # 8 MiB in, 8 MiB out
    run = forked_run(
        ["pad", "d.npy", "--pads", "1", "1", "1", "1", "--memory-limit", "12M", "--engine",
         "memory", "-o", "y.npy"],
        tmp_path)
    line = _refused(run, tmp_path, "--memory-limit", "y.npy")
    assert line.endswith("; --engine tiled works within that limit")


def test_refusal_names_no_tiled_engine_that_would_not_fit(tiny_conv, forked_run):
    """Pads and strides of 3e7: the tiled engine's smallest tile needs gigabytes too (the
    depthwise kernel's rows grow with the stride), so the refusal does not suggest it."""
    run = forked_run(
        ["conv", "x.npy", "w.npy", *DIAGONAL, "--memory-limit", "200M", "--engine", "memory",
         "-o", "y.npy"],
        tiny_conv)
    assert "tiled" not in _refused(run, tiny_conv, "--memory-limit", "y.npy")


def test_auto_engine_refuses_when_neither_engine_fits(tiny_conv, forked_run):
    """auto considers the tiled engine for a .npy input and output when the in-memory path
    would exceed --memory-limit; when its smallest tile does not fit either, one line."""
    run = forked_run(
        ["conv", "x.npy", "w.npy", *DIAGONAL, "--memory-limit", "200M", "-o", "y.npy"],
        tiny_conv)
    _refused(run, tiny_conv, "--memory-limit", "y.npy")


def _conv_model(path: Path, **attributes) -> None:
    node = helper.make_node("Conv", ["X", "W"], ["Y"], **attributes)
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, None)],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)],
        [helper.make_tensor("W", TensorProto.FLOAT, [1, 1, 3, 3], [1.0] * 9)],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)]), path)


def test_model_node_with_huge_pads_is_refused(tiny_conv, forked_run):
    _conv_model(tiny_conv / "m.onnx", pads=[2 * HUGE] * 4, strides=[HUGE, HUGE],
                dilations=[HUGE, HUGE])
    assert (tiny_conv / "m.onnx").stat().st_size < 400
    run = forked_run(
        ["conv", "x.npy", "--from-model", "m.onnx", "--memory-limit", "200M", "-o", "y.npy"],
        tiny_conv)
    _refused(run, tiny_conv, "--memory-limit", "y.npy")


def test_default_limits_come_from_the_one_memory_probe(tiny_conv):
    """With no flags the limits are half of the memory available; under ``ulimit -v 2G`` the
    72 GiB of working memory is refused by the probe's default."""
    limit = 2 * 2**30

    def address_space() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    run = run_padconv(
        ["conv", "x.npy", "w.npy", *DIAGONAL, "-o", "y.pb"],
        cwd=tiny_conv, measure_memory=True, preexec_fn=address_space,
    )
    _refused(run, tiny_conv, "--memory-limit", "y.pb")


def test_string_pb_padded_counts_strings_at_written_width(tmp_path, forked_run):
    """One 30,000-character string padded by 5,000: 1.1 GiB as a fixed-width .npy."""
    tensor = helper.make_tensor("s", TensorProto.STRING, [1], [b"a" * 30_000])
    (tmp_path / "s.pb").write_bytes(tensor.SerializeToString())
    run = forked_run(
        ["pad", "s.pb", "--pads", "5000", "5000", "--max-output-bytes", "200M", "-o", "o.npy"],
        tmp_path)
    line = _refused(run, tmp_path, "--max-output-bytes", "o.npy")
    assert "as written" in line
    # written as .pb, the empty fill strings are tiny: the same call fits
    run = forked_run(
        ["pad", "s.pb", "--pads", "5000", "5000", "--max-output-bytes", "200M", "-o", "o.pb"],
        tmp_path)
    assert run.returncode == 0, run.stderr_text
    assert run.peak_rss_bytes < PEAK_LIMIT


def test_long_string_literal_padded_is_refused(tmp_path, forked_run):
    literal = '["' + "b" * 100_000 + '"]'
    run = forked_run(
        ["pad", literal, "--pads", "3000", "3000", "--max-output-bytes", "200M", "-o", "o.npy"],
        tmp_path)
    _refused(run, tmp_path, "--max-output-bytes", "o.npy")


def test_empty_npy_of_huge_strings_is_refused(tmp_path, forked_run):
    """A 128-byte .npy declaring ``<U100000000`` of shape (0,): one fill element is 381 MiB."""
    (tmp_path / "u.npy").write_bytes(npy_image(header_dict("<U100000000", (0,))))
    assert (tmp_path / "u.npy").stat().st_size == 128
    run = forked_run(
        ["pad", "u.npy", "--pads", "1", "0", "--max-output-bytes", "200M", "-o", "o.npy"],
        tmp_path)
    _refused(run, tmp_path, "--max-output-bytes", "o.npy")


def test_declared_shape_of_a_zarr_store_counts(tmp_path, forked_run):
    """A Zarr store of a few hundred bytes declaring a 4 TiB float32 array."""
    zarr = pytest.importorskip("zarr", reason="the Zarr engine needs padconv[dask]")
    pytest.importorskip("distributed", reason="the Zarr engine needs padconv[dask]")
    zarr.open(str(tmp_path / "big.zarr"), mode="w", shape=(1024,) * 4,
              chunks=(1, 1, 1024, 1024), dtype="f4")
    run = forked_run(
        ["pad", "big.zarr", "--pads", *_ints(1, 0, 0, 0, 0, 0, 0, 0), "--max-output-bytes",
         "1G", "-o", "out.zarr"],
        tmp_path)
    line = _refused(run, tmp_path, "--max-output-bytes", "out.zarr")
    assert "4.0 TiB" in line


@pytest.mark.parametrize("output", ["y.pb", "y.npy"])
def test_no_image_with_pads_of_2_to_the_62_is_refused_in_one_line(tiny_conv, output, forked_run):
    """Default limits; a .pb output keeps the call on the in-memory engine, a .npy output lets
    auto consider the tiled engine, which cannot hold it either."""
    run = forked_run(
        ["conv", "x0.npy", "w.npy", "--pads", *_ints(INT62, INT62, INT62, INT62),
                       "-o", output],
        tiny_conv)
    _refused(run, tiny_conv, None, output)


@pytest.mark.parametrize("output", ["y.pb", "y.npy"])
@pytest.mark.parametrize(
    "attributes",
    [{"auto_pad": "SAME_UPPER", "dilations": [INT62, INT62]},
     {"pads": [INT62] * 4, "strides": [INT62, INT62]}],
    ids=["same_upper_dilation_2e62", "pads_strides_2e62"],
)
def test_geometry_of_2_to_the_62_gets_the_specifications_result(tiny_conv, attributes, output,
                                                                forked_run):
    """Default limits: only the taps and outputs that read X are computed (index arithmetic
    in Python integers, none of them past int64)."""
    from oracles import oracle_conv

    from padconv_cli import read_tensor

    flags = []
    for name, values in attributes.items():
        flags += [f"--{name.replace('_', '-')}", *map(str, np.atleast_1d(values))]
    run = forked_run(
        ["conv", "x.npy", "w.npy", *flags, "-o", output],
        tiny_conv)
    assert run.returncode == 0 and run.stderr_text == "", run.stderr_text
    assert 0 < run.peak_rss_bytes < PEAK_LIMIT
    expected = oracle_conv(np.ones((1, 1, 5, 5)), np.ones((1, 1, 3, 3)), **attributes)
    np.testing.assert_array_equal(read_tensor(str(tiny_conv / output)),
                                  expected.astype(np.float32))
