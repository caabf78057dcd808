"""The rulings padconv applies where the ONNX text on the convolution family is ambiguous.

Each ruling has a short name, which the plans carry (``plan.rulings``) so that ``--explain``
can name the rule a call used, and a one-line statement here; docs/semantics-family.md gives
the reason and which runtimes agree.
"""

from __future__ import annotations

RULINGS: dict[str, str] = {
    "same-target-in-times-stride": (
        "ConvTranspose SAME_UPPER/SAME_LOWER: the output is in*stride per axis (the operator "
        "text); output_padding enters the total padding, it does not lengthen the output"),
    "floor-division-split": (
        "ConvTranspose pads derived from output_shape or SAME: the total padding is split with "
        "floor division (SAME_UPPER begin = total//2, otherwise begin = total - total//2)"),
    "negative-padding-extends": (
        "ConvTranspose: a negative derived pad extends the output past the un-cropped result; "
        "the extra elements hold the bias only (zero without a bias)"),
    "output-shape-overrides-pads": (
        "ConvTranspose: with output_shape given, pads are ignored and derived from it (the "
        "operator text)"),
    "output-padding-below-stride-or-dilation": (
        "ConvTranspose: output_padding[i] must be below max(stride[i], dilation[i]); a value "
        "at or above the stride but below the dilation is accepted"),
    "integer-padding-is-zero-point": (
        "ConvInteger/QLinearConv: padded positions hold x_zero_point, so a padded tap adds "
        "nothing to the sum"),
    "conv-integer-int32-wraps": (
        "ConvInteger: the int32 accumulation wraps modulo 2**32 ('may overflow if and only "
        "if in 32 bits'); padconv computes the exact sum and reduces it modulo 2**32"),
    "qlinear-exact-accumulation": (
        "QLinearConv: the sum of products plus the int32 bias is exact (no 32-bit wrap) before "
        "it is requantized"),
    "qlinear-exactly-rounded": (
        "QLinearConv: y = saturate(round_half_to_even(acc * x_scale * w_scale[m] / y_scale) "
        "+ y_zero_point), the real-number product rounded once, with no float32 rounding of "
        "the multiplier or the product"),
}


def ruling_text(name: str) -> str:
    """The one-line statement of the ruling ``name``."""
    return RULINGS[name]
