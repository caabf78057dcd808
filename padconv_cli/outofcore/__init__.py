"""Out-of-core Pad and Conv: ``.npy`` files larger than memory, processed tile by tile.

Inputs are read one tile window at a time with ``pread``; the result is written tile by tile
with ``pwrite`` into a temporary ``.npy`` and renamed over the target at the end
(:mod:`padconv_cli.outofcore.npy_blocks`).  Each tile is computed by padconv's own kernels,
so results are bit-identical to the in-memory path, while the working memory stays under
``memory_limit`` bytes (on top of the interpreter itself).

    from padconv_cli.outofcore import tiled_pad, tiled_conv
"""

from __future__ import annotations

from typing import Any

__all__ = ["tiled_conv", "tiled_pad"]
_MODULES = {"tiled_conv": "conv_tiles", "tiled_pad": "pad_tiles"}


def __getattr__(name: str) -> Any:
    """Import the tiled kernels on first use: the CLI's start-up does not pay for them."""
    if name in __all__:
        import importlib

        module = _MODULES[name]
        return getattr(importlib.import_module(f"padconv_cli.outofcore.{module}"), name)
    raise AttributeError(f"module 'padconv_cli.outofcore' has no attribute {name!r}")
