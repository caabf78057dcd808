"""Out-of-core Pad and Conv: ``.npy`` files larger than memory, processed tile by tile with
padconv's own kernels (bit-identical to the in-memory path) under ``memory_limit`` bytes
(:func:`.pad_tiles.tiled_pad`, :func:`.conv_tiles.tiled_conv`)."""
