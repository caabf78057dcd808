"""Domain exceptions: one line naming the file, flag or attribute, the rule broken and the
values (``"input channels C=3 != W.shape[1]*group = 4*1"``); the CLI prints it and exits 2."""

from __future__ import annotations


class PadconvError(Exception):
    """A problem with the user's input, in one line.  ``param``: the parameter(s) it is about,
    rendered as the flag typed (``--pads``); ``source``: the file or text it came from."""

    def __init__(self, message: str = "", *, param: str | tuple[str, ...] | None = None,
                 source: str | None = None) -> None:
        super().__init__(message)
        self.param = param
        self.source = source


class InputError(PadconvError):
    """A tensor source cannot be read: missing, corrupt, unsafe or of an unsupported format."""


class AttributeValueError(PadconvError):
    """An operator attribute or input is outside the domain the ONNX specification allows."""


class UnsupportedDtypeError(PadconvError):
    """A tensor's element type is not accepted by the operator or the output format."""


class OutputError(PadconvError):
    """The result cannot be written where it was asked to go."""


class OutputTooLargeError(PadconvError):
    """The result would need more memory than the configured limit allows."""


class RuntimeFailure(PadconvError):
    """The work could not finish for a reason outside the input (a lost dask scheduler); the
    CLI exits with :attr:`exit_code`, writing nothing."""

    exit_code = 3
