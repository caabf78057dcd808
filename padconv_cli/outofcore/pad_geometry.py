"""Which input window, which pads and which crop give one output tile of ONNX Pad.

Coordinates.  For an axis, let ``n`` be its length after the negative pads were applied (the
*cropped* input), ``b``/``e`` its non-negative pads, and ``v = o - b`` the *virtual* input
index of output index ``o``.  The output consists of three regions along the axis:

* begin pad ``v in [-b, 0)``, interior ``v in [0, n)``, end pad ``v in [n, n + e)``.

An output tile's range ``[v0, v1)`` is split at ``0`` and ``n``, and each non-empty part is an
:class:`AxisPiece`: running padconv's Pad kernel on the cropped input's ``window`` with
``pads = (before, after)`` and keeping ``[crop, crop + length)`` of the result gives exactly the
part's values.  The window per region and mode:

================  ======================================  =======================================
region            window, pads                            why
================  ======================================  =======================================
interior          ``[v0, v1)``, ``(0, 0)``                a plain copy
begin, constant   ``[0, 0)``, ``(v1 - v0, 0)``            only the constant (n may be 0)
begin, edge       ``[0, 1)``, ``(v1 - v0 - 1, 0)``        every value is ``x[0]``
begin, reflect    ``[0, -v0 + 1)``, ``(-v0, 0)``          mirror about ``x[0]`` (``-v0 <= n-1``)
begin, wrap       ``[n + v0, n + v1)``, ``(0, 0)``        ``x[v + n]`` (``-v0 <= n``)
end, constant     ``[n, n)``, ``(0, v1 - v0)``
end, edge         ``[n - 1, n)``, ``(0, v1 - v0 - 1)``
end, reflect      ``[2n - 1 - v1, n)``, ``(0, v1 - n)``   mirror about ``x[n-1]`` (``v1-n <= n-1``)
end, wrap         ``[v0 - n, v1 - n)``, ``(0, 0)``        ``x[v - n]`` (``v1 - n <= n``)
================  ======================================  =======================================

When a reflect or wrap pad is longer than one period, the window is the whole axis and the
pad reaches out to the part; the kernel's periodic rule then gives the same values as for the
whole tensor, since each value depends only on its position.  The windows of several axes
combine as a Cartesian product (Pad is separable: each output index maps to a source index
per axis independently).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from padconv_cli.kernels.pad import AxisPad, PadPlan


@dataclass(frozen=True)
class AxisPiece:
    """One region of a tile along one axis (see the module table).

    ``out_start`` is relative to the tile; ``window`` is in cropped-input coordinates;
    the kernel's result along the axis has ``window length + before + after`` elements of
    which ``[crop, crop + length)`` are kept.
    """

    out_start: int
    length: int
    window: tuple[int, int]
    before: int
    after: int
    crop: int

    @property
    def kernel_length(self) -> int:
        """Length of the kernel's result along the axis: ``window + before + after``."""
        return self.window[1] - self.window[0] + self.before + self.after


@dataclass(frozen=True)
class TilePiece:
    """One kernel call of a tile: per-axis pieces combined."""

    axes: tuple[AxisPiece, ...]

    def window_box(self, crop_begins: tuple[int, ...]) -> tuple[slice, ...]:
        """Slices of the *original* input (before cropping) the kernel reads."""
        return tuple(
            slice(p.window[0] + c, p.window[1] + c)
            for p, c in zip(self.axes, crop_begins, strict=True)
        )

    @property
    def kernel_pads(self) -> list[int]:
        """ONNX pads for the kernel call: ``[before_1..before_r, after_1..after_r]``."""
        return [p.before for p in self.axes] + [p.after for p in self.axes]

    @property
    def crop_box(self) -> tuple[slice, ...]:
        """Slices of the kernel's result that belong to the tile."""
        return tuple(slice(p.crop, p.crop + p.length) for p in self.axes)

    @property
    def out_box(self) -> tuple[slice, ...]:
        """Where the piece goes, relative to the tile's origin."""
        return tuple(slice(p.out_start, p.out_start + p.length) for p in self.axes)


def region_bounds(v0: int, v1: int, n: int) -> list[tuple[int, int]]:
    """Split the virtual range ``[v0, v1)`` at ``0`` and ``n`` into its non-empty parts."""
    cuts = sorted({v0, v1, *(c for c in (0, n) if v0 < c < v1)})
    return list(itertools.pairwise(cuts))


def _interior(a: int, c: int, n: int) -> tuple[tuple[int, int], int, int, int]:
    return (a, c), 0, 0, 0


def _begin(a: int, c: int, n: int, mode: str) -> tuple[tuple[int, int], int, int, int]:
    """Window, before, after, crop for a part ``[a, c)`` with ``c <= 0`` (module table)."""
    if mode == "constant":
        return (0, 0), c - a, 0, 0
    if mode == "edge":
        return (0, 1), c - a - 1, 0, 0
    if mode == "reflect" and n > 1 and -a <= n - 1:
        return (0, -a + 1), -a, 0, 0
    if mode == "wrap" and -a <= n:
        return (a + n, c + n), 0, 0, 0
    return (0, n), -a, 0, 0  # a pad longer than one period: the whole axis


def _end(a: int, c: int, n: int, mode: str) -> tuple[tuple[int, int], int, int, int]:
    """Window, before, after, crop for a part ``[a, c)`` with ``a >= n`` (module table)."""
    if mode == "constant":
        return (n, n), 0, c - a, 0
    if mode == "edge":
        return (n - 1, n), 0, c - a - 1, 0
    reach = c - n
    if mode == "reflect" and n > 1 and reach <= n - 1:
        first = n - 1 - reach
        return (first, n), 0, reach, a - first
    if mode == "wrap" and reach <= n:
        return (a - n, c - n), 0, 0, 0
    return (0, n), 0, reach, a  # a pad longer than one period: the whole axis


def axis_pieces(t0: int, t1: int, axis: AxisPad, mode: str) -> list[AxisPiece]:
    """The pieces of output range ``[t0, t1)`` along one axis (module docstring)."""
    b, n = axis.pad_begin, axis.cropped_dim
    pieces = []
    for a, c in region_bounds(t0 - b, t1 - b, n):
        if c <= 0 and a < 0:
            window, before, after, crop = _begin(a, c, n, mode)
        elif a >= n and c > n:
            window, before, after, crop = _end(a, c, n, mode)
        else:
            window, before, after, crop = _interior(a, c, n)
        pieces.append(AxisPiece(a + b - t0, c - a, window, before, after, crop))
    return pieces


def tile_pieces(tile: tuple[tuple[int, int], ...], plan: PadPlan) -> list[TilePiece]:
    """Every kernel call that makes up the output tile ``tile`` (one range per axis)."""
    per_axis = [
        axis_pieces(t0, t1, axis, plan.mode)
        for (t0, t1), axis in zip(tile, plan.per_axis, strict=True)
    ]
    return [TilePiece(tuple(combo)) for combo in itertools.product(*per_axis)]


def crop_begins(plan: PadPlan) -> tuple[int, ...]:
    """Offset of the cropped input inside the original one, per axis."""
    return tuple(axis.crop_begin for axis in plan.per_axis)


def axis_extremes(length: int, tile: int, axis: AxisPad, mode: str) -> tuple[int, int]:
    """Largest total window and largest kernel result along an axis split in tiles of
    ``tile``: the total window of a tile is the sum of its pieces' window lengths (what the
    tile reads; a wrap tile reads both ends of the axis but not what lies between them).

    Used to bound a tile's memory before choosing the tile shape.
    """
    window_max = kernel_max = 0
    for t0 in range(0, length, tile):
        pieces = axis_pieces(t0, min(t0 + tile, length), axis, mode)
        window_max = max(window_max, sum(p.window[1] - p.window[0] for p in pieces))
        kernel_max = max(kernel_max, max(p.kernel_length for p in pieces))
    return window_max, kernel_max
