"""``padconv verify``: replay documented examples and ONNX conformance cases (made for CI)."""

from __future__ import annotations

import sys

import click

from padconv_cli.cli.input_options import input_options
from padconv_cli.cli.main import CONTEXT_SETTINGS
from padconv_cli.cli.options import env_flag, tolerance_options

EXIT_FAILED = 1

EXAMPLES = """\b
Examples:
  padconv verify                               # the built-in Pad and Conv examples
  padconv verify --onnx-suite -k 'test_Conv*' --junit-xml report.xml
  padconv verify my_cases/test_my_pad --atol 1e-4 --json
"""


@click.command(
    "verify",
    context_settings=CONTEXT_SETTINGS,
    epilog=EXAMPLES,
    short_help="Run Pad and Conv cases (built-in, ONNX suite, or DIRs) and compare.",
)
@click.argument("dirs", metavar="[DIR]...", nargs=-1)
@click.option(
    "--onnx-suite",
    is_flag=True,
    help="Also run the Pad and Conv conformance cases shipped in the installed onnx package "
    "(node cases, pytorch-converted, pytorch-operator).",
)
@click.option(
    "-k",
    "patterns",
    metavar="PATTERN",
    multiple=True,
    help="Only cases whose name contains PATTERN, or matches it as a glob when it has * ? or "
    "[ (case-insensitive; repeat for OR).",
)
@click.option("--list", "list_only", is_flag=True, help="List the selected cases, run nothing.")
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print one JSON object per case per line, then a summary object.",
)
@click.option(
    "--junit-xml",
    metavar="FILE",
    default=None,
    help="Also write the results as JUnit XML to FILE (atomically).",
)
@tolerance_options
@click.option(
    "--no-color",
    is_flag=True,
    help="Plain text output (also when NO_COLOR is set or stdout is not a terminal).",
)
@input_options
def verify_command(
    dirs: tuple[str, ...],
    onnx_suite: bool,
    patterns: tuple[str, ...],
    list_only: bool,
    as_json: bool,
    junit_xml: str | None,
    rtol: float | None,
    atol: float | None,
    no_color: bool,
) -> None:
    """Run Pad and Conv cases through padconv and compare with the expected outputs.

    Without DIR: the built-in cases (the Pad and Conv examples of the ONNX operator docs and a
    few hand-computed ones). With DIR...: cases in the ONNX backend-test layout (model.onnx
    with one Pad or Conv node, test_data_set_*/input_*.pb and output_*.pb), or folders of
    such cases. --onnx-suite adds the conformance cases of the installed onnx package.

    Every case goes through the same code as 'padconv pad' and 'padconv conv'. A model with
    other computing nodes is reported as unsupported (neither passed nor failed).

    \b
    Comparison rule: shapes and dtypes must match exactly; integers, bools and strings must
    be equal; for floats every element needs
        |actual - expected| <= atol + rtol * |expected|
    NaN equals NaN only where both have NaN; +-inf must match exactly.

    \b
    Exit status: 0 every case that ran passed and at least one ran; 1 a case failed, or
    nothing was verified (every selected case unsupported); 2 bad usage.
    """
    from padconv_cli.errors import InputError
    from padconv_cli.verification.cases import matches

    cases = _collect_cases(dirs, onnx_suite)
    selected = [case for case in cases if matches(case.name, patterns)]
    if not selected:
        shown = " ".join(f"-k {p!r}" for p in patterns)
        raise InputError(f"no case matches {shown} (out of {len(cases)} cases; see --list)")
    if list_only:
        _print_list(selected, as_json)
        return
    from padconv_cli.verification.runner import FAILED, run_cases

    results = run_cases(selected, rtol=rtol, atol=atol)
    if junit_xml is not None:
        from padconv_cli.verification.report import junit_xml as render_junit
        from padconv_cli.verification.report import write_atomically

        write_atomically(junit_xml, render_junit(results))
    if as_json:
        _print_json(results)
    elif _use_rich(no_color):
        _print_rich(results)
    else:
        _print_plain(results)
    sys.stdout.flush()
    if not _ran_any(results):
        click.echo(
            f"padconv verify: nothing was verified: none of the {len(results)} selected cases "
            "ran (all unsupported)",
            err=True,
        )
        click.get_current_context().exit(EXIT_FAILED)
    if any(result.status == FAILED for result in results):
        click.get_current_context().exit(EXIT_FAILED)


def _ran_any(results: list) -> bool:
    """True when at least one case was compared (passed + failed > 0)."""
    from padconv_cli.verification.runner import FAILED, PASSED

    return any(result.status in (PASSED, FAILED) for result in results)


def _collect_cases(dirs: tuple[str, ...], onnx_suite: bool) -> list:
    """Built-in cases unless DIRs are given, then the suite's, then the DIRs' (in that order)."""
    from padconv_cli.verification.cases import builtin_cases

    if not dirs and not onnx_suite:
        return builtin_cases()
    from padconv_cli.verification import onnx_suite as suite_module

    dir_cases = [case for path in dirs for case in suite_module.cases_from_user_dir(path)]
    collected = [] if dirs else builtin_cases()
    if onnx_suite:
        collected += suite_module.suite_cases()
    return collected + dir_cases


def _use_rich(no_color: bool) -> bool:
    """Rich output only on a terminal, without --no-color and without NO_COLOR."""
    if no_color or env_flag("NO_COLOR"):
        return False
    from padconv_cli.cli.output import stdout_is_terminal

    return stdout_is_terminal()


def _print_list(cases: list, as_json: bool) -> None:
    from padconv_cli.verification import report

    if as_json:
        import json

        for case in cases:
            click.echo(json.dumps(report.case_record(case)))
        click.echo(json.dumps({"type": "summary", "total": len(cases)}))
        return
    for line in report.plain_case_list(cases):
        click.echo(line)
    click.echo(f"{len(cases)} cases")


def _print_json(results: list) -> None:
    from padconv_cli.verification.report import json_lines

    for line in json_lines(results):
        click.echo(line)


def _print_plain(results: list) -> None:
    from padconv_cli.verification.report import failure_details, plain_table
    from padconv_cli.verification.runner import PASSED, summary_line

    for line in plain_table(results):
        click.echo(line)
    for result in results:
        if result.status != PASSED:
            click.echo("")
            for line in failure_details(result):
                click.echo(line)
    click.echo("")
    click.echo(summary_line(results))


def _print_rich(results: list) -> None:
    from rich.console import Console
    from rich.markup import escape

    from padconv_cli.verification.report import failure_details, rich_table
    from padconv_cli.verification.runner import FAILED, PASSED, summary_line

    console = Console(highlight=False)
    console.print(rich_table(results))
    for result in results:
        if result.status != PASSED:
            style = "red" if result.status == FAILED else "yellow"
            console.print()
            lines = failure_details(result)
            console.print(f"[{style}]{escape(lines[0])}[/]")
            for line in lines[1:]:
                console.print(escape(line))
    failed = any(result.status == FAILED for result in results)
    console.print()
    console.print(f"[{'bold red' if failed else 'bold green'}]{summary_line(results)}[/]")
