"""``padconv --version``: padconv's version, the versions of the libraries whose results it
depends on (read from the distributions' metadata: nothing heavy is imported), and the native
instruction set that Conv runs on (the native extension is loaded to ask the CPU).
"""

from __future__ import annotations

import contextlib
import platform
import sys

NOT_INSTALLED = "not installed"
# Distributions that provide the ``onnxruntime`` module, the plain CPU build first.
ONNXRUNTIME_DISTRIBUTIONS = ("onnxruntime", "onnxruntime-gpu", "onnxruntime-openvino",
                             "onnxruntime-directml", "onnxruntime-qnn", "ort-nightly")


def distribution_version(*names: str) -> str:
    """The version of the first installed distribution among ``names``, else ``not installed``."""
    from importlib import metadata

    for name in names:
        with contextlib.suppress(metadata.PackageNotFoundError):
            return metadata.version(name)
    return NOT_INSTALLED


def padconv_version() -> str:
    """The installed distribution's version; the package's own ``__version__`` when padconv
    runs from a source tree that was never installed."""
    from padconv_cli import __version__

    found = distribution_version("padconv")
    return __version__ if found == NOT_INSTALLED else found


def native_isa_description() -> str:
    """The instruction set Conv uses (``selected_isa``) with those the CPU offers, or why the
    native core is not usable (not built, or ``PADCONV_NATIVE_ISA`` names a missing one)."""
    from padconv_cli.errors import PadconvError

    try:
        from padconv_cli.kernels.native import available_isas, selected_isa

        selected, available = selected_isa(), available_isas()
    except ImportError as error:
        return f"unavailable (the native extension cannot be imported: {error})"
    except PadconvError as error:
        return f"unavailable ({error})"
    return f"{selected} (this CPU: {', '.join(available)})"


def version_lines() -> list[str]:
    """The lines ``padconv --version`` prints: padconv, numpy, onnx, onnxruntime, the native
    instruction set, and the interpreter with its platform."""
    onnxruntime = distribution_version(*ONNXRUNTIME_DISTRIBUTIONS)
    return [
        f"padconv, version {padconv_version()}",
        f"  numpy        {distribution_version('numpy')}",
        f"  onnx         {distribution_version('onnx')}",
        f"  onnxruntime  {onnxruntime}",
        f"  native ISA   {native_isa_description()}",
        f"  python       {platform.python_version()} ({sys.platform}, {platform.machine()})",
    ]

