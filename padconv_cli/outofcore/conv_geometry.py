"""Which part of X, which pads and which channels give one output tile of ONNX Conv.

Spatial axes.  Output index ``o`` reads the zero-padded input at ``o*s + k*d`` for
``k in [0, K)``, that is input positions ``o*s - p_begin + k*d``.  An output range ``[o0, o1)``
therefore reads input positions ``[o0*s - p_begin, (o1-1)*s - p_begin + (K-1)*d + 1)``: the
tile's stretch of strides plus the *halo* ``(K - 1) * d``.  The part of that range inside
``[0, n)`` is read from X; the parts outside become the tile's own explicit pads, so the kernel
run on the window with those pads, stride and dilation yields exactly ``o1 - o0`` outputs,
the same values the whole tensor would give there.

Channels.  With ``G`` groups, output channel ``m`` belongs to group ``m // (M/G)`` and reads
input channels ``[g*C/G, (g+1)*C/G)``.  A channel tile is either a run of whole groups (the
kernel runs with that many groups on their input channels) or a part of a single group (the
kernel runs with ``group = 1`` on that group's input channels).
"""

from __future__ import annotations

from dataclasses import dataclass

from padconv_cli.kernels.conv_shapes import effective_kernel_size


@dataclass(frozen=True)
class SpatialWindow:
    """The input stretch one output range reads along one spatial axis.

    ``start``/``stop`` are the unclipped input positions (may lie in the padding);
    ``window`` is their part inside ``[0, n)``; ``before``/``after`` the explicit pads.
    """

    start: int
    stop: int
    window: tuple[int, int]
    before: int
    after: int

    @property
    def all_padding(self) -> bool:
        """True when the output range reads nothing but padding."""
        return self.window[0] >= self.window[1]


def input_span(
    o0: int, o1: int, stride: int, dilation: int, kernel: int, pad_begin: int
) -> tuple[int, int]:
    """Input positions read by outputs ``[o0, o1)``:
    ``[o0*s - p, (o1-1)*s - p + (k-1)*d + 1)``."""
    start = o0 * stride - pad_begin
    stop = (o1 - 1) * stride - pad_begin + effective_kernel_size(kernel, dilation)
    return start, stop


def clip_span(start: int, stop: int, n: int) -> SpatialWindow:
    """Split an input span into its part inside ``[0, n)`` and the pads outside it."""
    first = min(max(start, 0), n)
    last = max(min(stop, n), first)
    if first >= last:  # all padding: no data to read, the zeros are supplied by the caller
        return SpatialWindow(start, stop, (first, first), 0, 0)
    return SpatialWindow(start, stop, (first, last), first - start, stop - last)


def spatial_window(
    o0: int, o1: int, n: int, stride: int, dilation: int, kernel: int, pad_begin: int
) -> SpatialWindow:
    """:func:`input_span` clipped to the axis by :func:`clip_span`."""
    return clip_span(*input_span(o0, o1, stride, dilation, kernel, pad_begin), n)


def span_length(tile: int, stride: int, dilation: int, kernel: int) -> int:
    """Input positions read by ``tile`` consecutive outputs: ``(tile-1)*s + (k-1)*d + 1``."""
    return (tile - 1) * stride + effective_kernel_size(kernel, dilation)


@dataclass(frozen=True)
class ChannelTile:
    """Output channels ``[m0, m1)``, the input channels ``[c0, c1)`` they read, and the group
    count the kernel runs with."""

    m0: int
    m1: int
    c0: int
    c1: int
    group: int


def channel_tiles(out_channels: int, in_channels: int, group: int, tile: int) -> list[ChannelTile]:
    """Split the output channels into tiles of at most ``tile`` channels that never straddle
    a group boundary partially (module docstring)."""
    per_group_out = out_channels // group
    per_group_in = in_channels // group
    if per_group_out == 0:  # M = 0: an empty output, nothing to compute
        return []
    if tile >= per_group_out:
        groups_per_tile = max(1, tile // per_group_out)
        return [
            ChannelTile(
                g * per_group_out,
                min(g + groups_per_tile, group) * per_group_out,
                g * per_group_in,
                min(g + groups_per_tile, group) * per_group_in,
                min(g + groups_per_tile, group) - g,
            )
            for g in range(0, group, groups_per_tile)
        ]
    return [
        ChannelTile(
            g * per_group_out + j,
            g * per_group_out + min(j + tile, per_group_out),
            g * per_group_in,
            (g + 1) * per_group_in,
            1,
        )
        for g in range(group)
        for j in range(0, per_group_out, tile)
    ]


def tile_in_channels(out_channels: int, in_channels: int, group: int, tile: int) -> int:
    """Input channels a channel tile of ``tile`` output channels reads (for memory bounds)."""
    return max((c.c1 - c.c0 for c in channel_tiles(out_channels, in_channels, group, tile)),
               default=0)
