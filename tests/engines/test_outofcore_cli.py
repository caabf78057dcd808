"""--engine / --memory-limit / --scheduler / --quiet: option parsing, the engine choice, and
the out-of-core run of the library pipeline that the pad and conv commands make."""

from __future__ import annotations

import click
import numpy as np
import pytest
from click.testing import CliRunner

from padconv_cli.cli.options import EngineSettings, engine_options
from padconv_cli.errors import InputError, OutputError, PadconvError
from padconv_cli.kernels.conv import conv
from padconv_cli.kernels.pad import pad
from padconv_cli.pipeline import Request, plan


def _request(operator, inputs, attributes, output, fmt, settings):
    return Request(operator.capitalize(), tuple(inputs), attributes, engine=settings.engine,
                   output=output, fmt=fmt, memory_limit=settings.memory_limit,
                   scheduler=settings.scheduler)


def run_with_engine(operator, inputs, attributes, output, fmt, settings):
    """True when the pipeline ran the call out of core (False: the in-memory engine applies,
    and nothing ran)."""
    planned = plan(_request(operator, inputs, attributes, output, fmt, settings))
    if planned.gate() == "memory":
        return False
    return planned.execute().engine != "memory"


def resolve_engine(operator, inputs, attributes, output, fmt, settings):
    """The engine the gate chooses (also when the gate then refuses the call)."""
    from padconv_cli.errors import OutputTooLargeError

    planned = plan(_request(operator, inputs, attributes, output, fmt, settings))
    try:
        return planned.gate()
    except OutputTooLargeError:
        return planned.engine

RNG = np.random.default_rng(5)


@click.command()
@click.argument("data")
@click.option("--pads", required=True)
@click.option("--mode", default="constant")
@click.option("--constant-value", default=None)
@click.option("-o", "--output", default=None)
@engine_options
def pad_like(data, pads, mode, constant_value, output, engine_settings):
    """A command wired the way pad_cmd.py is asked to be (see the report)."""
    attributes = {
        "pads": [int(p) for p in pads.split(",")],
        "constant_value": constant_value,
        "axes": None,
        "mode": mode,
    }
    try:
        handled = run_with_engine("pad", [data], attributes, output, None, engine_settings)
    except PadconvError as error:
        raise click.ClickException(str(error)) from None
    click.echo(f"handled={handled} settings={engine_settings}")


def invoke(*args):
    return CliRunner().invoke(pad_like, list(args), catch_exceptions=False)


def test_options_become_one_settings_object(tmp_path):
    np.save(tmp_path / "x.npy", np.arange(6.0))
    result = invoke(
        str(tmp_path / "x.npy"),
        "--pads",
        "1,1",
        "--memory-limit",
        "64M",
        "-q",
        "--engine",
        "memory",
    )
    assert result.exit_code == 0, result.output
    expected = EngineSettings("memory", 64 * 2**20, None, True)
    assert f"handled=False settings={expected}" in result.output


def test_bad_size_is_a_usage_error(tmp_path):
    result = invoke("x.npy", "--pads", "1,1", "--memory-limit", "lots")
    assert result.exit_code == 2 and "is not a size" in result.output


@pytest.mark.parametrize("mode", ["constant", "reflect"])
def test_tiled_engine_writes_the_same_file(tmp_path, mode):
    data = RNG.standard_normal((8, 50)).astype(np.float32)
    np.save(tmp_path / "x.npy", data)
    result = invoke(
        str(tmp_path / "x.npy"),
        "--pads",
        "2,-1,3,4",
        "--mode",
        mode,
        "--constant-value",
        "-2",
        "--engine",
        "tiled",
        "--memory-limit",
        "2K",
        "-o",
        str(tmp_path / "y.npy"),
    )
    assert result.exit_code == 0, result.output
    assert "handled=True" in result.output
    value = np.float32(-2) if mode == "constant" else None
    expected = pad(data, [2, -1, 3, 4], value, None, mode)
    assert np.load(tmp_path / "y.npy").tobytes() == expected.tobytes()


def test_tiled_engine_needs_npy_files(tmp_path):
    np.save(tmp_path / "x.npy", np.zeros(4))
    stdout = invoke(str(tmp_path / "x.npy"), "--pads", "1,1", "--engine", "tiled")
    assert stdout.exit_code == 1 and "writes a .npy file, give output FILE.npy" in stdout.output
    literal = invoke("[1, 2]", "--pads", "1,1", "--engine", "tiled", "-o", str(tmp_path / "y.npy"))
    assert literal.exit_code == 1 and "reads its input from a .npy file" in literal.output


def settings(engine="auto", limit=None, scheduler=None):
    return EngineSettings(engine, limit, scheduler, True)


def test_auto_picks_tiled_only_for_large_npy_to_npy(tmp_path):
    np.save(tmp_path / "x.npy", np.zeros((100, 100), np.float32))  # 40 kB
    source, target = str(tmp_path / "x.npy"), str(tmp_path / "y.npy")
    attrs = {"pads": [1, 1, 1, 1], "mode": "constant"}
    assert resolve_engine("pad", [source], attrs, target, None, settings(limit=10_000)) == "tiled"
    assert resolve_engine("pad", [source], attrs, target, None, settings(limit=10**9)) == "memory"
    assert resolve_engine("pad", [source], attrs, None, None, settings(limit=10_000)) == "memory"
    assert resolve_engine("pad", [source], attrs, "y.pb", None, settings(limit=10_000)) == "memory"
    assert resolve_engine("pad", [source], attrs, "y.zarr", None, settings()) == "dask"
    literal_attrs = {"pads": [1, 1], "mode": "constant"}
    assert resolve_engine("pad", ["[1]"], literal_attrs, target, None, settings(limit=1)) == (
        "memory")
    assert resolve_engine("pad", [source], attrs, target, None, settings("tiled")) == "tiled"


def test_auto_reports_invalid_attributes_as_the_planner_words_them(tmp_path):
    from padconv_cli.errors import AttributeValueError

    np.save(tmp_path / "x.npy", np.zeros((100, 100), np.float32))
    attrs = {"pads": [1, 1], "mode": "constant"}  # wrong count
    with pytest.raises(AttributeValueError, match="2 \\* rank"):
        resolve_engine("pad", [str(tmp_path / "x.npy")], attrs, str(tmp_path / "y.npy"), None,
                       settings(limit=10))
    assert not (tmp_path / "y.npy").exists()


def test_run_with_engine_conv_reads_w_and_b_and_writes_bits(tmp_path):
    x = RNG.standard_normal((1, 2, 30, 30)).astype(np.float32)
    w = RNG.standard_normal((3, 2, 3, 3)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "w.npy", w)
    attrs = {
        "auto_pad": "SAME_LOWER",
        "dilations": None,
        "group": 1,
        "kernel_shape": None,
        "pads": None,
        "strides": [2, 1],
    }
    handled = run_with_engine(
        "conv",
        [str(tmp_path / "x.npy"), str(tmp_path / "w.npy"), "[0.5, 0.5, 0.5]"],
        attrs,
        str(tmp_path / "y.npy"),
        None,
        settings("tiled", 10**8),
    )
    assert handled
    expected = conv(x, w, np.full(3, 0.5, np.float32), auto_pad="SAME_LOWER", strides=[2, 1])
    assert np.load(tmp_path / "y.npy").tobytes() == expected.tobytes()


def test_run_with_engine_refuses_missing_input(tmp_path):
    with pytest.raises(InputError):
        run_with_engine(
            "pad",
            [str(tmp_path / "none.npy")],
            {"pads": [1, 1], "mode": "edge"},
            str(tmp_path / "y.npy"),
            None,
            settings("tiled"),
        )
    with pytest.raises(OutputError):
        np.save(tmp_path / "x.npy", np.zeros(3))
        run_with_engine(
            "pad",
            [str(tmp_path / "x.npy")],
            {"pads": [1, 1], "mode": "edge"},
            str(tmp_path / "y.pb"),
            None,
            settings("tiled"),
        )


def test_real_pad_command_runs_tiled(tmp_path, run_cli):
    data = RNG.standard_normal((16, 40)).astype(np.float32)
    np.save(tmp_path / "x.npy", data)
    result = run_cli(
        "pad",
        str(tmp_path / "x.npy"),
        "--pads",
        "1",
        "2",
        "3",
        "4",
        "--mode",
        "wrap",
        "--engine",
        "tiled",
        "--memory-limit",
        "4K",
        "-o",
        str(tmp_path / "y.npy"),
    )
    assert result.exit_code == 0, result.stderr
    expected = pad(data, [1, 2, 3, 4], mode="wrap")
    assert np.load(tmp_path / "y.npy").tobytes() == expected.tobytes()


def test_an_operator_without_out_of_core_engines_runs_in_memory_or_is_refused(tmp_path,
                                                                               monkeypatch):
    import dataclasses

    from padconv_cli import ops

    monkeypatch.setitem(ops.OPERATORS, "Pad",
                        dataclasses.replace(ops.OPERATORS["Pad"], engines=("memory",)))
    np.save(tmp_path / "x.npy", np.zeros((100, 100), np.float32))
    source, target = str(tmp_path / "x.npy"), str(tmp_path / "y.npy")
    attrs = {"pads": [1, 1, 1, 1], "mode": "constant"}
    assert resolve_engine("pad", [source], attrs, target, None, settings(limit=10_000)) == (
        "memory")
    for engine in ("tiled", "dask"):
        with pytest.raises(InputError, match=f"engine {engine} does not run Pad; it runs on "
                           "memory"):
            resolve_engine("pad", [source], attrs, target, None, settings(engine))
    with pytest.raises(InputError, match="engine dask does not run Pad"):
        resolve_engine("pad", [source], attrs, str(tmp_path / "y.zarr"), None, settings())
    assert not (tmp_path / "y.npy").exists()
