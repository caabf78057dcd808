"""Reading a tensor from any source a user can name: the one dispatch above the readers.

``MODEL.onnx:NAME`` (kind ``model`` of :func:`padconv_cli.tensorio.classify_source`) is the
tensor the model stores (:func:`padconv_cli.models.stored_tensor`); anything else is read by
:func:`padconv_cli.tensorio.read_io_source`.  The models read through tensorio, so this module
sits above both.  ``read_tensor`` is the package's public reader.
"""

from __future__ import annotations

import os

import numpy as np

from padconv_cli.tensorio import check_requested_dtype, classify_source, read_io_source
from padconv_cli.tensorio.files import ReadPolicy, printable

__all__ = ["read_named_tensor", "read_tensor"]


def read_named_tensor(
    source: str | os.PathLike[str], *, dtype: str | None = None,
    policy: ReadPolicy | None = None,
) -> tuple[str | None, np.ndarray]:
    """(name, array) of a tensor source; name is the TensorProto, .npz member or stored tensor
    name, or None.

    ``source``: what :func:`padconv_cli.tensorio.read_io_source` reads (a ``.npy``, ``.npz``,
    ``file.npz:name``, ``.pb``, Zarr store, polygraphy ``FILE.json[:NAME]``, ``-`` for stdin,
    a literal) or ``model.onnx:name``, a tensor the model stores.  ``dtype`` (ONNX or numpy
    name) sets a literal's element type; for anything stored it must match the stored type.
    Every read follows ``policy`` (input limit, hard links; None: the default ``ReadPolicy()``).
    """
    text = os.fspath(source)
    classified = classify_source(text) if text.strip() else None
    if classified is None or classified.kind != "model":
        return read_io_source(text, dtype=dtype, policy=policy)
    from padconv_cli.models import stored_tensor  # imports onnx: only when needed

    array = stored_tensor(classified.path, classified.member, policy)
    label = f"{printable(classified.path)}:{printable(classified.member)}"
    return classified.member, check_requested_dtype(array, dtype, label)


def read_tensor(source: str | os.PathLike[str], *, dtype: str | None = None,
                policy: ReadPolicy | None = None) -> np.ndarray:
    """The array of a tensor source (see :func:`read_named_tensor` for what ``source`` and
    ``policy`` can be)."""
    return read_named_tensor(source, dtype=dtype, policy=policy)[1]
