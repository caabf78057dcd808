"""The comparison rule of ``padconv verify``, ``compare``, ``--check`` and audit.

Rule: shapes and dtypes match exactly (every string storage is the ONNX string type).
Booleans, strings and (by default) integers must be equal; a float or complex element must
satisfy ``|actual - expected| <= atol + rtol * |expected| + bound`` (``bound``: a per-element
allowance such as Conv's dot-product error bound, else 0); NaN matches only NaN and an
infinity only the same infinity.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from padconv_cli.dtypes import element_kind, float_info

MAX_REPORTED_MISMATCHES = 5

# (rtol, atol) per dtype name. float32: the pytorch-converted Conv cases of the ONNX suite differ
# from an exactly rounded result by up to 4.8e-7 absolute (a few float32 ulps at magnitude 1,
# summation order) and 4.9e-4 relative (only next to zero), so atol=1e-6 with rtol=1e-5 passes
# them with a 2x margin while still catching any error of one ulp at magnitude 100 and more.
# float16/bfloat16: about one ulp of 1.0 (eps 9.8e-4 and 7.8e-3). float64: tight, a few thousand
# ulps, enough for a different summation order only.
DEFAULT_TOLERANCES: dict[str, tuple[float, float]] = {
    "float64": (1e-9, 1e-11), "complex128": (1e-9, 1e-11), "float32": (1e-5, 1e-6),
    "complex64": (1e-5, 1e-6), "float16": (1e-3, 1e-3), "bfloat16": (1e-2, 1e-2),
}

Mismatch = tuple[tuple[int, ...], Any, Any]


@dataclass
class Comparison:
    """Outcome of :func:`compare_arrays`: ``max_abs``/``max_rel`` over the elements where both
    are finite (None for strings, bools, shape or dtype mismatch); ``min_atol`` the smallest
    atol passing with ``rtol`` fixed, ``min_rtol`` the smallest rtol with ``atol`` fixed (None
    when no tolerance can pass; ``min_rtol`` inf when an element beyond atol expects 0)."""

    passed: bool
    reason: str
    max_abs: float | None = None
    max_rel: float | None = None
    mismatches: list[Mismatch] = field(default_factory=list)
    mismatch_count: int = 0
    min_atol: float | None = None
    min_rtol: float | None = None
    rtol: float = 0.0
    atol: float = 0.0
    bounded: bool = False  # a per-element allowance (``bound``) was added to the tolerance

    def mismatch_records(self) -> list[dict[str, Any]]:
        """The first mismatches as ``{"index", "expected", "actual"}`` records."""
        return [{"index": list(index), "expected": expected, "actual": actual}
                for index, expected, actual in self.mismatches]


def same_element_type(first: np.dtype, second: np.dtype) -> bool:
    """Equal dtypes; strings count as one type however numpy stores them (object, <U, |S),
    as ONNX has a single string type."""
    return first == second or (first.kind in "OUS" and second.kind in "OUS")


def default_tolerances(dtype: np.dtype) -> tuple[float, float]:
    """Default ``(rtol, atol)`` for ``dtype``: see DEFAULT_TOLERANCES; other floats use their
    machine epsilon for both; integers, bools and strings compare exactly ``(0, 0)``."""
    dtype = np.dtype(dtype)
    if dtype.name in DEFAULT_TOLERANCES:
        return DEFAULT_TOLERANCES[dtype.name]
    if element_kind(dtype) == "float":
        eps = float(float_info(dtype).eps)
        return eps, eps
    return 0.0, 0.0


def compare_arrays(expected: np.ndarray, actual: np.ndarray, *, rtol: float | None = None,
                   atol: float | None = None, bound: np.ndarray | None = None) -> Comparison:
    """Compare ``actual`` with ``expected`` by the module rule; ``rtol``/``atol`` default to
    :func:`default_tolerances` of the expected dtype and apply to integers too (in exact
    integer arithmetic), never to bools and strings; ``min_atol``/``min_rtol`` are on top of
    ``bound``."""
    expected = np.asarray(expected)
    actual = np.asarray(actual)
    default_rtol, default_atol = default_tolerances(expected.dtype)
    rtol = default_rtol if rtol is None else float(rtol)
    atol = default_atol if atol is None else float(atol)
    if expected.shape != actual.shape:
        reason = f"shape {tuple(actual.shape)} != expected {tuple(expected.shape)}"
        return Comparison(False, reason, rtol=rtol, atol=atol)
    if not same_element_type(expected.dtype, actual.dtype):
        names = ["string" if d.kind in "OUS" else d.name for d in (actual.dtype, expected.dtype)]
        reason = f"dtype {names[0]} != expected {names[1]}"
        return Comparison(False, reason, rtol=rtol, atol=atol)
    kind = element_kind(expected.dtype)
    if kind in ("bool", "string", "other"):  # element-wise equality, tolerances do not apply
        bad = ~np.asarray(expected == actual, dtype=bool).reshape(expected.shape)
        return _finish(expected, actual, bad, rtol, atol)
    if kind == "int":  # exact: a bound is not added
        bad, abs_diff, abs_exp, covered = _integer_errors(expected, actual, rtol, atol)
    else:
        bad, abs_diff, abs_exp, covered = _inexact_errors(expected, actual, rtol, atol, kind,
                                                          bound)
    comparison = _finish(expected, actual, bad, rtol, atol, kind != "int" and bound is not None)
    comparison.max_abs, comparison.max_rel = _max_errors(abs_diff, abs_exp)
    if covered is not None:
        comparison.min_atol, comparison.min_rtol = _minimal_tolerances(covered, abs_exp, rtol,
                                                                       atol)
    return comparison


def _integer_errors(expected: np.ndarray, actual: np.ndarray, rtol: float, atol: float):
    """(bad, |a-e|, |e|, |a-e|) of integers: exact differences computed with Python ints on
    the unequal elements only."""
    unequal_index = np.flatnonzero(np.asarray(expected != actual).reshape(-1))
    exp_values = [int(v) for v in expected.reshape(-1)[unequal_index]]
    act_values = [int(v) for v in actual.reshape(-1)[unequal_index]]
    differences = [abs(a - e) for a, e in zip(act_values, exp_values, strict=True)]
    abs_diff = np.array(differences, dtype=np.float64)
    abs_exp = np.array([abs(e) for e in exp_values], dtype=np.float64)
    bad = np.zeros(expected.size, dtype=bool)
    bad[unequal_index[abs_diff > atol + rtol * abs_exp]] = True
    return bad.reshape(expected.shape), abs_diff, abs_exp, abs_diff


def _inexact_errors(expected, actual, rtol: float, atol: float, kind: str,
                    bound: np.ndarray | None):
    """(bad, |a-e|, |e|, what atol/rtol must cover) of floats and complex over the finite
    elements; NaN only matches NaN, inf only the same inf, else the tolerance plus the
    per-element ``bound``; the last is None when a NaN or inf mismatches (no tolerance can
    pass)."""
    wide = np.complex128 if kind == "complex" else np.float64
    exp = expected.astype(wide)
    act = actual.astype(wide)
    exp_nan, act_nan = np.isnan(exp), np.isnan(act)
    exp_inf, act_inf = np.isinf(exp), np.isinf(act)
    special = exp_nan | act_nan | exp_inf | act_inf
    special_ok = (exp_nan & act_nan) | (exp_inf & act_inf & (exp == act))
    finite = ~special
    with np.errstate(invalid="ignore", over="ignore"):
        abs_diff = np.where(finite, np.abs(act - exp), 0.0)
    abs_exp = np.where(finite, np.abs(exp), 0.0)
    allowance = 0.0 if bound is None else np.broadcast_to(np.asarray(bound, np.float64),
                                                           expected.shape)
    with np.errstate(invalid="ignore"):
        beyond_bound = np.maximum(abs_diff - allowance, 0.0)
    bad = np.where(special, ~special_ok, ~(beyond_bound <= atol + rtol * abs_exp))
    covered = None if np.any(special & ~special_ok) else beyond_bound[finite]
    return bad, abs_diff[finite], abs_exp[finite], covered


def _max_errors(abs_diff: np.ndarray, abs_exp: np.ndarray) -> tuple[float, float]:
    """Largest |a-e| and largest |a-e|/|e| (inf where e == 0 and a != e), 0.0 when empty."""
    if abs_diff.size == 0:
        return 0.0, 0.0
    differs = abs_diff > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(differs, abs_diff / abs_exp, 0.0)
    return float(abs_diff.max()), float(rel.max())


def _minimal_tolerances(
    abs_diff: np.ndarray, abs_exp: np.ndarray, rtol: float, atol: float
) -> tuple[float, float]:
    """Smallest atol with rtol fixed: max(|a-e| - rtol*|e|); smallest rtol with atol fixed:
    max((|a-e| - atol) / |e|) over the elements beyond atol (inf if such an element has e = 0).
    Both are nudged up by ulps until they pass the same floating-point test as the comparison."""
    if abs_diff.size == 0:
        return 0.0, 0.0
    min_atol = max(float(np.max(abs_diff - rtol * abs_exp)), 0.0)
    min_atol = _nudge_until(lambda a: bool(np.all(abs_diff <= a + rtol * abs_exp)), min_atol)
    beyond = abs_diff > atol
    if not np.any(beyond):
        return min_atol, 0.0
    if np.any(abs_exp[beyond] == 0):
        return min_atol, float("inf")
    min_rtol = float(np.max((abs_diff[beyond] - atol) / abs_exp[beyond]))
    min_rtol = _nudge_until(lambda r: bool(np.all(abs_diff <= atol + r * abs_exp)), min_rtol)
    return min_atol, min_rtol


def _nudge_until(passes, value: float, max_steps: int = 8) -> float:
    """Step ``value`` up one float64 ulp at a time (at most ``max_steps``) until ``passes``."""
    for _ in range(max_steps):
        if passes(value):
            return value
        value = float(np.nextafter(value, np.inf))
    return value


def _finish(expected, actual, bad, rtol: float, atol: float, bounded: bool = False
            ) -> Comparison:
    """The Comparison's verdict, reason and first mismatching elements (errors not filled);
    an element stays a numpy scalar, to print in its own precision (:func:`display_value`)."""
    bad_positions = np.flatnonzero(np.asarray(bad).reshape(-1))
    count = int(bad_positions.size)
    indices = [tuple(int(i) for i in np.unravel_index(int(flat), expected.shape))
               for flat in bad_positions[:MAX_REPORTED_MISMATCHES]]
    mismatches = [(index, expected[index], actual[index]) for index in indices]
    reason = ""
    if count:
        reason = f"{count} of {expected.size} elements differ (rtol={rtol:g}, atol={atol:g}"
        reason += ", + bound)" if bounded else ")"
    return Comparison(count == 0, reason, mismatches=mismatches, mismatch_count=count,
                      rtol=rtol, atol=atol, bounded=bounded)


def format_error(value: float | None, digits: int = 3) -> str:
    """An error magnitude with ``digits`` significant digits; ``-`` when not applicable."""
    if value is None:
        return "-"
    return "0" if value == 0 else f"{value:.{digits}g}"


def display_value(value: Any) -> str:
    """An element as text: numbers in the shortest form that round-trips in their own type
    (float32 0.1 -> ``0.1``), strings quoted (bytes decoded)."""
    if isinstance(value, (str, bytes)):  # numpy's str_ and bytes_ too
        return repr(value.decode("utf-8", errors="replace") if isinstance(value, bytes)
                    else str(value))
    return str(value) if isinstance(value, np.generic) else repr(value)


def compare_with_peer(theirs: Any, ours: Any, bound: np.ndarray | None,
                      rtol: float | None = None, atol: float | None = None) -> Any:
    """``compare_arrays(theirs, ours)``: within ``atol + rtol*|theirs|`` plus ``bound`` per
    element (when it has the output's shape), strings as str whatever their width."""
    from padconv_cli.runtimes import onnx_array

    theirs, ours = onnx_array(theirs, "US"), onnx_array(ours, "US")
    usable = bound if bound is not None and theirs.shape == np.shape(bound) else None
    return compare_arrays(theirs, ours, rtol=rtol, atol=atol, bound=usable)
