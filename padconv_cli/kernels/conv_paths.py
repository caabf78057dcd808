"""Conv's compute and working memory, kept under this name for the modules that import it: see
:mod:`padconv_cli.kernels.conv`."""

from padconv_cli.kernels.conv import (  # noqa: F401
    PANEL_BYTES,
    ROW_BYTES,
    accumulator_dtype,
    convolve,
    working_bytes,
)
