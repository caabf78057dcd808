"""``padconv verify``: replay documented examples and ONNX conformance cases (made for CI)."""

from __future__ import annotations

import sys

import click

from padconv_cli.cli import options
from padconv_cli.errors import InputError

EXIT_FAILED = 1

EXAMPLES = """\b
Examples:
  padconv verify                   # the built-in examples and ruling cases
  padconv verify -k pad_doc_reflect    # one case, side by side
  padconv verify --onnx-suite -k 'test_Conv*' --junit-xml report.xml
"""


@options.command("verify", "Run operator cases (built-in, ONNX suite, DIRs); compare.", EXAMPLES)
@click.argument("dirs", metavar="[DIR]...", nargs=-1)
@click.option("--onnx-suite", is_flag=True,
              help="Also run the conformance cases of padconv's operators shipped in the "
              "installed onnx package (node cases, pytorch-converted, pytorch-operator).")
@click.option("-k", "patterns", metavar="PATTERN", multiple=True,
              help="Only cases whose name contains PATTERN, or matches it as a glob when it has "
              "* ? or [ (case-insensitive; repeat for OR).")
@click.option("--list", "list_only", is_flag=True, help="List the selected cases, run nothing.")
@click.option("--json", "as_json", is_flag=True,
              help="Print one JSON object per case per line, then a summary object.")
@click.option("--junit-xml", metavar="FILE",
              help="Also write the results as JUnit XML to FILE (atomically).")
@options.shared("tolerance")
@options.shared("input")
def verify_command(dirs: tuple[str, ...], onnx_suite: bool, patterns: tuple[str, ...],
                   list_only: bool, as_json: bool, junit_xml: str | None, rtol: float | None,
                   atol: float | None) -> None:
    """Run cases of padconv's operators (Pad, Conv, ConvTranspose, ConvInteger, QLinearConv)
    through padconv and compare with the expected outputs.

    Without DIR: the built-in cases (the Pad and Conv examples of the ONNX operator docs, a
    few hand-computed ones, and one backend-test folder per ruling of the convolution family,
    whose expected outputs come from independent oracles). With DIR...: cases in the ONNX
    backend-test layout (model.onnx with one node of those operators,
    test_data_set_*/input_*.pb and output_*.pb), or folders of such cases. --onnx-suite adds
    the conformance cases of the installed onnx package.

    Every case goes through the same code as the operator's command ('padconv conv' ...). A
    model with other computing nodes is reported as unsupported (neither passed nor failed).

    One line per case (result, name, operator, output, max abs; more columns on wide
    terminals; case names always whole, as -k takes them); details of every case that did
    not pass, of every case with -v; a single case picked with -k (or shown with -v) is also
    shown side by side (inputs, expected, actual, difference).

    \b
    Comparison rule: shapes and dtypes must match exactly; integers, bools
    and strings must be equal; for floats every element needs
        |actual - expected| <= atol + rtol * |expected|
    NaN equals NaN only where both have NaN; +-inf must match exactly.

    \b
    Exit status: 0 every case that ran passed and at least one ran; 1 a case
    failed, or nothing was verified (every selected case unsupported); 2 bad
    usage.
    """
    from padconv_cli.verification import report
    from padconv_cli.verification.cases import matches

    cases = _collect_cases(dirs, onnx_suite)
    selected = [case for case in cases if matches(case.name, patterns)]
    if not selected:
        shown = " ".join(f"-k {p!r}" for p in patterns)
        raise InputError(f"no case matches {shown} (out of {len(cases)} cases; see --list)")
    if list_only:
        _print_list(selected, as_json)
        return
    from padconv_cli.verification.runner import FAILED, PASSED, run_cases

    results = run_cases(selected, rtol=rtol, atol=atol)
    if junit_xml is not None:
        report.write_atomically(junit_xml, report.junit_xml(results, options.TOLERANCE_FLAGS))
    if as_json:
        click.echo("\n".join(report.json_lines(results)))
    else:
        verbose, quiet = options.meta_flag("verbose"), options.meta_flag("quiet")
        side = len(selected) == 1 and (bool(patterns) or verbose) and not quiet
        _print_results(results, options.color_enabled(), verbose, quiet, side_by_side=side)
    sys.stdout.flush()
    if not any(result.status in (PASSED, FAILED) for result in results):
        click.echo(f"padconv verify: nothing was verified: none of the {len(results)} selected "
                   "cases ran (all unsupported)", err=True)
        click.get_current_context().exit(EXIT_FAILED)
    if any(result.status == FAILED for result in results):
        click.get_current_context().exit(EXIT_FAILED)


def _collect_cases(dirs: tuple[str, ...], onnx_suite: bool) -> list:
    """Built-in cases unless DIRs are given, then the suite's, then the DIRs' (in that order)."""
    from padconv_cli.verification import onnx_suite as suite_module
    from padconv_cli.verification.cases import builtin_cases

    policy = options.read_policy_of()
    collected = [] if dirs else builtin_cases() + suite_module.shipped_cases(policy)
    if onnx_suite:
        collected += suite_module.suite_cases(policy)
    return collected + [case for path in dirs
                        for case in suite_module.cases_from_user_dir(path, policy)]


STATUS_COLOURS = {"passed": "green", "failed": "red", "unsupported": "yellow"}


def _status_style(word: str, status: str) -> str:
    return options.styled(word, fg=STATUS_COLOURS[status], bold=status == "failed")


def _print_list(cases: list, as_json: bool) -> None:
    from padconv_cli.json_output import dumps
    from padconv_cli.verification import report

    if as_json:
        lines = [*(dumps(report.case_record(case)) for case in cases),
                 dumps({"type": "summary", "total": len(cases)})]
    else:
        lines = [*report.plain_case_list(cases), f"{len(cases)} cases"]
    click.echo("\n".join(lines))


def _print_results(results: list, colour: bool, verbose: int, quiet: bool,
                   side_by_side: bool = False) -> None:
    """One line per case, the details of every case that did not pass (every case with -v),
    the side-by-side view of a single case, then the summary line (last, for CI logs); -q
    keeps only what did not pass."""
    from padconv_cli.verification import report
    from padconv_cli.verification.runner import FAILED, PASSED, UNSUPPORTED, summary_line

    width = options.output_width()
    shown = [r for r in results if r.status != PASSED] if quiet else results
    styler = _status_style if colour else None
    lines = list(report.case_table(shown, width, styler)) if shown else []
    for result in shown:
        details = ([] if result.status == PASSED
                   else report.failure_details(result, options.TOLERANCE_FLAGS))
        if verbose:
            details = (details or [result.case.name]) + report.verbose_details(result)[1:]
        if details:
            lines += ["", *report.wrap_lines(details, width)]
    if side_by_side and results[0].status != UNSUPPORTED:  # the case in full, its command first
        from padconv_cli.cli.sample_commands import command_line
        from padconv_cli.verification.samples import has_command

        case = results[0].case
        command = command_line(case) if case.source == "builtin" and has_command(case) else None
        lines += ["", *report.side_by_side(case, results[0], width, command)]
    summary = summary_line(results)
    if colour:
        failed = any(result.status == FAILED for result in results)
        summary = click.style(summary, fg="red" if failed else "green", bold=True)
    click.echo("\n".join([*lines, "", summary]))
