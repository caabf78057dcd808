"""``padconv show`` statistics: median, p90/p95/p99 and the index of min/max, over the finite
values (NaN and infinities left out), also across chunk boundaries."""

from __future__ import annotations

import json

import numpy as np
import pytest

from padconv_cli import stats


def test_percentiles_and_extreme_indices_skip_non_finite(monkeypatch):
    monkeypatch.setattr(stats, "CHUNK_ELEMENTS", 7)  # several chunks, extremes in later ones
    rng = np.random.default_rng(0)
    array = rng.normal(size=(5, 9)).astype(np.float32)
    array[0, 0], array[1, 1], array[2, 2] = np.nan, np.inf, -np.inf
    array[4, 3], array[3, 8] = -50.0, 70.0
    result = stats.tensor_stats(array)
    finite = array[np.isfinite(array)].astype(np.float64)
    for name, q in stats.PERCENTILES.items():
        assert result.percentiles[name] == pytest.approx(np.percentile(finite, q), abs=1e-6)
    assert result.argmin == (4, 3) and result.argmax == (3, 8)
    assert result.minimum == -50.0 and result.maximum == 70.0


def test_first_occurrence_of_a_repeated_extreme_is_reported(monkeypatch):
    monkeypatch.setattr(stats, "CHUNK_ELEMENTS", 4)
    array = np.array([3, 1, 9, 1, 9, 0, 0, 9], np.int64)
    result = stats.tensor_stats(array)
    assert result.argmin == (5,) and result.argmax == (2,)


def test_uint64_extremes_stay_exact():
    array = np.array([2**64 - 1, 5, 2**64 - 2], np.uint64)
    result = stats.tensor_stats(array)
    assert result.maximum == 2**64 - 1 and result.argmax == (0,) and result.argmin == (1,)


def test_only_non_finite_values_have_no_percentiles(run_cli):
    result = run_cli("show", "[nan, inf]", "--json")
    (record,) = json.loads(result.stdout)
    assert "median" not in record and "argmin" not in record


def test_show_prints_and_jsons_the_new_statistics(run_cli):
    text = run_cli("show", "[[1.0, 5.0], [7.0, -2.0]]").stdout
    assert "median 3  p90 6.4  p95 6.7  p99 6.94" in text
    assert "min at [1, 1]  max at [1, 0]" in text
    (record,) = json.loads(run_cli("show", "[[1.0, 5.0], [7.0, -2.0]]", "--json").stdout)
    assert record["median"] == 3.0 and record["p99"] == pytest.approx(6.94)
    assert record["argmin"] == [1, 1] and record["argmax"] == [1, 0]
