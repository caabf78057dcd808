"""``padconv compare``: are two tensors equal within tolerance? Exit 0 yes, 1 no (for scripts)."""

from __future__ import annotations

import json

import click

from padconv_cli.cli.main import CONTEXT_SETTINGS
from padconv_cli.cli.model_options import complete_path
from padconv_cli.cli.options import dtype_option, tolerance_options

EXIT_DIFFERENT = 1

EXAMPLES = """\b
Examples:
  padconv compare expected.npy actual.npy
  padconv compare y_ref.pb y.npy --rtol 1e-4 --atol 1e-6 --json
  padconv conv x.npy w.npy | padconv compare y_ref.npy - && echo same
"""


@click.command(
    "compare",
    context_settings=CONTEXT_SETTINGS,
    epilog=EXAMPLES,
    short_help="Are two tensors equal within tolerance? Exit 0 yes, 1 no.",
)
@click.argument("expected", metavar="A", shell_complete=complete_path)
@click.argument("actual", metavar="B", shell_complete=complete_path)
@tolerance_options
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON object.")
@dtype_option
def compare_command(
    expected: str,
    actual: str,
    rtol: float | None,
    atol: float | None,
    as_json: bool,
    dtype: str | None,
) -> None:
    """Compare tensor B with tensor A by padconv verify's rule; exit 0 if they match, 1 if not.

    Shapes and dtypes must be equal; integers, bools and strings exactly; floats must satisfy
    |B - A| <= atol + rtol * |A| (A is the reference), NaN matching only NaN. A and B are files
    (.npy, .npz[:NAME], .pb, MODEL.onnx:NAME), - for stdin (one of them), or inline literals.
    """
    from padconv_cli.tensorio import read_tensor
    from padconv_cli.verification.compare import compare_arrays

    if expected == "-" and actual == "-":
        raise click.UsageError("only one of A and B can be - (stdin)")
    reference = read_tensor(expected, dtype=dtype)
    candidate = read_tensor(actual, dtype=dtype)
    comparison = compare_arrays(reference, candidate, rtol=rtol, atol=atol)
    if as_json:
        record = _record(comparison, (expected, reference), (actual, candidate))
        click.echo(json.dumps(record, indent=2, ensure_ascii=False))
    else:
        click.echo("\n".join(_lines(comparison, (expected, reference), (actual, candidate))))
    if not comparison.passed:
        raise click.exceptions.Exit(EXIT_DIFFERENT)


def _tensor_text(source: str, array) -> str:
    from padconv_cli.dtypes import dtype_name

    return f"{source}: {dtype_name(array.dtype)}[{', '.join(str(d) for d in array.shape)}]"


def _lines(comparison, first: tuple, second: tuple) -> list[str]:
    """Verdict, the two tensors, the error sizes, first mismatches and the passing tolerances."""
    from padconv_cli.verification.compare import display_value
    from padconv_cli.verification.report import format_error, tolerance_hint

    verdict = "PASS" if comparison.passed else "FAIL"
    lines = [f"{verdict} (rtol={comparison.rtol:g}, atol={comparison.atol:g})"]
    lines.append(f"  A {_tensor_text(*first)}")
    lines.append(f"  B {_tensor_text(*second)}")
    if comparison.max_abs is not None:
        lines.append(
            f"  max |B - A| {format_error(comparison.max_abs)}, "
            f"max |B - A| / |A| {format_error(comparison.max_rel)}"
        )
    if comparison.passed:
        return lines
    lines.append(f"  {comparison.reason}")
    for index, value_a, value_b in comparison.mismatches:
        lines.append(f"  at {list(index)}: A {display_value(value_a)}, B {display_value(value_b)}")
    hidden = comparison.mismatch_count - len(comparison.mismatches)
    if hidden > 0:
        lines.append(f"  ... and {hidden} more")
    lines.append("  " + tolerance_hint(comparison))
    return lines


def _record(comparison, first: tuple, second: tuple) -> dict:
    """The comparison as a strict-JSON object."""
    from padconv_cli.dtypes import dtype_name
    from padconv_cli.verification.compare import plain_value
    from padconv_cli.verification.report import json_safe

    def tensor(source: str, array) -> dict:
        return {"source": source, "dtype": dtype_name(array.dtype), "shape": list(array.shape)}

    record = {
        "passed": comparison.passed,
        "reason": comparison.reason,
        "a": tensor(*first),
        "b": tensor(*second),
        "rtol": comparison.rtol,
        "atol": comparison.atol,
        "max_abs": comparison.max_abs,
        "max_rel": comparison.max_rel,
        "mismatch_count": comparison.mismatch_count,
        "mismatches": [
            {"index": list(index), "a": json_safe(plain_value(a)), "b": json_safe(plain_value(b))}
            for index, a, b in comparison.mismatches
        ],
        "min_atol": comparison.min_atol,
        "min_rtol": comparison.min_rtol,
    }
    return {key: json_safe(value) for key, value in record.items()}
