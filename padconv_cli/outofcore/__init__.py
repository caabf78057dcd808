"""Out-of-core Pad and Conv: ``.npy`` files larger than memory, processed tile by tile.

Inputs are memory-mapped and read one tile window at a time; the result is written through a
memory-mapped ``.npy`` (``numpy.lib.format.open_memmap``) and renamed over the target at the
end.  Each tile is computed by padconv's own kernels, so results are bit-identical to the
in-memory path, while the working memory stays under ``memory_limit`` bytes (on top of the
interpreter itself).

    from padconv_cli.outofcore import tiled_pad, tiled_conv
"""

from __future__ import annotations

from padconv_cli.outofcore.tiled_conv import tiled_conv
from padconv_cli.outofcore.tiled_pad import tiled_pad

__all__ = ["tiled_conv", "tiled_pad"]
