"""``padconv audit MODEL.onnx [INPUT...]``: every node of the operators padconv
implements (Pad, Conv, ConvTranspose, ConvInteger, QLinearConv), checked."""

from __future__ import annotations

import time

import click

from padconv_cli.cli import options
from padconv_cli.errors import InputError
from padconv_cli.ops import OPERATORS

EXIT_OUTSIDE = 1
RUNTIMES = ("onnxruntime", "onnx.reference")
PROGRESS_AFTER_SECONDS = 1.0

EXAMPLES = """\b
Examples:
  padconv convert '[[[[0, 1, 2], [3, 4, 5]]]]' x.npy --dtype float32
  padconv conv x.npy '[[[[1, 1], [1, 1]]]]' --dtype float32 \\
      --emit-onnx m.onnx -o y.npy                     # a model to audit
  padconv audit m.onnx
  padconv audit m.onnx --seed 7 --runtime onnx.reference --json
  padconv audit m.onnx X=x.npy --junit-xml audit.xml
  padconv audit m.onnx --save cases/ && padconv verify cases/
"""


@options.command("audit", "Check every node padconv implements in a model.", EXAMPLES)
@click.argument("model", metavar="MODEL.onnx", shell_complete=options.complete_path)
@click.argument("inputs", metavar="[INPUT]...", nargs=-1, shell_complete=options.complete_path)
@click.option("--runtime", type=click.Choice(RUNTIMES),
              help="Runtime that runs the model (default: onnxruntime when installed, else "
              "onnx.reference).")
@click.option("--seed", type=int, default=0, show_default=True,
              help="Seed of the random inputs (inputs not given as files).")
@click.option("--dim", "dims", metavar="NAME=VALUE", multiple=True,
              help="Size of the input dimensions named NAME (repeatable), e.g. --dim batch=2, "
              "--dim ?=48. Unknown dims not set take defaults (batch 1, channels as the first "
              "Conv takes, spatial 64) and the input line says so.")
@click.option("--json", "as_json", is_flag=True, help="Print the audit as one JSON object.")
@click.option("--junit-xml", metavar="FILE", shell_complete=options.complete_path,
              help="Also write the audit as JUnit XML (one test case per node).")
@click.option("--outputs", "dumped", metavar="FILE|DIR", shell_complete=options.complete_path,
              help="Judge another runtime's own tensors instead of running the model: "
              "polygraphy's --save-outputs .json (with --onnx-outputs/--trt-outputs mark all; "
              "FILE.json:RUNNER picks a runner) or a folder of .npy/.pb named by tensor. Each "
              "Pad/Conv node is recomputed from that runtime's inputs for it; the first node "
              "outside its bound is named. The model's inputs come from INPUT.")
@click.option("--save", "save_dir", metavar="DIR", shell_complete=options.complete_path,
              help="Also write every checked node as an ONNX backend-test case folder in DIR "
              "(the node alone, its inputs from the run, padconv's output): padconv verify "
              "DIR replays them.")
def audit_command(model: str, inputs: tuple[str, ...], runtime: str | None, seed: int,
                  dims: tuple[str, ...], as_json: bool, junit_xml: str | None,
                  dumped: str | None, save_dir: str | None) -> None:
    """Run MODEL once, capture the inputs and output of every Pad, Conv, ConvTranspose,
    ConvInteger and QLinearConv node, recompute each node with padconv and compare: Pad and
    the integer operators exactly, Conv and ConvTranspose within the dot-product error bound
    |a-b| <= atol + rtol*|ref| + c*n*eps*sum(|x|*|w|). When they differ a float64 (or
    exact) recomputation says which side is right.

    INPUT is NAME=FILE or FILE (the model's inputs in order), any tensor source padconv
    reads; inputs not given are random from the declared types and shapes (--seed, --dim).
    With --outputs, nothing runs: another runtime's dumped tensors are judged node by node.

    Exit 0 when every node was checked and is within the bound, 1 when one is not (or the
    run stopped before it, or nothing was checked: no node of an operator padconv
    implements), 2 for bad input.
    """
    from padconv_cli.audit import audit_model
    from padconv_cli.audit.inputs import parse_dims
    from padconv_cli.audit.report import junit_xml as junit_bytes
    from padconv_cli.audit.report import report_record, table_lines

    sources = (model, *(item.partition("=")[2] or item for item in inputs))
    options.refuse_output_onto_inputs("--junit-xml", junit_xml, sources)
    dim_values = parse_dims(dims)
    if dumped is not None:
        report = _audit_dumped(model, dumped, inputs, runtime, dims, save_dir is not None)
    else:
        with _Progress(enabled=not options.meta_flag("quiet")) as progress:
            report = audit_model(model, inputs, runtime=runtime, seed=seed, dims=dim_values,
                                 progress=progress.update, keep_arrays=save_dir is not None)
        _refuse_chosen_sizes_that_stopped(report)
    saved = []
    if save_dir is not None:
        from padconv_cli.audit.save import save_cases

        saved = save_cases(report, save_dir)
    if junit_xml is not None:
        from padconv_cli.verification.report import write_atomically

        write_atomically(junit_xml, junit_bytes(report))
    if as_json:
        record = report_record(report)
        if save_dir is not None:
            record["saved"] = [str(path) for path in saved]
        options.print_json(record)
    else:
        click.echo("\n".join(table_lines(report, options.output_width())))
        if save_dir is not None:
            click.echo(f"saved {len(saved)} case folder{'s' * (len(saved) != 1)} in "
                       f"{save_dir} (padconv verify {save_dir} replays them)")
    if report.checked == 0:
        click.echo(f"padconv audit: nothing was checked: {_unchecked_reason(report)}", err=True)
    if not report.passed:
        raise click.exceptions.Exit(EXIT_OUTSIDE)


def _unchecked_reason(report) -> str:
    """Why no node was checked: the model has none padconv implements, or none was judged."""
    if not report.nodes:
        return f"{report.model} has no node padconv implements ({', '.join(OPERATORS)})"
    return f"none of its {len(report.nodes)} node(s) was judged (see the table)"


def _audit_dumped(model: str, dumped: str, inputs: tuple[str, ...], runtime: str | None,
                  dims: tuple[str, ...], keep: bool):
    """``--outputs``: nothing runs, so --runtime and --dim have no meaning with it."""
    from padconv_cli.audit.dumped import audit_dumped

    if runtime is not None or dims:
        raise click.UsageError(f"{'--runtime' if runtime else '--dim'} runs the model; "
                               "--outputs judges tensors another runtime dumped")
    return audit_dumped(model, dumped, inputs, keep_arrays=keep)


def _refuse_chosen_sizes_that_stopped(report) -> None:
    """Sizes audit chose for unknown dims that stop the model before a node are a problem of
    the inputs (exit 2), not a node outside its bound."""
    from padconv_cli.audit.inputs import chose_dims
    from padconv_cli.audit.judge import NOT_RUN

    stopped = [node for node in report.nodes if node.status == NOT_RUN]
    if not stopped or not chose_dims(report.inputs):
        return
    chosen = ", ".join(f"{name} {origin.split(' (')[0].removeprefix('random ')}"
                       for name, origin in report.inputs.items() if origin.startswith("random"))
    raise InputError(f"{report.model}: the model does not run with the sizes chosen for its "
                     f"unknown dims ({chosen}): {stopped[0].detail}; give the inputs or set "
                     "their dims with --dim NAME=VALUE", source=report.model)


class _Progress:
    """A transient bar on stderr (a terminal only) once the audit has run for a second."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled and options.is_terminal(err=True)
        self.started, self.bar, self.task = time.monotonic(), None, None

    def __enter__(self) -> _Progress:
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self.bar is not None:
            self.bar.stop()

    def update(self, done: int, total: int, label: str) -> None:
        """Record that ``done`` of ``total`` nodes are judged (``label`` the last one)."""
        waiting = self.bar is None and time.monotonic() - self.started < PROGRESS_AFTER_SECONDS
        if not self.enabled or waiting:
            return
        if self.bar is None:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

            self.bar = Progress(TextColumn("audit"), BarColumn(), MofNCompleteColumn(),
                                TextColumn("{task.description}"),
                                console=Console(stderr=True), transient=True)
            self.bar.start()
            self.task = self.bar.add_task(label, total=total)
        self.bar.update(self.task, completed=done, description=label[:30])
