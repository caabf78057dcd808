"""Pad's element types and constant value, under their former path (:mod:`.pad`)."""

from padconv_cli.kernels.pad import coerce_constant_value, float_range, pad_element_kind

__all__ = ["coerce_constant_value", "float_range", "pad_element_kind"]
