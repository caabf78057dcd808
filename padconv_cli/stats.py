"""Summary statistics of a tensor for ``padconv show``: counts, range, moments and a histogram.

Rules:

* ``min``, ``max``, ``mean`` and ``std`` are taken over the finite elements only; NaN, +Inf and
  -Inf are counted separately.  ``std`` is the population standard deviation
  ``sqrt(sum((x - mean)^2) / n)`` (numpy's default, ``ddof=0``).
* Integers keep exact ``min``/``max`` (Python ints, also for uint64 beyond 2**53); ``mean`` and
  ``std`` are float64.  Booleans count as 0/1.  Complex tensors are summarised by their
  magnitudes ``|x|``.  Strings have no numeric statistics.
* ``median`` and the percentiles ``p90``/``p95``/``p99`` are over the finite elements too, by
  linear interpolation between the two nearest ranks (numpy's default method); they need one
  copy of the finite values (float32 for 8- and 16-bit floats, ``|x|`` for complex).
  ``argmin``/``argmax`` are the index of the first finite minimum / maximum in C order.
* The data are visited in chunks of :data:`CHUNK_ELEMENTS`, converted to float64 one chunk at a
  time, and the chunk moments are merged with Chan's formula
  ``M2 = M2_a + M2_b + delta^2 * n_a * n_b / n`` — so a large tensor never gets a float64 copy.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from padconv_cli.dtypes import element_kind

CHUNK_ELEMENTS = 1 << 20
DEFAULT_EDGE_ITEMS = 3
PREVIEW_THRESHOLD = 100


@dataclass
class Moments:
    """Running count, mean and sum of squared deviations (``M2``) of the finite elements."""

    count: int = 0
    mean: float = 0.0
    m2: float = 0.0

    def merge(self, count: int, mean: float, m2: float) -> None:
        """Chan's parallel update: combine with a chunk of ``count`` values."""
        if count == 0:
            return
        total = self.count + count
        delta = mean - self.mean
        self.mean += delta * count / total
        self.m2 += m2 + delta * delta * self.count * count / total
        self.count = total

    @property
    def std(self) -> float:
        """Population standard deviation ``sqrt(M2 / n)``."""
        return math.sqrt(self.m2 / self.count) if self.count else float("nan")


@dataclass
class Histogram:
    """``counts[i]`` finite elements fall in ``[edges[i], edges[i+1])`` (last bin closed)."""

    edges: list[float]
    counts: list[int]


@dataclass
class TensorStats:
    """What ``padconv show`` reports about one tensor."""

    dtype: str
    shape: tuple[int, ...]
    size: int
    nbytes: int
    kind: str  # "float", "int", "bool", "complex", "string"
    finite: int = 0
    nan: int = 0
    posinf: int = 0
    neginf: int = 0
    minimum: Any = None
    maximum: Any = None
    mean: float | None = None
    std: float | None = None
    histogram: Histogram | None = None
    notes: list[str] = field(default_factory=list)
    percentiles: dict[str, float] = field(default_factory=dict)
    argmin: tuple[int, ...] | None = None
    argmax: tuple[int, ...] | None = None
    flat_extremes: list[int] = field(default_factory=lambda: [0, 0])


def _chunks(array: np.ndarray) -> Iterator[np.ndarray]:
    """The elements of ``array`` in C order, CHUNK_ELEMENTS at a time (views where possible)."""
    flat = array.reshape(-1)
    for start in range(0, flat.size, CHUNK_ELEMENTS):
        yield flat[start : start + CHUNK_ELEMENTS]


def _as_real(chunk: np.ndarray, kind: str) -> np.ndarray:
    """A chunk as float64: magnitudes for complex, 0/1 for bool, exact for every other type."""
    if kind == "complex":
        return np.abs(chunk.astype(np.complex128))
    return chunk.astype(np.float64)


def tensor_stats(array: np.ndarray, *, bins: int | None = None) -> TensorStats:
    """Statistics of ``array`` by the rules of the module docstring; a histogram of ``bins``
    equal-width bins over ``[min, max]`` of the finite elements when ``bins`` is given."""
    from padconv_cli.dtypes import dtype_name

    kind = element_kind(array.dtype)
    stats = TensorStats(
        dtype=dtype_name(array.dtype),
        shape=tuple(int(d) for d in array.shape),
        size=int(array.size),
        nbytes=int(array.nbytes),
        kind=kind,
    )
    if kind in ("string", "other"):
        stats.notes.append("strings: no numeric statistics")
        return stats
    if kind == "complex":
        stats.notes.append("complex: statistics of the magnitudes |x|")
    moments = Moments()
    for index, chunk in enumerate(_chunks(array)):
        _accumulate(stats, moments, chunk, kind, index * CHUNK_ELEMENTS)
    if moments.count:
        stats.mean = moments.mean
        stats.std = moments.std
        stats.argmin, stats.argmax = (
            tuple(int(i) for i in np.unravel_index(flat, array.shape))
            for flat in stats.flat_extremes
        )
        stats.percentiles = percentiles(array, kind)
    if bins is not None and moments.count:
        stats.histogram = _histogram(array, kind, stats, bins)
    return stats


PERCENTILES = {"median": 50, "p90": 90, "p95": 95, "p99": 99}


def _finite_values(array: np.ndarray, kind: str) -> np.ndarray:
    """The finite elements as a flat array numpy can rank (see the module rules)."""
    flat = array.reshape(-1)
    if kind == "complex":
        values = np.abs(flat)
    elif kind == "bool":
        return flat.astype(np.uint8)
    elif kind == "int":
        return flat if flat.dtype.kind in "iu" else flat.astype(np.int64)
    elif flat.dtype.kind != "f" or flat.dtype.itemsize < 4:
        values = flat.astype(np.float32)
    else:
        values = flat
    return values[np.isfinite(values)]


def percentiles(array: np.ndarray, kind: str) -> dict[str, float]:
    """``median``, ``p90``, ``p95``, ``p99`` of the finite elements (linear interpolation)."""
    values = _finite_values(array, kind)
    if values.size == 0:
        return {}
    # values is a fresh copy unless it is the tensor itself: rank it in place then (one copy)
    own_copy = not np.shares_memory(values, array)
    points = np.percentile(values, list(PERCENTILES.values()), overwrite_input=own_copy)
    return {name: float(v) for name, v in zip(PERCENTILES, points, strict=True)}


def _chunk_extremes(chunk: np.ndarray, real: np.ndarray, finite_mask: np.ndarray,
                    kind: str) -> tuple[Any, int, Any, int]:
    """(min, its index, max, its index) of the finite elements of a chunk (first occurrence)."""
    if kind in ("int", "bool"):
        values = chunk if chunk.dtype.kind in "iu" else chunk.astype(np.int64)
        low_at, high_at = int(np.argmin(values)), int(np.argmax(values))
        return int(values[low_at]), low_at, int(values[high_at]), high_at
    low_at = int(np.argmin(np.where(finite_mask, real, np.inf)))
    high_at = int(np.argmax(np.where(finite_mask, real, -np.inf)))
    return float(real[low_at]), low_at, float(real[high_at]), high_at


def _accumulate(stats: TensorStats, moments: Moments, chunk: np.ndarray, kind: str,
                offset: int = 0) -> None:
    """Fold one chunk (starting at flat index ``offset``) into the counts, the extremes with
    their indices and the moments."""
    real = _as_real(chunk, kind)
    finite_mask = np.isfinite(real)
    stats.nan += int(np.count_nonzero(np.isnan(real)))
    stats.posinf += int(np.count_nonzero(real == np.inf))
    stats.neginf += int(np.count_nonzero(real == -np.inf))
    finite = real[finite_mask]
    stats.finite += int(finite.size)
    if finite.size == 0:
        return
    low, low_at, high, high_at = _chunk_extremes(chunk, real, finite_mask, kind)
    if kind == "bool":
        low, high = bool(low), bool(high)
    if stats.minimum is None or low < stats.minimum:
        stats.minimum, stats.flat_extremes[0] = low, offset + low_at
    if stats.maximum is None or high > stats.maximum:
        stats.maximum, stats.flat_extremes[1] = high, offset + high_at
    mean = float(finite.mean())
    moments.merge(int(finite.size), mean, float(np.sum((finite - mean) ** 2)))


def _histogram(array: np.ndarray, kind: str, stats: TensorStats, bins: int) -> Histogram:
    """Equal-width bins over ``[min, max]`` of the finite values, counted chunk by chunk."""
    low, high = float(stats.minimum), float(stats.maximum)
    if low == high:
        low, high = low - 0.5, high + 0.5
    counts = np.zeros(bins, dtype=np.int64)
    edges = np.linspace(low, high, bins + 1)
    for chunk in _chunks(array):
        real = _as_real(chunk, kind)
        chunk_counts, _ = np.histogram(real[np.isfinite(real)], bins=edges)
        counts += chunk_counts
    return Histogram([float(e) for e in edges], [int(c) for c in counts])


def preview_text(array: np.ndarray, edge_items: int = DEFAULT_EDGE_ITEMS,
                 width: int = 76) -> str:
    """numpy's text form of the values in lines of at most ``width`` characters; above
    PREVIEW_THRESHOLD elements only the first and last ``edge_items`` of every axis are shown,
    around ``...``."""
    return np.array2string(
        array, threshold=PREVIEW_THRESHOLD, edgeitems=max(int(edge_items), 1),
        max_line_width=max(width, 20),
    )


# --- sources and descriptions for ``padconv show`` -------------------------------------------


def _npz_members(path: str) -> list[str] | None:
    """Array names of an .npz archive, or None when it cannot be listed (tensorio then reports
    the problem when the archive is read)."""
    import zipfile

    try:
        with zipfile.ZipFile(path) as archive:
            names = [n[:-4] if n.endswith(".npy") else n for n in archive.namelist()]
    except (OSError, zipfile.BadZipFile, ValueError):
        return None
    return [n for n in names if n and not n.endswith("/")]


def named_tensors(
    source: str, *, dtype: str | None = None, notice: Callable[[str], None] | None = None,
    policy: Any = None,
) -> Iterator[tuple[str, np.ndarray]]:
    """(label, array) of every tensor a source holds, read one at a time.

    ``.onnx`` models give every initializer of the main graph (``model.onnx:W``; Constant
    nodes and subgraph initializers are not shown); for a model without any, ``notice``
    (default: a line on stderr) receives ``"model.onnx: no initializers in the main graph"``.
    ``.npz`` archives without a ``:NAME`` give every member (``a.npz:x``); anything else is one
    tensor read by tensorio, labelled with the source (and the TensorProto name when it has
    one).
    """
    import os

    from padconv_cli.tensorio import classify_source
    from padconv_cli.tensorio.polygraphy_json import read_json_tensors, split_json_source

    split = split_json_source(source)
    if split is not None and split[1] is None and os.path.isfile(split[0]):
        for name, array in read_json_tensors(split[0], source, policy):
            yield f"{source}:{name}", array
        return
    classified = classify_source(source)
    suffix = os.path.splitext(classified.path)[1].lower() if classified.kind == "file" else ""
    if suffix == ".onnx":
        yield from _model_tensors(classified.path, notice or _stderr_notice, policy)
        return
    members = _npz_members(classified.path) if suffix == ".npz" and not classified.member else None
    if members and len(members) > 1:
        for member in members:
            yield read_tensor_labelled(f"{classified.path}:{member}", dtype, policy)
        return
    yield read_tensor_labelled(source, dtype, policy)


def _model_tensors(path: str, notice: Callable[[str], None],
                   policy: Any = None) -> Iterator[tuple[str, np.ndarray]]:
    """(``path:name``, array) of the model's main-graph initializers; ``notice`` when none."""
    from padconv_cli.models import model_initializers

    empty = True
    for name, array in model_initializers(path, policy):
        empty = False
        yield f"{path}:{name}", array
    if empty:
        notice(f"{path}: no initializers in the main graph")


def _stderr_notice(message: str) -> None:
    import click

    click.echo(message, err=True)


def read_tensor_labelled(source: str, dtype: str | None,
                         policy: Any = None) -> tuple[str, np.ndarray]:
    """(label, array): the source text, plus the stored name when it differs."""
    from padconv_cli.tensor_sources import read_named_tensor

    name, array = read_named_tensor(source, dtype=dtype, policy=policy)
    label = source if not name or source.endswith(f":{name}") else f"{source} ({name})"
    return label, array


def describe_tensor(
    label: str, array: np.ndarray, *, bins: int | None = None, edge_items: int = 3,
    width: int = 80,
) -> dict[str, Any]:
    """Everything ``padconv show`` prints about one tensor, as a dict (no arrays inside)."""
    stats = tensor_stats(array, bins=bins)
    description: dict[str, Any] = {
        "name": label,
        "dtype": stats.dtype,
        "shape": list(stats.shape),
        "size": stats.size,
        "bytes": stats.nbytes,
        "min": stats.minimum,
        "max": stats.maximum,
        "mean": stats.mean,
        "std": stats.std,
        "finite": stats.finite,
        "nan": stats.nan,
        "posinf": stats.posinf,
        "neginf": stats.neginf,
        "notes": stats.notes,
    }
    if stats.percentiles:
        description.update(stats.percentiles)
        description["argmin"] = list(stats.argmin or ())
        description["argmax"] = list(stats.argmax or ())
    if stats.histogram is not None:
        description["histogram"] = {
            "edges": stats.histogram.edges, "counts": stats.histogram.counts
        }
    if edge_items > 0:
        description["preview"] = preview_text(array, edge_items, width - 4)
    return description


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def _number(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def _histogram_lines(histogram: dict[str, Any], width: int = 40) -> list[str]:
    """One line per bin: ``[low, high)  ####  count`` with bars scaled to the largest bin."""
    edges, counts = histogram["edges"], histogram["counts"]
    largest = max(counts) or 1
    lines = []
    for index, count in enumerate(counts):
        closing = "]" if index == len(counts) - 1 else ")"
        bar = "#" * round(width * count / largest)
        span = f"[{edges[index]:.4g}, {edges[index + 1]:.4g}{closing}"
        lines.append(f"    {span:<24} {bar:<{width}} {count}")
    return lines


def format_description(description: dict[str, Any]) -> str:
    """The text form of :func:`describe_tensor`."""
    shape = ", ".join(str(d) for d in description["shape"])
    lines = [
        f"{description['name']}: {description['dtype']}[{shape}] "
        f"({_count(description['size'], 'element')}, {_count(description['bytes'], 'byte')})"
    ]
    if description["finite"] or description["nan"] or description["posinf"] or (
        description["neginf"]
    ):
        lines.append(
            f"  min {_number(description['min'])}  max {_number(description['max'])}  "
            f"mean {_number(description['mean'])}  std {_number(description['std'])}"
        )
        lines.append(
            f"  finite {description['finite']}  NaN {description['nan']}  "
            f"+Inf {description['posinf']}  -Inf {description['neginf']}"
        )
    if "median" in description:
        lines.append(
            "  " + "  ".join(f"{name} {_number(description[name])}" for name in PERCENTILES)
        )
        lines.append(
            f"  min at {description['argmin']}  max at {description['argmax']}"
        )
    lines.extend(f"  ({note})" for note in description["notes"])
    if "histogram" in description:
        lines.append(f"  histogram ({len(description['histogram']['counts'])} bins):")
        lines.extend(_histogram_lines(description["histogram"]))
    if "preview" in description:
        lines.append("  values:")
        lines.extend("    " + line for line in description["preview"].splitlines())
    return "\n".join(lines)
