"""Out-of-core Pad and Conv: ``.npy`` files larger than memory, processed tile by tile with
padconv's own kernels (bit-identical to the in-memory path) under ``memory_limit`` bytes.

    from padconv_cli.outofcore import tiled_pad, tiled_conv
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    """Import the tiled engines on first use: the CLI's start-up does not pay for them."""
    if name == "tiled_pad":
        from padconv_cli.outofcore.pad_tiles import tiled_pad

        return tiled_pad
    if name == "tiled_conv":
        from padconv_cli.outofcore.conv_tiles import tiled_conv

        return tiled_conv
    raise AttributeError(f"module 'padconv_cli.outofcore' has no attribute {name!r}")
