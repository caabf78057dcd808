"""Running a verification case: node -> kernel call (onnx_nodes) -> comparison."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from padconv_cli.errors import PadconvError
from padconv_cli.verification.cases import Case
from padconv_cli.verification.compare import Comparison

PASSED, FAILED, UNSUPPORTED = "passed", "failed", "unsupported"


@dataclass
class CaseResult:
    """Outcome of one case. ``error`` is set when the kernel refused or crashed (a failure)."""

    case: Case
    status: str
    operator: str = ""
    attributes: str = ""
    output_shape: tuple[int, ...] | None = None
    output_dtype: str = ""
    comparison: Comparison | None = None
    error: str = ""
    seconds: float = 0.0
    actual: np.ndarray | None = None

    @property
    def reason(self) -> str:
        """One line: why the case failed or is unsupported ("" when it passed)."""
        if self.status == UNSUPPORTED:
            return self.case.unsupported
        if self.error:
            return self.error
        return self.comparison.reason if self.comparison is not None else ""


def run_case(case: Case, *, rtol: float | None = None, atol: float | None = None) -> CaseResult:
    """Run ``case`` through the same kernels as ``padconv pad``/``padconv conv`` and compare
    the result with the expected output (rule: :func:`compare_arrays`; Conv cases add the
    dot-product error bound of :mod:`padconv_cli.kernels.conv_bound`)."""
    from padconv_cli.dtypes import dtype_name
    from padconv_cli.onnx_nodes import kernel_call
    from padconv_cli.ops import compute, error_bound
    from padconv_cli.verification.compare import compare_with_peer

    if case.unsupported:
        return CaseResult(case, UNSUPPORTED, operator=case.op)
    started = time.perf_counter()
    result = CaseResult(case, FAILED, operator=case.op)
    try:
        call = kernel_call(case.op, case.attributes, case.inputs, opset=case.opset)
        result.operator, result.attributes = call.operator, call.describe()
        actual = np.asarray(compute(call))
    except PadconvError as exc:
        result.error = f"kernel refused the case: {exc}"
    except Exception as exc:  # a kernel bug must show up as a failed case, not end the run
        result.error = f"kernel crashed: {type(exc).__name__}: {exc}"
    else:
        result.output_shape, result.output_dtype = tuple(actual.shape), dtype_name(actual.dtype)
        result.actual = actual
        # as --check compares: the error bound where there is one, else exactly
        result.comparison = compare_with_peer(case.expected[0], actual, error_bound(call),
                                              rtol, atol)
        result.status = PASSED if result.comparison.passed else FAILED
    result.seconds = time.perf_counter() - started
    return result


def run_cases(
    cases: list[Case], *, rtol: float | None = None, atol: float | None = None
) -> list[CaseResult]:
    """Run every case in order."""
    return [run_case(case, rtol=rtol, atol=atol) for case in cases]


def summary_counts(results: list[CaseResult]) -> dict[str, int]:
    """Number of passed, failed and unsupported results."""
    return {status: sum(r.status == status for r in results)
            for status in (PASSED, FAILED, UNSUPPORTED)}


def summary_line(results: list[CaseResult]) -> str:
    """``N passed, M failed`` plus ``, K unsupported`` when K > 0."""
    counts = summary_counts(results)
    line = f"{counts[PASSED]} passed, {counts[FAILED]} failed"
    if counts[UNSUPPORTED]:
        line += f", {counts[UNSUPPORTED]} unsupported"
    return line
