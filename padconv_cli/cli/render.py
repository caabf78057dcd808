"""Pretty-printing of tensors on a terminal with rich: a header line, then the values."""

from __future__ import annotations

import numpy as np

PREVIEW_THRESHOLD = 1000
EDGE_ITEMS = 3


def tensor_header(array: np.ndarray, name: str | None = None) -> str:
    """``name: dtype[d0, d1, ...] (size elements)``, the dtype spelled as ONNX spells it."""
    from padconv_cli.dtypes import dtype_name

    shape = ", ".join(str(d) for d in array.shape)
    prefix = f"{name}: " if name else ""
    return f"{prefix}{dtype_name(array.dtype)}[{shape}] ({array.size} elements)"


def format_values(array: np.ndarray, width: int = 80) -> str:
    """numpy's own text form in lines of at most ``width`` characters, elided with ``...``
    past PREVIEW_THRESHOLD elements."""
    return np.array2string(
        array, threshold=PREVIEW_THRESHOLD, edgeitems=EDGE_ITEMS, max_line_width=width
    )


def print_tensor(array: np.ndarray, name: str | None = None) -> None:
    """Show a tensor on the terminal: the header in bold, then the (possibly elided) values."""
    from rich.text import Text

    from padconv_cli.cli.style import output_width, rich_console

    console = rich_console()
    console.print(Text(tensor_header(array, name), style="bold"))
    console.print(Text(format_values(array, output_width())))
