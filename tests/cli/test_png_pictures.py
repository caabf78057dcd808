"""``show --png`` draws a tensor (a 2-D slice or a grid of channels) and ``compare --png`` a
heatmap of |B - A|; the pictures are read back and checked pixel by pixel."""

from __future__ import annotations

import io

import numpy as np
import pytest

from padconv_cli import images

Image = pytest.importorskip("PIL.Image", reason="Pillow is the padconv[png] extra")


def read_back(path) -> np.ndarray:
    with Image.open(path) as picture:
        assert picture.format == "PNG" and picture.mode == "RGB"
        return np.asarray(picture)


def test_a_2d_tensor_is_a_grey_ramp_with_nan_and_inf_colours(run_cli, tmp_path):
    source = tmp_path / "x.npy"
    np.save(source, np.array([[0.0, 1.0, 2.0], [np.nan, np.inf, -np.inf]], np.float32))
    assert run_cli("show", str(source), "--png", str(tmp_path / "x.png")).exit_code == 0
    pixels = read_back(tmp_path / "x.png")
    factor = pixels.shape[1] // 3
    assert pixels.shape == (2 * factor, 3 * factor, 3)
    cell = pixels[::factor, ::factor]  # one pixel per element
    assert cell[0].tolist() == [[0, 0, 0], [128, 128, 128], [255, 255, 255]]
    assert cell[1].tolist() == [list(images.NAN_RGB), list(images.POSINF_RGB),
                                list(images.NEGINF_RGB)]


def test_channels_become_a_grid_of_tiles(run_cli, tmp_path):
    source = tmp_path / "fmap.npy"
    fmap = np.zeros((1, 5, 4, 6), np.float32)
    fmap[0, 4] = 1.0  # the fifth channel is bright, the others dark
    np.save(source, fmap)
    assert run_cli("show", str(source), "--png", str(tmp_path / "f.png")).exit_code == 0
    pixels = read_back(tmp_path / "f.png")
    # 5 tiles of 4x6 in 3 columns and 2 rows, 1-pixel gaps: 9 x 20 before enlarging
    factor = pixels.shape[0] // 9
    assert pixels.shape[:2] == (9 * factor, 20 * factor)
    grid = pixels[::factor, ::factor, 0]
    tile = lambda k: grid[(k // 3) * 5 : (k // 3) * 5 + 4, (k % 3) * 7 : (k % 3) * 7 + 6]  # noqa: E731
    assert (tile(4) == 255).all()
    assert all((tile(k) == 0).all() for k in range(4))
    assert grid[4, 0] == images.GAP_RGB[0]  # the gap row between the tile rows


def test_compare_heatmap_marks_where_and_how_much(run_cli, tmp_path):
    a = np.zeros((4, 4), np.float32)
    b = a.copy()
    b[1, 2], b[3, 0] = 1.0, 0.25
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    result = run_cli("compare", str(tmp_path / "a.npy"), str(tmp_path / "b.npy"),
                     "--png", str(tmp_path / "d.png"))
    assert result.exit_code == 1  # they differ; the picture is written anyway
    pixels = read_back(tmp_path / "d.png")
    factor = pixels.shape[0] // 4
    cell = pixels[::factor, ::factor]
    assert cell[1, 2].tolist() == [255, 255, 0]  # the largest difference: yellow
    assert cell[3, 0].tolist() == [128, 0, 0]  # a quarter of it: dark red
    others = np.ones((4, 4), bool)
    others[1, 2] = others[3, 0] = False
    assert (cell[others] == 0).all()  # equal elements are black


def test_a_tensor_from_stdin_is_drawn_from_the_one_read(run_cli, tmp_path):
    buffer = io.BytesIO()
    np.save(buffer, np.array([[0.0, 1.0]], np.float32))
    result = run_cli("show", "-", "--png", str(tmp_path / "x.png"), input=buffer.getvalue())
    assert result.exit_code == 0, result.stderr
    assert read_back(tmp_path / "x.png")[0, 0].tolist() == [0, 0, 0]


def test_png_of_several_tensors_is_refused(run_cli, tmp_path):
    result = run_cli("show", "[1.0]", "[2.0]", "--png", str(tmp_path / "x.png"))
    assert result.exit_code == 2 and "--png draws one tensor" in result.stderr
    assert not (tmp_path / "x.png").exists()


@pytest.mark.parametrize(("command", "tensors"), [("show", ["[]"]), ("compare", ["[]", "[]"])])
def test_an_empty_tensor_is_refused_in_one_line(run_cli, tmp_path, command, tensors):
    result = run_cli(command, *tensors, "--png", str(tmp_path / "x.png"))
    assert result.exit_code == 2 and "has no values to draw" in result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "x.png").exists()


def test_without_pillow_the_error_names_the_extra(run_cli, tmp_path, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def without_pil(name, *args, **kwargs):
        if name == "PIL" or name.startswith("PIL."):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", without_pil)
    result = run_cli("show", "[1.0, 2.0]", "--png", str(tmp_path / "x.png"))
    assert result.exit_code == 2
    assert "pip install 'padconv[png]'" in result.stderr
