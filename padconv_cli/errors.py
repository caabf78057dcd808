"""Domain exceptions.

Every error the library raises on bad input is a :class:`PadconvError` whose message is one
line naming the file, flag or attribute and the rule that was broken, with the values involved
(``"input channels C=3 != W.shape[1]*group = 4*1"``).  The CLI prints that line and exits 2.
"""

from __future__ import annotations


class PadconvError(Exception):
    """Base class: a problem with the user's input that padconv can describe in one line.

    ``param`` names the library parameter the problem is about (``"pads"``, ``"memory_limit"``,
    ``"X"``; a tuple when the message names several), ``source`` the file or text it came
    from, when known.  The library words its
    messages in parameter names; the CLI renders ``param`` as the flag or argument the user
    typed (``--pads``) and adds ``source`` where the message does not already name it.
    """

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
    """The work could not finish for a reason outside the input: the dask scheduler went
    away, a worker died or ran out of memory.  The CLI prints one line saying what to change
    and exits with :attr:`exit_code` (3), writing nothing."""

    exit_code = 3
