"""Out-of-core Pad and Conv: tile arithmetic and the tiler's cost model, bit-identity with the
in-memory kernels, .npy I/O, the engine options and the engine choice of the pipeline."""

from __future__ import annotations

import itertools
import math
import os

import click
import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from padconv_cli.cli.options import Command, EngineSettings, engine_options
from padconv_cli.errors import (
    InputError,
    OutputError,
    OutputTooLargeError,
    PadconvError,
    UnsupportedDtypeError,
)
from padconv_cli.kernels.conv import conv, plan_conv
from padconv_cli.kernels.pad import pad, plan_pad
from padconv_cli.outofcore.conv_tiles import (
    channel_tiles,
    conv_on_tile,
    conv_tile_cost,
    input_span,
    plan_conv_tiles,
    tile_input,
    tiled_conv,
)
from padconv_cli.outofcore.npy_blocks import open_npy_input
from padconv_cli.outofcore.pad_tiles import (
    axis_reads,
    pad_tile,
    pad_tile_cost,
    plan_pad_tiles,
    read_boxes,
    tiled_pad,
)
from padconv_cli.outofcore.progress import TileProgress
from padconv_cli.outofcore.tiling import choose_tile_shape, split_range
from padconv_cli.pipeline import Request, plan

# Out-of-core Pad and Conv: tile arithmetic, bit-identity with the in-memory kernels, .npy I/O.


RNG = np.random.default_rng(20240601)
MODES = ("constant", "edge", "reflect", "wrap")


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


# --- tile arithmetic ----------------------------------------------------------------------


def test_a_wrap_tile_reads_both_ends_of_the_axis_not_the_middle():
    axis = plan_pad((10,), [3, 0], mode="wrap").per_axis[0]
    runs, table = axis_reads(0, 5, axis, "wrap")  # outputs 0..4 = x[7], x[8], x[9], x[0], x[1]
    assert runs == [(0, 2), (7, 10)] and table.tolist() == [2, 3, 4, 0, 1]


def test_a_reflect_tile_reads_from_the_mirror_source():
    axis = plan_pad((10,), [4, 0], mode="reflect").per_axis[0]
    runs, table = axis_reads(0, 2, axis, "reflect")  # outputs 0, 1 = x[4], x[3]
    assert runs == [(3, 5)] and table.tolist() == [1, 0]


def test_a_constant_tile_reads_nothing_of_the_pad_and_a_long_wrap_only_what_it_needs():
    axis = plan_pad((10,), [4, 0]).per_axis[0]
    assert [(r, t.tolist()) for r, t in [axis_reads(0, 5, axis, "constant")]] == [
        ([(0, 1)], [-1, -1, -1, -1, 0])]
    axis = plan_pad((3,), [7, 0], mode="wrap").per_axis[0]
    runs, table = axis_reads(0, 2, axis, "wrap")  # outputs 0, 1 = x[2], x[0]
    assert runs == [(0, 1), (2, 3)] and table.tolist() == [1, 0]


def test_conv_span_is_stride_times_tile_plus_halo():
    # outputs [2, 5) with stride 2, kernel 3, dilation 2, pad 1: (5-1)*2 - 1 + (3-1)*2 + 1
    assert input_span(2, 5, 2, 2, 3, 1) == (3, 12)
    (channels,) = channel_tiles(1, 1, 1, 1)
    tile = tile_input(plan_conv((1, 1, 4), (1, 1, 3), pads=[2, 2]), (0, 1), channels, ((0, 2),))
    assert tile.box[2] == slice(0, 2) and tile.pads == [2, 0]
    tile = tile_input(plan_conv((1, 1, 4), (1, 1, 1), pads=[3, 0]), (0, 1), channels, ((0, 1),))
    assert tile.box is None


@pytest.mark.parametrize(
    "out_channels, in_channels, group, tile, expected",
    [
        (6, 4, 1, 4, [(0, 4, 0, 4, 1), (4, 6, 0, 4, 1)]),
        (6, 4, 2, 3, [(0, 3, 0, 2, 1), (3, 6, 2, 4, 1)]),
        (8, 4, 4, 4, [(0, 4, 0, 2, 2), (4, 8, 2, 4, 2)]),
        (6, 2, 2, 2, [(0, 2, 0, 1, 1), (2, 3, 0, 1, 1), (3, 5, 1, 2, 1), (5, 6, 1, 2, 1)]),
    ],
)
def test_channel_tiles_never_straddle_a_group(out_channels, in_channels, group, tile, expected):
    tiles = channel_tiles(out_channels, in_channels, group, tile)
    assert [(t.m0, t.m1, t.c0, t.c1, t.group) for t in tiles] == expected


def test_tile_shape_splits_leading_axes_first():
    def cost(shape):
        return math.prod(shape)

    assert choose_tile_shape((4, 5, 6), cost, 10**6) == (4, 5, 6)
    assert choose_tile_shape((4, 5, 6), cost, 60) == (2, 5, 6)
    assert choose_tile_shape((4, 5, 6), cost, 20) == (1, 3, 6)
    with pytest.raises(OutputTooLargeError, match="memory_limit"):
        choose_tile_shape((4, 5, 6), cost, 5, order=[0, 1])


# --- Pad: tiles assembled from pieces equal the kernel ------------------------------------


def assemble_pad(data, pads, value, axes, mode, tile_shape):
    """The tiled algorithm on an in-memory array: every tile from the boxes it reads."""
    plan = plan_pad(data.shape, pads, axes, mode)
    out = np.empty(plan.output_shape, dtype=data.dtype)
    ranges = [split_range(n, t) for n, t in zip(plan.output_shape, tile_shape, strict=True)]
    for tile in itertools.product(*ranges):
        windows = [data[box] for box in read_boxes(tile, plan)]
        out[tuple(slice(*r) for r in tile)] = pad_tile(windows, tile, plan, value, data.dtype)
    return out


@st.composite
def pad_cases(draw):
    rank = draw(st.integers(1, 3))
    shape = tuple(draw(st.integers(1, 6)) for _ in range(rank))
    mode = draw(st.sampled_from(MODES))
    begins = [draw(st.integers(-((d - 1) // 2), 9)) for d in shape]
    ends = [draw(st.integers(-((d - 1) // 2), 9)) for d in shape]
    out_shape = [d + b + e for d, b, e in zip(shape, begins, ends, strict=True)]
    tile = tuple(draw(st.integers(1, max(1, n))) for n in out_shape)
    return shape, begins + ends, mode, tile


@settings(max_examples=40, deadline=None)
@given(pad_cases())
def test_tiled_pad_tiles_are_bit_identical_to_the_kernel(case):
    shape, pads, mode, tile = case
    data = RNG.standard_normal(shape).astype(np.float32)
    value = np.float32(2.5) if mode == "constant" else None
    expected = pad(data, pads, value, None, mode)
    assert same_bits(assemble_pad(data, pads, value, None, mode, tile), expected)


# --- Conv: tiles computed with their halo equal the kernel --------------------------------


def assemble_conv(x, w, b, attrs, budget):
    plan = plan_conv(x.shape, w.shape, None if b is None else b.shape, **attrs)
    tiling = plan_conv_tiles(plan, x.dtype.itemsize, budget)
    out = np.empty(plan.output_shape, dtype=x.dtype)
    for images, channels, *spatial in itertools.product(*tiling):
        tile = tile_input(plan, images, channels, tuple(spatial))
        block = np.zeros(tile.zero_shape, x.dtype) if tile.box is None else x[tile.box]
        box = (slice(*images), slice(channels.m0, channels.m1), *(slice(*r) for r in spatial))
        out[box] = conv_on_tile([np.ascontiguousarray(block)], w, b, plan, tile)
    return out, tiling


CONV_CASES = [
    # (x shape, w shape, group, attributes)
    ((2, 4, 13, 11), (6, 4, 3, 3), 1, {}),
    ((2, 4, 13, 11), (6, 4, 3, 2), 1, {"pads": [1, 0, 2, 3]}),
    ((1, 4, 20, 17), (6, 2, 3, 3), 2, {"strides": [2, 3], "dilations": [2, 1]}),
    ((1, 4, 20, 17), (8, 1, 3, 3), 4, {"auto_pad": "SAME_UPPER", "strides": [2, 2]}),
    ((2, 3, 15, 9), (5, 3, 2, 3), 1, {"auto_pad": "SAME_LOWER", "dilations": [3, 1]}),
    ((2, 3, 15, 9), (5, 3, 2, 3), 1, {"auto_pad": "VALID", "strides": [3, 1]}),
    ((1, 2, 9, 9), (3, 2, 1, 1), 1, {"pads": [5, 6, 7, 8], "strides": [4, 4]}),
    ((3, 2, 40), (4, 1, 5), 2, {"pads": [3, 1], "dilations": [2]}),
    ((1, 2, 7, 8, 9), (3, 2, 3, 2, 2), 1, {"pads": [1, 0, 1, 0, 2, 1], "strides": [2, 1, 2]}),
    ((2, 6, 30, 20), (6, 1, 3, 3), 6, {"pads": [1, 1, 1, 1]}),
    ((2, 4, 30, 20), (6, 4, 1, 1), 1, {}),
    # big enough for BLAS's sums to depend on the shape of the products (and their threads)
    ((2, 8, 80, 70), (16, 8, 3, 3), 1, {"strides": [2, 1], "pads": [1, 1, 1, 1]}),
    ((2, 32, 34, 30), (8, 32, 3, 3), 1, {"pads": [1, 1, 1, 1]}),  # shifted path
    ((3, 16, 1100), (8, 16, 5), 1, {"pads": [2, 2]}),  # shifted path, 1-D
    ((1, 8, 12, 18, 18), (16, 8, 3, 3, 3), 1, {"pads": [1] * 6}),  # im2col over whole rows
]


@pytest.mark.parametrize("x_shape, w_shape, group, attrs", CONV_CASES)
def test_conv_tiles_are_bit_identical(x_shape, w_shape, group, attrs):
    x = RNG.standard_normal(x_shape).astype(np.float32)
    w = RNG.standard_normal(w_shape).astype(np.float32)
    b = RNG.standard_normal(w_shape[0]).astype(np.float32)
    expected = conv(x, w, b, group=group, **attrs)
    plan = plan_conv(x.shape, w.shape, b.shape, group=group, **attrs)
    whole = conv_tile_cost(plan.output_shape, plan=plan, itemsize=4)
    shapes = set()
    for budget in (whole, whole * 11 // 20, whole // 3, whole // 5, whole // 10, whole // 40):
        try:
            got, tiling = assemble_conv(x, w, b, dict(attrs, group=group), budget)
        except OutputTooLargeError:
            continue  # smaller than the smallest tile (the native core's scratch)
        tiles = [len(r) for r in tiling]
        assert math.prod(tiles) > 1 or budget == whole
        assert same_bits(got, expected), (budget, tiles)
        shapes.add(tuple(tiles))
    assert len(shapes) >= 2  # the whole tensor and at least one real split


def test_channel_and_row_tiles_of_one_image_are_bit_identical():
    x = RNG.standard_normal((1, 4, 64, 64)).astype(np.float32)
    w = RNG.standard_normal((6, 4, 3, 3)).astype(np.float32)
    plan = plan_conv(x.shape, w.shape, pads=[1, 1, 1, 1])
    whole = conv_tile_cost(plan.output_shape, plan=plan, itemsize=4)
    got, tiling = assemble_conv(x, w, None, {"pads": [1, 1, 1, 1]}, whole // 8)
    assert len(tiling[2]) > 1
    assert same_bits(got, conv(x, w, pads=[1, 1, 1, 1]))


# --- through .npy files -------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "pads",
    [[1, 2, 3, 0, 4, 5], [0, -1, 2, 1, 0, -2], [0, 9, 15, 0, 13, 20], [-1, 0, -2, 2, -3, 1]],
)
def test_tiled_pad_file_matches_in_memory_file(tmp_path, mode, pads):
    data = RNG.integers(-100, 100, size=(3, 5, 7)).astype(np.int16)
    np.save(tmp_path / "x.npy", data)
    value = np.int16(7) if mode == "constant" else None
    expected = pad(data, pads, value, None, mode)
    plan = plan_pad(data.shape, pads, mode=mode)
    limit = pad_tile_cost(plan.output_shape, plan, 2) // 3
    result = tiled_pad(
        str(tmp_path / "x.npy"),
        str(tmp_path / "y.npy"),
        pads,
        value,
        None,
        mode,
        memory_limit=limit,
    )
    assert result.tiles > 1
    assert same_bits(np.load(tmp_path / "y.npy"), expected)


def test_tiled_pad_with_axes_fortran_order_and_big_endian_input(tmp_path):
    data = np.asfortranarray(RNG.standard_normal((4, 6, 5))).astype(">f8")
    np.save(tmp_path / "x.npy", data)
    tiled_pad(
        str(tmp_path / "x.npy"),
        str(tmp_path / "y.npy"),
        [2, -1, 3, 1],
        None,
        [2, -3],
        "reflect",
        memory_limit=4000,
    )
    expected = pad(data.astype("<f8"), [2, -1, 3, 1], None, [2, -3], "reflect")
    assert same_bits(np.load(tmp_path / "y.npy"), expected)


def test_tiled_conv_file_is_bit_identical(tmp_path):
    x = RNG.standard_normal((2, 3, 40, 30)).astype(np.float32)
    w = RNG.standard_normal((5, 3, 3, 3)).astype(np.float32)
    b = RNG.standard_normal(5).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    result = tiled_conv(
        str(tmp_path / "x.npy"),
        w,
        b,
        str(tmp_path / "y.npy"),
        memory_limit=40_000,
        auto_pad="SAME_UPPER",
        strides=[2, 1],
    )
    assert result.tiles > 1
    expected = conv(x, w, b, auto_pad="SAME_UPPER", strides=[2, 1])
    assert same_bits(np.load(tmp_path / "y.npy"), expected)
    # the file is byte for byte what the in-memory writer produces
    np.save(tmp_path / "z.npy", expected)
    assert (tmp_path / "y.npy").read_bytes() == (tmp_path / "z.npy").read_bytes()


def test_tiled_conv_float16_and_kernel_errors(tmp_path):
    x = RNG.standard_normal((1, 2, 9, 9)).astype(np.float16)
    w = RNG.standard_normal((2, 2, 3, 3)).astype(np.float16)
    np.save(tmp_path / "x.npy", x)
    tiled_conv(str(tmp_path / "x.npy"), w, None, str(tmp_path / "y.npy"), memory_limit=10**7)
    assert same_bits(np.load(tmp_path / "y.npy"), conv(x, w))
    with pytest.raises(UnsupportedDtypeError):
        tiled_conv(
            str(tmp_path / "x.npy"),
            w.astype(np.float32),
            None,
            str(tmp_path / "z.npy"),
            memory_limit=10**7,
        )
    assert not (tmp_path / "z.npy").exists()
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]


def test_limit_too_small_for_weights_is_refused(tmp_path):
    np.save(tmp_path / "x.npy", np.zeros((1, 2, 5, 5), np.float32))
    w = np.zeros((64, 2, 3, 3), np.float32)
    with pytest.raises(OutputTooLargeError, match="memory_limit"):
        tiled_conv(str(tmp_path / "x.npy"), w, None, str(tmp_path / "y.npy"), memory_limit=1000)


def test_tiled_pad_of_empty_and_scalar_tensors(tmp_path):
    for data, pads in ((np.zeros((0, 3), np.float32), [1, 0, 2, 1]), (np.float64(4.0), [])):
        np.save(tmp_path / "x.npy", data)
        tiled_pad(str(tmp_path / "x.npy"), str(tmp_path / "y.npy"), pads, memory_limit=10**6)
        assert same_bits(np.load(tmp_path / "y.npy"), pad(np.asarray(data), pads))


# --- .npy memory maps: the same header checks as tensorio ---------------------------------


def test_forged_header_is_refused_before_mapping(tmp_path):
    path = tmp_path / "forged.npy"
    np.save(path, np.zeros((4, 4), np.float32))
    raw = path.read_bytes().replace(b"(4, 4)", b"(9999, 4)")
    path.write_bytes(raw)
    with pytest.raises(InputError, match="declares shape"):
        open_npy_input(str(path))


def test_object_npy_is_refused(tmp_path):
    path = tmp_path / "objects.npy"
    np.save(path, np.array(["a", 1], dtype=object), allow_pickle=True)
    with pytest.raises(InputError, match="pickle"):
        open_npy_input(str(path))


def test_bool_bytes_are_checked(tmp_path):
    path = tmp_path / "b.npy"
    np.save(path, np.array([True, False, True]))
    raw = bytearray(path.read_bytes())
    raw[-1] = 7
    path.write_bytes(bytes(raw))
    with pytest.raises(InputError, match="bool"):
        open_npy_input(str(path)).read((slice(None),))


# --- progress ------------------------------------------------------------------------------


def test_progress_bar_draws_tiles_and_is_silent_when_disabled(monkeypatch):
    import io

    from rich.console import Console

    monkeypatch.setattr("padconv_cli.outofcore.progress.SHOW_AFTER_SECONDS", 0.0)
    screen = io.StringIO()
    monkeypatch.setattr(
        "rich.console.Console", lambda **_: Console(file=screen, force_terminal=True, width=120)
    )
    with TileProgress(4, 4096, True, "pad") as progress:
        for _ in range(4):
            progress.advance(1024)
    assert "4/4 tiles" in screen.getvalue()
    quiet = TileProgress(4, 4096, False, "pad")
    quiet.advance(1024)
    assert quiet._progress is None and quiet.tiles_done == 1


@pytest.mark.parametrize(("enabled", "styled"), [(True, True), ("plain", False)])
def test_a_plain_progress_bar_has_no_colour_or_bold(monkeypatch, enabled, styled):
    """``--no-color`` (or NO_COLOR) on a terminal: the bar still draws, without escapes of
    style (cursor moves aside, no SGR sequence ``ESC [ ... m``)."""
    import io
    import re

    from rich.console import Console

    monkeypatch.setattr("padconv_cli.outofcore.progress.SHOW_AFTER_SECONDS", 0.0)
    screen = io.StringIO()
    real = Console
    monkeypatch.setattr("rich.console.Console", lambda **options: real(
        **{**options, "stderr": False}, file=screen, force_terminal=True, width=120))
    with TileProgress(4, 4096, enabled, "pad") as progress:
        for _ in range(4):
            progress.advance(1024)
    assert "4/4 tiles" in screen.getvalue()
    assert bool(re.search(r"\x1b\[[0-9;]*m", screen.getvalue())) == styled


# --engine / --memory-limit / --scheduler / --quiet: option parsing, the engine choice, and
# the out-of-core run of the library pipeline that the pad and conv commands make.


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

CLI_RNG = np.random.default_rng(5)


@click.command(cls=Command)
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
    data = CLI_RNG.standard_normal((8, 50)).astype(np.float32)
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
    x = CLI_RNG.standard_normal((1, 2, 30, 30)).astype(np.float32)
    w = CLI_RNG.standard_normal((3, 2, 3, 3)).astype(np.float32)
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
    data = CLI_RNG.standard_normal((16, 40)).astype(np.float32)
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
    from padconv_cli import ops

    monkeypatch.setitem(ops.OPERATORS, "Pad", ops.OPERATORS["Pad"]._replace(engines=("memory",)))
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


# The tiler's cost model: tiles as large as the budget allows, whatever the Pad mode.


PADS = [0, 0, 2, 2, 0, 0, 2, 2]


@pytest.mark.parametrize("mode", ["wrap", "reflect", "edge"])
def test_wrap_and_reflect_tiles_are_as_large_as_constant_ones(mode):
    shape, budget = (1, 1, 4096, 1024), 4 * 2**20
    constant = plan_pad_tiles(plan_pad(shape, PADS, None, "constant"), 4, budget)
    other = plan_pad_tiles(plan_pad(shape, PADS, None, mode), 4, budget)
    assert math.prod(map(len, other)) <= math.prod(map(len, constant)) <= 25


def test_wrap_in_few_tiles_is_bit_identical(tmp_path):
    data = np.random.default_rng(7).standard_normal((1, 1, 300, 200)).astype(np.float32)
    np.save(tmp_path / "x.npy", data)
    result = tiled_pad(
        str(tmp_path / "x.npy"), str(tmp_path / "y.npy"), PADS, mode="wrap", memory_limit=200_000
    )
    assert 1 < result.tiles <= 12
    expected = pad(data, PADS, mode="wrap")
    assert np.load(tmp_path / "y.npy").tobytes() == expected.tobytes()


# --- a minimum tile, and a limit that cannot be honoured -----------------------------------


def test_a_big_conv_is_never_cut_into_slivers_a_too_small_limit_is_refused_up_front(tmp_path):
    from padconv_cli.errors import OutputTooLargeError
    from padconv_cli.kernels.conv import plan_conv
    from padconv_cli.outofcore.conv_tiles import plan_conv_tiles
    from padconv_cli.outofcore.tiling import MIN_TILE_ELEMENTS

    plan = plan_conv((1, 1, 8192, 8192), (1, 1, 3, 3), None, pads=[1, 1, 1, 1])
    with pytest.raises(OutputTooLargeError, match=r"64\.0 KiB is too small.*needs at least"):
        plan_conv_tiles(plan, 4, 64 * 2**10)
    images, channels, rows, columns = plan_conv_tiles(plan, 4, 2 * 2**20)
    first_tile = [images[0][1], channels[0].m1 - channels[0].m0, rows[0][1], columns[0][1]]
    assert np.prod(first_tile) >= MIN_TILE_ELEMENTS  # all tiles but the last have this shape


def test_the_refusal_names_the_limit_needed_and_that_limit_works(run_cli, tmp_path):
    data = np.random.default_rng(3).standard_normal((1, 1, 1024, 1024)).astype(np.float32)
    np.save(tmp_path / "x.npy", data)
    np.save(tmp_path / "w.npy", np.ones((1, 1, 3, 3), np.float32))
    args = ["conv", str(tmp_path / "x.npy"), str(tmp_path / "w.npy"), "--engine", "tiled"]
    refused = run_cli(*args, "--memory-limit", "8K", "-o", str(tmp_path / "y.npy"))
    assert refused.exit_code == 2 and refused.stderr.count("\n") == 1
    needed = refused.stderr.split("give --memory-limit ")[1].split(" or more")[0]
    assert not (tmp_path / "y.npy").exists()
    number, unit = needed.split()
    limit = f"{float(number) + 0.1:.1f}{unit[0]}"
    done = run_cli(*args, "--memory-limit", limit, "-o", str(tmp_path / "y.npy"))
    assert done.exit_code == 0, done.stderr
    assert (tmp_path / "y.npy").exists()


# --- one line of progress when stderr is not a terminal -----------------------------------


def test_a_long_run_without_a_terminal_says_once_what_it_is_doing(monkeypatch, capsys):
    from padconv_cli.outofcore import progress as progress_module

    monkeypatch.setattr(progress_module, "ANNOUNCE_AFTER_SECONDS", 0.0)
    with progress_module.TileProgress(4, 4096, "line", "conv") as progress:
        for _ in range(4):
            progress.advance(1024)
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("padconv: conv: 1/4 tiles")


def test_quiet_says_nothing_and_a_terminal_gets_the_bar():
    from padconv_cli.cli.options import progress_display

    assert progress_display(quiet=True, terminal=False) is False
    assert progress_display(quiet=False, terminal=True) is True
    assert progress_display(quiet=False, terminal=True, colour=False) == "plain"
    assert progress_display(quiet=False, terminal=False) == "line"


# --- W and B come first: the budget left for tiles -------------------------------------------


def _engine_runs():
    """The tiled and the dask engine's Conv, each with a limit of ``limit`` bytes."""
    from padconv_cli.outofcore.conv_tiles import tiled_conv

    def tiled(folder, x, w, b, limit):
        np.save(folder / "x.npy", x)
        return tiled_conv(str(folder / "x.npy"), w, b, str(folder / "y.npy"), memory_limit=limit)

    def on_dask(folder, x, w, b, limit):
        da = pytest.importorskip("dask.array")
        from padconv_cli.engines.dask_ops import conv_dask

        return conv_dask(da.from_array(x), w, b, block_bytes=limit)

    return {"tiled": tiled, "dask": on_dask}


@pytest.mark.parametrize("engine", sorted(_engine_runs()))
def test_a_limit_that_does_not_hold_w_and_b_is_refused_naming_it(tmp_path, engine):
    """W (float32) held with its float32 accumulator copy, plus B: 2 * 4 * 8*8*3*3 + 4 * 8
    bytes; a limit of exactly that leaves nothing for a tile."""
    from padconv_cli.errors import OutputTooLargeError

    x = np.ones((1, 8, 16, 16), np.float32)
    w, b = np.ones((8, 8, 3, 3), np.float32), np.ones(8, np.float32)
    held = 2 * w.nbytes + b.nbytes
    with pytest.raises(OutputTooLargeError, match=f"of {held} bytes does not hold W and B "
                       f"[(]{held} bytes") as refused:
        _engine_runs()[engine](tmp_path, x, w, b, held)
    assert refused.value.param == "memory_limit"
    assert not (tmp_path / "y.npy").exists()


# The tiled engine follows Pad's shape rule when a crop is longer than its axis.


@pytest.mark.parametrize(
    "pads",
    [[0, -4, 0, 2], [0, 5, 0, -6], [-3, 0, 1, 0], [1, 0, -3, 0], [0, -1, 0, -2]],
)
def test_tiled_engine_matches_the_kernel(run_cli, tmp_path, pads):
    data = np.arange(30, dtype=np.float32).reshape(3, 10)[:, :3].copy()
    np.save(tmp_path / "x.npy", data)
    out = tmp_path / "y.npy"
    pads_text = ",".join(str(p) for p in pads)
    result = run_cli("pad", str(tmp_path / "x.npy"), f"--pads={pads_text}", "--constant-value",
                     "7", "--engine", "tiled", "--memory-limit", "64K", "--quiet", "-o",
                     str(out))
    assert result.exit_code == 0, result.stderr
    np.testing.assert_array_equal(np.load(out), pad(data, pads, np.float32(7)))
