"""Summary statistics of a tensor for ``padconv show``: counts, range, moments and a histogram.

* ``min``, ``max``, ``mean`` and ``std`` are over the finite elements; NaN, +Inf and -Inf are
  counted apart.  ``std`` is the population deviation ``sqrt(sum((x - mean)^2) / n)``.
* Integers keep exact ``min``/``max`` (Python ints, also uint64 beyond 2**53); ``mean`` and
  ``std`` are float64.  Booleans count as 0/1, complex tensors by their magnitudes ``|x|``;
  strings have no numeric statistics.
* ``median``, ``p90``, ``p95``, ``p99``: over the finite elements, linear interpolation between
  the nearest ranks (numpy's default), on one copy of the finite values (float32 for 8- and
  16-bit floats).  ``argmin``/``argmax``: the first finite minimum / maximum in C order.
* The data are visited CHUNK_ELEMENTS at a time, converted to float64 a chunk at a time, the
  chunk moments merged by Chan's formula ``M2 = M2_a + M2_b + delta^2 * n_a * n_b / n``: a
  large tensor never gets a float64 copy.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np

from padconv_cli.dtypes import element_kind

CHUNK_ELEMENTS = 1 << 20
PERCENTILES = {"median": 50, "p90": 90, "p95": 95, "p99": 99}
HISTOGRAM_BAR = 40  # characters of the longest bar of ``show --histogram``


def _real_chunks(array: np.ndarray, kind: str) -> Iterator[tuple[int, np.ndarray]]:
    """(offset, chunk as float64: ``|x|`` for complex) in C order, CHUNK_ELEMENTS at a time."""
    flat = array.reshape(-1)
    for start in range(0, flat.size, CHUNK_ELEMENTS):
        chunk = flat[start:start + CHUNK_ELEMENTS]
        real = np.abs(chunk.astype(np.complex128)) if kind == "complex" else chunk
        yield start, real.astype(np.float64)


def tensor_stats(array: np.ndarray, *, bins: int | None = None) -> dict[str, Any]:
    """Statistics of ``array`` by the rules of the module docstring, keyed as ``padconv show
    --json`` prints them; a histogram of ``bins`` equal-width bins over ``[min, max]`` of the
    finite elements when ``bins`` is given."""
    from padconv_cli.dtypes import dtype_name

    kind = element_kind(array.dtype)
    stats: dict[str, Any] = {
        "dtype": dtype_name(array.dtype), "shape": [int(d) for d in array.shape],
        "size": int(array.size), "bytes": int(array.nbytes), "min": None, "max": None,
        "mean": None, "std": None, "finite": 0, "nan": 0, "posinf": 0, "neginf": 0, "notes": []}
    if kind in ("string", "other"):
        stats["notes"].append("strings: no numeric statistics")
        return stats
    if kind == "complex":
        stats["notes"].append("complex: statistics of the magnitudes |x|")
    mean = m2 = 0.0
    extremes = [0, 0]  # flat indices of the minimum and the maximum
    exact = kind in ("int", "bool")  # min/max: Python values from the integers themselves
    for offset, real in _real_chunks(array, kind):
        finite_mask = np.isfinite(real)
        for name, mask in (("nan", np.isnan(real)), ("posinf", real == np.inf),
                           ("neginf", real == -np.inf)):
            stats[name] += int(np.count_nonzero(mask))
        finite = real[finite_mask]
        if finite.size == 0:
            continue
        if not exact:
            low_at = int(np.argmin(np.where(finite_mask, real, np.inf)))
            high_at = int(np.argmax(np.where(finite_mask, real, -np.inf)))
            if stats["min"] is None or real[low_at] < stats["min"]:
                stats["min"], extremes[0] = float(real[low_at]), offset + low_at
            if stats["max"] is None or real[high_at] > stats["max"]:
                stats["max"], extremes[1] = float(real[high_at]), offset + high_at
        before, added, chunk_mean = stats["finite"], int(finite.size), float(finite.mean())
        total = stats["finite"] = before + added
        delta = chunk_mean - mean
        mean += delta * added / total
        m2 += float(np.sum((finite - chunk_mean) ** 2)) + delta**2 * before * added / total
    if stats["finite"]:
        if exact:
            flat = array.reshape(-1)
            flat = flat if flat.dtype.kind in "iub" else flat.astype(np.int64)
            extremes = [int(np.argmin(flat)), int(np.argmax(flat))]
            stats["min"], stats["max"] = (flat[at].item() for at in extremes)
        stats["mean"], stats["std"] = mean, math.sqrt(m2 / stats["finite"])
        if points := percentiles(array, kind):
            argmin, argmax = ([int(i) for i in np.unravel_index(at, array.shape)]
                              for at in extremes)
            stats.update(points, argmin=argmin, argmax=argmax)
        if bins is not None:
            stats["histogram"] = _histogram(array, kind, (stats["min"], stats["max"]), bins)
    return stats


def percentiles(array: np.ndarray, kind: str) -> dict[str, float]:
    """``median``, ``p90``, ``p95``, ``p99`` of the finite elements (linear interpolation)."""
    flat = array.reshape(-1)
    if kind in ("bool", "int"):
        values = flat if flat.dtype.kind in "iu" else flat.astype(
            np.uint8 if kind == "bool" else np.int64)
    else:
        if kind == "complex":
            values = np.abs(flat)
        elif flat.dtype.kind != "f" or flat.dtype.itemsize < 4:
            values = flat.astype(np.float32)
        else:
            values = flat
        values = values[np.isfinite(values)]
    if values.size == 0:
        return {}
    # values is a fresh copy unless it is the tensor itself: rank it in place then (one copy)
    own_copy = not np.shares_memory(values, array)
    points = np.percentile(values, list(PERCENTILES.values()), overwrite_input=own_copy)
    return {name: float(v) for name, v in zip(PERCENTILES, points, strict=True)}


def _histogram(array: np.ndarray, kind: str, extremes: tuple, bins: int) -> dict[str, list]:
    """Equal-width bins over ``[min, max]`` of the finite values, counted chunk by chunk:
    ``counts[i]`` in ``[edges[i], edges[i+1])`` (the last bin closed)."""
    low, high = float(extremes[0]), float(extremes[1])
    if low == high:
        low, high = low - 0.5, high + 0.5
    counts = np.zeros(bins, dtype=np.int64)
    edges = np.linspace(low, high, bins + 1)
    for _, real in _real_chunks(array, kind):
        counts += np.histogram(real[np.isfinite(real)], bins=edges)[0]
    return {"edges": [float(e) for e in edges], "counts": [int(c) for c in counts]}


# --- sources and descriptions for ``padconv show`` -------------------------------------------


def _npz_members(path: str) -> list[str] | None:
    """Array names of an .npz archive; None when unlistable (tensorio's read reports why)."""
    import zipfile

    try:
        with zipfile.ZipFile(path) as archive:
            names = [n[:-4] if n.endswith(".npy") else n for n in archive.namelist()]
    except (OSError, zipfile.BadZipFile, ValueError):
        return None
    return [n for n in names if n and not n.endswith("/")]


def named_tensors(source: str, *, dtype: str | None = None,
                  policy: Any = None) -> Iterator[tuple[str, np.ndarray]]:
    """(label, array) of every tensor a source holds, read one at a time: a model's main-graph
    initializers (``model.onnx:W``; none: stderr is told so), every member
    of an ``.npz`` without ``:NAME`` (``a.npz:x``), every tensor of a Polygraphy JSON file,
    else the one tensor (labelled with its TensorProto name too when it has one)."""
    import os

    from padconv_cli.tensorio import classify_source
    from padconv_cli.tensorio.polygraphy_json import read_json_tensors, split_json_source

    split = split_json_source(source)
    if split is not None and split[1] is None:
        for name, array in read_json_tensors(split[0], source, policy):
            yield f"{source}:{name}", array
        return
    classified = classify_source(source)
    suffix = os.path.splitext(classified.path)[1].lower() if classified.kind == "file" else ""
    if suffix == ".onnx":
        yield from _model_tensors(classified.path, policy)
        return
    members = _npz_members(classified.path) if suffix == ".npz" and not classified.member else None
    if members and len(members) > 1:
        for member in members:
            yield read_tensor_labelled(f"{classified.path}:{member}", dtype, policy)
        return
    yield read_tensor_labelled(source, dtype, policy)


def _model_tensors(path: str, policy: Any) -> Iterator[tuple[str, np.ndarray]]:
    """(``path:name``, array) of the model's main-graph initializers; a line on stderr when
    there are none."""
    import click

    from padconv_cli.models import model_initializers

    empty = True
    for name, array in model_initializers(path, policy):
        empty = False
        yield f"{path}:{name}", array
    if empty:
        click.echo(f"{path}: no initializers in the main graph", err=True)


def read_tensor_labelled(source: str, dtype: str | None,
                         policy: Any = None) -> tuple[str, np.ndarray]:
    """(label, array): the source text, plus the stored name when it differs."""
    from padconv_cli.tensor_sources import read_named_tensor

    name, array = read_named_tensor(source, dtype=dtype, policy=policy)
    label = source if not name or source.endswith(f":{name}") else f"{source} ({name})"
    return label, array


def describe_tensor(label: str, array: np.ndarray, *, bins: int | None = None,
                    edge_items: int = 3, width: int = 80) -> dict[str, Any]:
    """Everything ``padconv show`` prints about one tensor, as a dict (no arrays inside): its
    :func:`tensor_stats`, and a preview, numpy's text in lines of ``width - 4`` characters,
    above 100 elements only the first and last ``edge_items`` of every axis around ``...``."""
    description = {"name": label, **tensor_stats(array, bins=bins)}
    if edge_items > 0:
        description["preview"] = np.array2string(array, threshold=100, edgeitems=edge_items,
                                                 max_line_width=max(width - 4, 20))
    return description


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def _number(value: Any) -> str:
    return "-" if value is None else f"{value:.6g}" if isinstance(value, float) else str(value)


def format_description(description: dict[str, Any]) -> str:
    """The text form of :func:`describe_tensor`."""
    d = description
    shape = ", ".join(str(size) for size in d["shape"])
    lines = [f"{d['name']}: {d['dtype']}[{shape}] "
             f"({_count(d['size'], 'element')}, {_count(d['bytes'], 'byte')})"]
    if d["finite"] or d["nan"] or d["posinf"] or d["neginf"]:
        lines.append(f"  min {_number(d['min'])}  max {_number(d['max'])}  "
                     f"mean {_number(d['mean'])}  std {_number(d['std'])}")
        lines.append(f"  finite {d['finite']}  NaN {d['nan']}  +Inf {d['posinf']}  "
                     f"-Inf {d['neginf']}")
    if "median" in d:
        lines.append("  " + "  ".join(f"{name} {_number(d[name])}" for name in PERCENTILES))
        lines.append(f"  min at {d['argmin']}  max at {d['argmax']}")
    lines.extend(f"  ({note})" for note in d["notes"])
    if "histogram" in d:  # one line per bin, [low, high) ### count, bars scaled to the largest
        edges, counts = d["histogram"]["edges"], d["histogram"]["counts"]
        lines.append(f"  histogram ({len(counts)} bins):")
        largest = max(counts) or 1
        for index, count in enumerate(counts):
            closing = "]" if index == len(counts) - 1 else ")"
            span = f"[{edges[index]:.4g}, {edges[index + 1]:.4g}{closing}"
            bar = "#" * round(HISTOGRAM_BAR * count / largest)
            lines.append(f"    {span:<24} {bar:<{HISTOGRAM_BAR}} {count}")
    if "preview" in d:
        lines.append("  values:")
        lines.extend("    " + line for line in d["preview"].splitlines())
    return "\n".join(lines)
