"""ConvTranspose dimension formulas of the ONNX specification, one small function per formula.

All sizes are per spatial axis and plain Python integers. Divisions by two are floor divisions
(Python ``//``), the reading ONNX's own conformance case ``test_convtranspose_output_shape``
implies when a total padding is negative (docs/semantics-family.md, ruling
``negative-total-padding-floor``). Validation of the results is the caller's job.
"""

from __future__ import annotations


def full_output_size(size: int, stride: int, effective_kernel: int) -> int:
    """Un-cropped output length: ``stride * (size - 1) + ek``, with ``ek = (k - 1) * d + 1``."""
    return stride * (size - 1) + effective_kernel


def explicit_pad_output_size(size: int, stride: int, effective_kernel: int,
                             output_padding: int, pad_begin: int, pad_end: int) -> int:
    """Output length from pads: ``stride * (size - 1) + output_padding + ek - pad_begin -
    pad_end``."""
    return full_output_size(size, stride, effective_kernel) + output_padding - pad_begin - pad_end


def same_output_size(size: int, stride: int) -> int:
    """Output length for ``SAME_UPPER``/``SAME_LOWER``: ``size * stride``."""
    return size * stride


def total_padding(size: int, stride: int, effective_kernel: int, output_padding: int,
                  output_size: int) -> int:
    """Padding that yields ``output_size``: ``stride * (size - 1) + output_padding + ek -
    output_size`` (negative when the output is longer than the padded-out full output)."""
    return full_output_size(size, stride, effective_kernel) + output_padding - output_size


def split_total_padding(total: int, auto_pad: str) -> tuple[int, int]:
    """``(begin, end)`` of a total padding: ``SAME_UPPER`` gives ``begin = total // 2``, every
    other ``auto_pad`` ``begin = total - total // 2``; ``end = total - begin`` (floor
    division, also for a negative total)."""
    half = total // 2
    if auto_pad == "SAME_UPPER":
        return half, total - half
    return total - half, half
