"""Telling what a tensor source string names: stdin, a file (which format), or a literal.

Rules, in order:

1. ``-`` is stdin; ``-:NAME`` is member NAME of an ``.npz`` archive on stdin.
2. A string naming an existing path is a file.
3. ``ARCHIVE.npz:NAME`` names the array NAME inside ``ARCHIVE.npz``; ``MODEL.onnx:NAME``
   (kind ``model``) names a tensor the model stores (an initializer, a ``Constant`` output
   or a value folded from those).  NAME may hold ``:`` and ``/``: the model path ends at the
   first ``.onnx:`` whose prefix is an existing file (else at the first ``.onnx:``).
4. A string ending in ``.npy``, ``.npz`` or ``.pb``, or starting with ``/``, ``./``, ``../`` or
   ``~``, is a file (missing -> "no such file").
5. A string that starts like a literal (``[``, digit, sign, ``.``, quote, true/false/nan/inf)
   is an inline literal.
6. Anything else is taken as a file name, which then does not exist.
"""

from __future__ import annotations

import os
import re
from typing import NamedTuple

from padconv_cli.tensorio.literal import looks_like_literal

TENSOR_SUFFIXES = {".npy": "npy", ".npz": "npz", ".pb": "pb"}
_PATH_STARTS = ("/", "./", "../", "~", ".\\", "..\\")
_MODEL_MARK = re.compile(r"\.onnx:", re.IGNORECASE)
_MEMBER_PATTERN = re.compile(r"(?P<archive>.+\.npz):(?P<member>[^/\\]+)", re.IGNORECASE)


class Source(NamedTuple):
    """A classified source: kind is 'stdin', 'file', 'model' or 'literal'."""

    kind: str
    text: str
    member: str | None = None  # .npz member name, when one was given

    @property
    def path(self) -> str:
        """The file path (for 'file' sources)."""
        return self.text

    @property
    def suffix_format(self) -> str | None:
        """'npy', 'npz' or 'pb' from the path's suffix; None for any other suffix."""
        return TENSOR_SUFFIXES.get(os.path.splitext(self.text)[1].lower())


def classify_source(source: str) -> Source:
    """Classify ``source`` by the module rules."""
    if source == "-":
        return Source("stdin", source)
    if source.startswith("-:") and len(source) > 2:
        return Source("stdin", "-", member=source[2:])
    if os.path.lexists(source):
        return Source("file", source)
    model = _model_member(source)
    if model is not None:
        return model
    match = _MEMBER_PATTERN.fullmatch(source)
    if match:
        return Source("file", match["archive"], member=match["member"])
    if os.path.splitext(source)[1].lower() in TENSOR_SUFFIXES or source.startswith(_PATH_STARTS):
        return Source("file", source)
    if looks_like_literal(source):
        return Source("literal", source)
    return Source("file", source)


def _model_member(source: str) -> Source | None:
    """``MODEL.onnx:NAME`` split by rule 3, or None when ``source`` has no ``.onnx:``."""
    starts = [m.end() for m in _MODEL_MARK.finditer(source)]
    splits = [(source[: end - 1], source[end:]) for end in starts if end < len(source)]
    if not splits:
        return None
    for path, name in splits:
        if os.path.isfile(path):
            return Source("model", path, member=name)
    return Source("model", *splits[0][:1], member=splits[0][1])
