"""Pad's ``--constant-value`` text read as a typed element, under its former path
(:func:`padconv_cli.kernels.pad.constant_from_text`)."""

from padconv_cli.kernels.pad import constant_from_text, typed_attributes

__all__ = ["constant_from_text", "typed_attributes"]
