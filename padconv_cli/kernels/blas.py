"""Direct calls into the OpenBLAS that numpy links, for what ``np.matmul`` cannot express.

``np.matmul`` always overwrites its output. BLAS's ``gemm`` computes ``C = A @ B + beta * C``,
so a sum of matrix products (one per kernel tap, see the shifted path of
:mod:`padconv_cli.kernels.conv_paths`) can accumulate in place, in cache, with no temporary
product and no separate addition pass. The library is found among the process's loaded shared
libraries; only an ILP64 OpenBLAS with its symbol suffix (numpy's own wheels) is called
directly, as its integer width is then known. Elsewhere :func:`sum_of_products` falls back to
numpy (a product, then additions).
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable, Sequence

import numpy as np

_ROW_MAJOR, _NO_TRANSPOSE = 101, 111
_BLAS_INT = ctypes.c_int64
_PREFIXES = (("scipy_openblas", "scipy_", "64_"), ("openblas", "", "64_"), ("openblas", "", ""))


@functools.cache
def openblas_library() -> tuple[ctypes.CDLL, str, str, str] | None:
    """``(library, openblas prefix, cblas prefix, suffix)`` of the OpenBLAS numpy links, found in
    ``/proc/self/maps`` (Linux) once numpy has loaded it; None when there is none."""
    try:
        with open("/proc/self/maps", encoding="utf-8") as maps:
            paths = {line.split()[-1] for line in maps if "openblas" in line.lower()}
    except OSError:
        return None
    for path in sorted(p for p in paths if p.startswith("/")):
        try:
            library = ctypes.CDLL(path)
        except OSError:
            continue
        for openblas_prefix, cblas_prefix, suffix in _PREFIXES:
            if hasattr(library, f"{openblas_prefix}_get_num_threads{suffix}"):
                return library, openblas_prefix, cblas_prefix, suffix
    return None


@functools.cache
def _direct_gemm(dtype_name: str) -> Callable[..., None] | None:
    """``cblas_sgemm``/``cblas_dgemm`` of an ILP64 OpenBLAS with 64-bit integer arguments, or
    None (then :func:`sum_of_products` uses numpy)."""
    found = openblas_library()
    if found is None:
        return None
    library, _, cblas_prefix, suffix = found
    letter = {"float32": "s", "float64": "d"}.get(dtype_name)
    if letter is None or suffix != "64_":
        return None
    function = getattr(library, f"{cblas_prefix}cblas_{letter}gemm{suffix}", None)
    if function is None:
        return None
    scalar = ctypes.c_float if letter == "s" else ctypes.c_double
    pointer = ctypes.c_void_p
    function.restype = None
    function.argtypes = [
        ctypes.c_int, ctypes.c_int, ctypes.c_int, _BLAS_INT, _BLAS_INT, _BLAS_INT,
        scalar, pointer, _BLAS_INT, pointer, _BLAS_INT, scalar, pointer, _BLAS_INT,
    ]
    return function


def has_direct_gemm(dtype: np.dtype) -> bool:
    """Whether :func:`sum_of_products` on ``dtype`` matrices calls BLAS directly."""
    return _direct_gemm(np.dtype(dtype).name) is not None


def sum_of_products(
    a: np.ndarray, source: np.ndarray, starts: Sequence[int], c: np.ndarray
) -> None:
    """``C = sum_t A[t] @ source[:, starts[t] : starts[t] + n]`` with ``n = C.shape[1]``.

    ``A`` is ``(T, m, k)``, ``source`` a 2-D ``(k, L)`` matrix whose rows may be strided (such
    as the padded rows of several channels) and ``C`` an ``(m, n)`` matrix. The sum runs over
    ``t`` in order, each product rounded into C as BLAS adds it (``beta`` = 0, then 1). Every
    window is checked to lie inside ``source`` before BLAS sees a pointer.
    """
    count, rows, inner = a.shape
    n = c.shape[1]
    if count == 0:
        c[...] = 0
        return
    if len(starts) != count or source.shape[0] != inner or c.shape[0] != rows:
        raise ValueError(f"sum_of_products: {a.shape} @ {source.shape} windows -> {c.shape}")
    if any(start < 0 or start + n > source.shape[1] for start in starts):
        raise ValueError(f"sum_of_products: a window of {n} leaves a source of {source.shape[1]}")
    direct = _checked_direct(a, source, c)
    if direct is None:
        _numpy_sum_of_products(a, source, starts, c)
        return
    function, (lda, ldb, ldc) = direct
    if 0 in c.shape:
        return
    item = c.itemsize
    a_data, b_data, c_data = a.ctypes.data, source.ctypes.data, c.ctypes.data
    for index, start in enumerate(starts):
        function(
            _ROW_MAJOR, _NO_TRANSPOSE, _NO_TRANSPOSE, rows, n, inner,
            1.0, a_data + index * a.strides[0], lda, b_data + start * item, ldb,
            1.0 if index else 0.0, c_data, ldc,
        )


def _checked_direct(
    a: np.ndarray, b: np.ndarray, c: np.ndarray
) -> tuple[Callable[..., None], tuple[int, int, int]] | None:
    """The direct BLAS function and the leading dimensions of ``a[t]``, ``b`` and ``c``, or None
    when numpy must do the work (no direct BLAS, or a layout, alignment or byte order BLAS
    cannot read). Raises on mismatched dtypes, a read-only C or a C that overlaps A or B."""
    if not a.dtype == b.dtype == c.dtype:
        raise ValueError(f"sum_of_products: mixed dtypes {a.dtype}, {b.dtype}, {c.dtype}")
    if not c.flags.writeable:
        raise ValueError("sum_of_products: C is read-only")
    if np.may_share_memory(c, a) or np.may_share_memory(c, b):
        raise ValueError("sum_of_products: C overlaps a factor")
    function = _direct_gemm(c.dtype.name)
    blas_readable = all(m.flags.aligned and m.dtype.isnative for m in (a, b, c))
    if function is None or not blas_readable or a.ndim != 3 or a.strides[0] % a.itemsize:
        return None
    leading = (_leading_dimension(a[0]), _leading_dimension(b), _leading_dimension(c))
    if None in leading:
        return None
    return function, leading  # type: ignore[return-value]


def _leading_dimension(matrix: np.ndarray) -> int | None:
    """BLAS row-major leading dimension of a 2-D view (elements between row starts), or None
    when BLAS cannot read it (elements of a row not adjacent, or rows overlapping)."""
    if matrix.ndim != 2:
        return None
    item = matrix.itemsize
    row_stride, column_stride = matrix.strides
    if matrix.shape[1] > 1 and column_stride != item:
        return None
    if row_stride % item:
        return None
    leading = row_stride // item if matrix.shape[0] > 1 else max(1, matrix.shape[1])
    return leading if leading >= max(1, matrix.shape[1]) else None


def _numpy_sum_of_products(
    a: np.ndarray, source: np.ndarray, starts: Sequence[int], c: np.ndarray
) -> None:
    """:func:`sum_of_products` with numpy: a product into C, then products added to it."""
    n = c.shape[1]
    for index, start in enumerate(starts):
        window = source[:, start : start + n]
        if index == 0:
            np.matmul(a[0], window, out=c)
        else:
            c += np.matmul(a[index], window)
