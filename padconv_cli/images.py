"""PNG pictures of tensors (``show --png``) and of where two tensors differ (``compare --png``).

Rules:

* A tensor's picture: leading axes of length 1 are dropped; a 1-D tensor is one row; a 2-D
  tensor is the image; for more axes the last two are each tile's rows and columns and the
  others are flattened into tiles (channels, kernels) laid out in a grid of
  ``ceil(sqrt(n))`` columns, 1 pixel apart, at most :data:`MAX_TILES`.
* Finite values map linearly from ``[min, max]`` of the shown values to grey 0..255 (a
  constant tensor is mid-grey); NaN is red, +Inf yellow, -Inf blue; complex by ``|x|``.
* The difference heatmap is ``|B - A|`` (0 where both are NaN or the same infinity, the largest
  difference where only one is NaN), scaled by its maximum: black (equal) through red to
  yellow (the largest difference).
* Small pictures are enlarged by a whole factor (nearest neighbour) so that the longer side is
  at least :data:`MIN_SIDE` pixels.

The imaging library is Pillow, an optional extra: ``pip install 'padconv[png]'``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from padconv_cli.errors import InputError, UnsupportedDtypeError
from padconv_cli.tensorio.files import atomic_write

MAX_TILES = 256
MIN_SIDE = 256
NAN_RGB, POSINF_RGB, NEGINF_RGB, GAP_RGB = (255, 0, 0), (255, 255, 0), (0, 0, 255), (40, 40, 40)


def _as_real(array: np.ndarray, param: str) -> np.ndarray:
    """float64 values of a numeric tensor (``|x|`` for complex)."""
    array = np.asarray(array)
    if array.dtype.kind == "c":
        return np.abs(array.astype(np.complex128))
    try:
        return array.astype(np.float64)
    except (TypeError, ValueError):
        raise UnsupportedDtypeError(f"{array.dtype} values cannot be drawn (numbers only)",
                                    param=param) from None


def tiles_of(array: np.ndarray) -> np.ndarray:
    """The tensor as ``(n, rows, columns)`` by the module rule; an empty one is refused."""
    if array.size == 0:
        raise InputError(f"a tensor of shape {list(array.shape)} has no values to draw",
                         param="png")
    shape = list(array.shape)
    while len(shape) > 2 and shape[0] == 1:
        shape.pop(0)
    squeezed = array.reshape(shape if len(shape) > 1 else (1, -1))  # one row: 0-D and 1-D
    return squeezed.reshape(-1, *squeezed.shape[-2:])


def _grid(tiles: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(values, inside mask) of the tiles laid out in a grid with 1-pixel gaps."""
    count, rows, columns = tiles.shape
    across = math.ceil(math.sqrt(count))
    down = math.ceil(count / across)
    values = np.zeros((down * (rows + 1) - 1, across * (columns + 1) - 1))
    inside = np.zeros(values.shape, bool)
    for index in range(count):
        top, left = (index // across) * (rows + 1), (index % across) * (columns + 1)
        values[top : top + rows, left : left + columns] = tiles[index]
        inside[top : top + rows, left : left + columns] = True
    return values, inside


def _grey(values: np.ndarray, inside: np.ndarray) -> np.ndarray:
    """RGB pixels of values by the module rule (grey ramp, NaN/Inf colours, gaps dark)."""
    finite = np.isfinite(values) & inside
    pixels = np.zeros((*values.shape, 3), np.uint8)
    if finite.any():
        low, high = values[finite].min(), values[finite].max()
        safe = np.where(finite, values, low)  # NaN and infinities get their own colours
        scaled = np.full(values.shape, 0.5) if high == low else (safe - low) / (high - low)
        grey = np.clip(np.round(scaled * 255), 0, 255).astype(np.uint8)
        pixels[finite] = grey[finite, None]
    for mask, colour in ((np.isnan(values), NAN_RGB), (values == np.inf, POSINF_RGB),
                         (values == -np.inf, NEGINF_RGB)):
        pixels[mask & inside] = colour
    pixels[~inside] = GAP_RGB
    return pixels


def _heat(values: np.ndarray, inside: np.ndarray) -> np.ndarray:
    """RGB pixels of non-negative differences: black, red, yellow by size."""
    pixels = np.zeros((*values.shape, 3), np.uint8)
    largest = values[inside].max() if inside.any() else 0.0
    level = values / largest if largest > 0 else np.zeros_like(values)
    pixels[..., 0] = np.round(np.clip(2 * level, 0, 1) * 255)
    pixels[..., 1] = np.round(np.clip(2 * level - 1, 0, 1) * 255)
    pixels[~inside] = GAP_RGB
    return pixels


def _drawn(tiles: np.ndarray, paint: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> np.ndarray:
    """The tiles' grid painted by ``paint``, enlarged (module rules); at most MAX_TILES."""
    if tiles.shape[0] > MAX_TILES:
        raise InputError(f"{tiles.shape[0]} tiles of {tiles.shape[1:]} are too many to draw "
                         f"(at most {MAX_TILES}); pick a part of the tensor first")
    pixels = paint(*_grid(tiles))
    factor = max(1, min(16, MIN_SIDE // max(pixels.shape[:2])))
    return pixels.repeat(factor, axis=0).repeat(factor, axis=1)


def tensor_picture(array: np.ndarray) -> np.ndarray:
    """RGB pixels (uint8, rows x columns x 3) of a tensor by the module rules."""
    return _drawn(tiles_of(_as_real(array, "X")), _grey)


def difference_values(expected: np.ndarray, actual: np.ndarray) -> np.ndarray:
    """``|B - A|`` by the module rule (NaN-aware)."""
    a, b = _as_real(expected, "A"), _as_real(actual, "B")
    with np.errstate(invalid="ignore"):
        diff = np.abs(b - a)
    same = (a == b) | (np.isnan(a) & np.isnan(b))
    diff[same] = 0.0
    finite = np.isfinite(diff)
    top = diff[finite].max() if finite.any() else 1.0
    diff[~finite] = top if top > 0 else 1.0
    return diff


def difference_picture(expected: np.ndarray, actual: np.ndarray) -> np.ndarray:
    """RGB heatmap of where and how much ``actual`` differs from ``expected``."""
    if np.shape(expected) != np.shape(actual):
        raise InputError(f"png: shapes differ ({np.shape(expected)} and {np.shape(actual)}); "
                         "a heatmap needs equal shapes", param="png")
    return _drawn(tiles_of(difference_values(expected, actual)), _heat)


def write_png(pixels: np.ndarray, path: str) -> None:
    """Write RGB pixels to ``path`` as PNG, atomically (Pillow: the ``png`` extra)."""
    try:
        from PIL import Image
    except ImportError:
        raise InputError("png needs Pillow: pip install 'padconv[png]'", param="png") from None
    image: Any = Image.fromarray(np.ascontiguousarray(pixels, dtype=np.uint8))
    atomic_write(path, lambda stream: image.save(stream, format="PNG"))
