"""Conv dimension formulas of the ONNX specification, one small function per formula.

All sizes are per spatial axis and plain Python integers; validation of the results (an output
size below 1, for example) is the caller's job.
"""

from __future__ import annotations


def effective_kernel_size(kernel: int, dilation: int) -> int:
    """Extent of a dilated kernel: ``(kernel - 1) * dilation + 1``."""
    return (kernel - 1) * dilation + 1


def explicit_pad_output_size(
    size: int, pad_begin: int, pad_end: int, effective_kernel: int, stride: int
) -> int:
    """Output size with explicit pads: ``floor((size + pad_begin + pad_end - ek) / stride) + 1``."""
    return (size + pad_begin + pad_end - effective_kernel) // stride + 1


def same_output_size(size: int, stride: int) -> int:
    """Output size for ``SAME_UPPER``/``SAME_LOWER``: ``ceil(size / stride)``."""
    return -(-size // stride)


def same_total_pad(size: int, output_size: int, effective_kernel: int, stride: int) -> int:
    """Total padding for ``SAME_*``: ``max(0, (output_size - 1) * stride + ek - size)``."""
    return max(0, (output_size - 1) * stride + effective_kernel - size)


def split_same_pad(total_pad: int, auto_pad: str) -> tuple[int, int]:
    """Split a ``SAME_*`` total pad into ``(begin, end)``.

    The halves are equal when the total is even; an odd element goes to the end for
    ``SAME_UPPER`` and to the beginning for ``SAME_LOWER``.
    """
    small, large = total_pad // 2, total_pad - total_pad // 2
    if auto_pad == "SAME_LOWER":
        return large, small
    return small, large


def valid_output_size(size: int, effective_kernel: int, stride: int) -> int:
    """Output size for ``VALID`` (no padding): ``floor((size - ek) / stride) + 1``.

    This equals the spec's ``ceil((size - ek + 1) / stride)``.
    """
    return (size - effective_kernel) // stride + 1
