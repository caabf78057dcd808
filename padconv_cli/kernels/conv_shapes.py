"""Conv's dimension formulas, kept under this name for the modules that import it: see
:mod:`padconv_cli.kernels.conv`."""

from padconv_cli.kernels.conv import (  # noqa: F401
    effective_kernel_size,
    explicit_pad_output_size,
    same_output_size,
    same_total_pad,
    split_same_pad,
    valid_output_size,
)
