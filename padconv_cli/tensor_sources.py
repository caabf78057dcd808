"""Reading a tensor from any source a user can name, above tensorio and models:
``MODEL.onnx:NAME`` is a tensor the model stores (:func:`padconv_cli.models.stored_tensor`),
anything else is read by :func:`padconv_cli.tensorio.read_io_source`."""

from __future__ import annotations

import os

import numpy as np

from padconv_cli.tensorio import check_requested_dtype, classify_source, read_io_source
from padconv_cli.tensorio.files import ReadPolicy, printable

__all__ = ["read_named_tensor", "read_tensor"]


def read_named_tensor(source: str | os.PathLike[str], *, dtype: str | None = None,
                      policy: ReadPolicy | None = None) -> tuple[str | None, np.ndarray]:
    """(name, array) of what :func:`padconv_cli.tensorio.read_io_source` reads, or of
    ``model.onnx:name``; name: the TensorProto, .npz member or stored tensor name, or None.
    ``dtype`` and ``policy`` as there."""
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
    """The array of a tensor source (:func:`read_named_tensor`)."""
    return read_named_tensor(source, dtype=dtype, policy=policy)[1]
