"""Conv's plan, kept under this name for the modules that import it: see
:mod:`padconv_cli.kernels.conv`."""

from padconv_cli.kernels.conv import (  # noqa: F401
    AUTO_PAD_VALUES,
    ConvPlan,
    explicit_pads,
    group_attribute,
    input_shape,
    int_list,
    is_int,
    plan_conv,
    positive_list,
)
