"""padconv: the ONNX Pad and Conv operators applied to tensors in files.

Public API (numpy in, numpy out)::

    from padconv_cli import pad, conv, read_tensor, write_tensor
    from padconv_cli import conv_transpose, conv_integer, qlinear_conv

The names load on first use (start-up time).
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (start-up time)

__version__ = "0.1.0"

_EXPORTS = {
    "pad": "padconv_cli.kernels.pad",
    "conv": "padconv_cli.kernels.conv",
    "conv_transpose": "padconv_cli.kernels.conv_transpose",
    "conv_integer": "padconv_cli.kernels.integer_conv",
    "qlinear_conv": "padconv_cli.kernels.integer_conv",
    "read_tensor": "padconv_cli.tensor_sources",
    "write_tensor": "padconv_cli.tensorio",
    "PadconvError": "padconv_cli.errors",
}

__all__ = ["PadconvError", "__version__", "conv", "conv_integer", "conv_transpose", "pad",
           "qlinear_conv", "read_tensor", "write_tensor"]

if TYPE_CHECKING:  # pragma: no cover
    from padconv_cli.errors import PadconvError
    from padconv_cli.kernels.conv import conv
    from padconv_cli.kernels.conv_transpose import conv_transpose
    from padconv_cli.kernels.integer_conv import conv_integer, qlinear_conv
    from padconv_cli.kernels.pad import pad
    from padconv_cli.tensor_sources import read_tensor
    from padconv_cli.tensorio import write_tensor


def __getattr__(name: str) -> object:
    """The public name ``name``, imported from its module on first use."""
    module_name = _EXPORTS.get(name)
    if module_name is None:
        raise AttributeError(f"module 'padconv_cli' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module_name), name)
    globals()[name] = value
    return value
