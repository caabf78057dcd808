"""Conv's dimension formulas, kept under this name for the modules that import it: see
:mod:`padconv_cli.kernels.conv`."""

from padconv_cli.kernels.conv import effective_kernel_size, explicit_pad_output_size  # noqa: F401
