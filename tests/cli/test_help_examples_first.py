"""A command's examples can be shown right after its summary, before the description and the
options (padconv_cli.cli.help_examples), and read back from the rendered help."""

from __future__ import annotations

import click
from click.testing import CliRunner

from padconv_cli.cli.help_examples import example_commands, examples_first, with_examples_first

EXAMPLES = """\b
Examples:
  padconv pad '[[1, 2]]' --pads 0 1
  padconv pad '[[1, 2]]' --pads 0 1 \\
      --mode edge
"""


def _command() -> click.Command:
    @examples_first(EXAMPLES)
    @click.command("pad")
    @click.option("--pads")
    def pad(pads: str) -> None:
        """Pad DATA as ONNX Pad does.

        A longer description that comes after the examples, long enough to be wrapped by
        click at the terminal's width.
        """

    return pad


def test_examples_come_after_the_summary_and_before_description_and_options():
    output = CliRunner().invoke(_command(), ["--help"], terminal_width=80).output
    summary = output.index("Pad DATA as ONNX Pad does.")
    examples = output.index("Examples:")
    assert summary < examples < output.index("A longer description") < output.index("Options:")
    assert "examples, long enough to be wrapped by click at the terminal's width." in " ".join(
        output.split())
    description = output[output.index("A longer"):output.index("Options:")]
    assert all("  " not in line.strip() for line in description.splitlines())


def test_the_rendered_examples_read_back_as_whole_commands():
    output = CliRunner().invoke(_command(), ["--help"], terminal_width=80).output
    assert example_commands(output) == ["padconv pad '[[1, 2]]' --pads 0 1",
                                        "padconv pad '[[1, 2]]' --pads 0 1 --mode edge"]


def test_a_help_of_one_paragraph_gets_the_examples_after_it():
    assert with_examples_first("Summary.", "\\b\nExamples:\n  padconv x\n") == (
        "Summary.\n\n\\b\nExamples:\n  padconv x\n")
