"""``padconv audit MODEL.onnx --outputs FILE|DIR``: judging another runtime's own tensors.

The dump: polygraphy's results file (``--save-outputs F.json ... mark all``; ``F.json:RUNNER``
picks a runner; the first iteration, also of ``--save-outputs DIR``'s files) or a folder of
``.npy``/``.pb`` files named by tensor (a ``.pb`` by its TensorProto name, else the file name
without suffix, with ``_`` for characters a file name cannot hold).  The model's inputs come
from INPUT (polygraphy's ``--save-inputs`` file, or ``NAME=FILE``).

Nothing is run: each main-graph node is recomputed from *that runtime's* values of its inputs
and its output judged as :mod:`.judge` does; the first node outside its bound is named.  A
node whose output or inputs were not dumped is ``not dumped``; a dump of none is a bad input.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from padconv_cli.audit.judge import OUTSIDE, AuditReport, NodeAudit, NodeCapture, judge_node
from padconv_cli.errors import InputError

NOT_DUMPED = "not dumped"
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


def file_key(name: str) -> str:
    """A tensor name as a file name may spell it: characters other than letters, digits,
    ``_ . -`` written as ``_``."""
    return _UNSAFE.sub("_", name)


def first_iteration_file(folder: str) -> str | None:
    """The first of polygraphy's per-iteration files (``--save-outputs DIR`` writes
    ``0000000000.json``...) in ``folder``, when it holds no .npy/.pb file; else None."""
    names = sorted(os.listdir(folder))
    if any(name.lower().endswith((".npy", ".pb")) for name in names):
        return None
    iterations = [name for name in names if name.lower().endswith(".json")]
    return os.path.join(folder, iterations[0]) if iterations else None


def dumped_tensors(source: str) -> tuple[str, dict[str, np.ndarray]]:
    """(who produced them, tensor name or file key -> array) of ``--outputs``."""
    if os.path.isdir(source):
        first = first_iteration_file(source)
        if first is None:
            return f"the tensors in {source}", _folder_tensors(Path(source))
        source = first
    from padconv_cli.tensorio.files import printable
    from padconv_cli.tensorio.polygraphy_json import runner_outputs, split_json_source

    split = split_json_source(source)
    if split is None:
        raise InputError(f"{printable(source)}: neither polygraphy's results .json nor a "
                         "folder of .npy/.pb files", param="outputs")
    path, runner = split
    label = printable(path)
    name, iterations, arrays = runner_outputs(path, runner, label)
    more = f", iteration 0 of {iterations}" if iterations > 1 else ""
    return f"{name} ({label}{more})", arrays


def _folder_tensors(folder: Path) -> dict[str, np.ndarray]:
    from padconv_cli.tensor_sources import read_named_tensor

    tensors: dict[str, np.ndarray] = {}
    for path in sorted(folder.iterdir()):
        if path.suffix.lower() not in (".npy", ".pb") or not path.is_file():
            continue
        stored, array = read_named_tensor(str(path))
        tensors[file_key(path.stem)] = array
        if stored and path.suffix.lower() == ".pb":
            tensors[stored] = array
    if not tensors:
        raise InputError(f"{folder}: no .npy or .pb files to judge", param="outputs")
    return tensors


def _lookup(tensors: dict[str, np.ndarray], name: str) -> np.ndarray | None:
    found = tensors.get(name) if name else None
    return tensors.get(file_key(name)) if found is None and name else found


def _given_inputs(model, given: Sequence[str], path: str
                  ) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """(tensor name -> array, tensor name -> source) of the INPUT words: a polygraphy inputs
    .json gives every array by its name; ``NAME=SOURCE`` names one; other words are the
    model's inputs in order."""
    from padconv_cli.audit.inputs import declared_inputs
    from padconv_cli.tensor_sources import read_tensor
    from padconv_cli.tensorio.polygraphy_json import read_json_tensors, split_json_source

    values: dict[str, np.ndarray] = {}
    origins: dict[str, str] = {}
    names = [entry.name for entry in declared_inputs(model, path)]
    position = 0
    for word in given:
        word = (os.path.isdir(word) and first_iteration_file(word)) or word
        split = split_json_source(word)
        if split is not None and split[1] is None:
            for name, array in read_json_tensors(split[0], word):
                values[name], origins[name] = array, f"{word}:{name}"
            continue
        name, equal, source = word.partition("=")
        if not equal or os.path.lexists(word):
            while position < len(names) and names[position] in values:
                position += 1
            if position >= len(names):
                raise InputError(f"{path}: {word!r} is one input too many", source=path)
            name, source = names[position], word
        values[name], origins[name] = read_tensor(source), source
    return values, origins


def audit_dumped(path: str, outputs: str, given: Sequence[str] = (),
                 keep_arrays: bool = False) -> AuditReport:
    """Judge every main-graph Pad/Conv node of the model at ``path`` on the tensors another
    runtime dumped (module rules)."""
    from padconv_cli.models import load_model, model_nodes, model_opset

    model = load_model(path)
    producer, tensors = dumped_tensors(outputs)
    given_values, origins = _given_inputs(model, given, path)
    tensors = {**tensors, **given_values}
    report = AuditReport(path, producer, model_opset(model, path), origins)
    judged = 0
    for origin in model_nodes(path):
        if origin.graph != "main" or not origin.node.output:
            continue
        audit = _judge(origin, tensors, producer, keep_arrays)
        judged += audit.status != NOT_DUMPED
        report.nodes.append(audit)
    if not judged:
        raise InputError(f"{outputs}: holds no Pad/Conv node's output and inputs of {path} "
                         "(have the runtime dump every tensor, as polygraphy's 'mark all' "
                         "does; give the model's inputs as INPUT)",
                         param="outputs")
    first = next((node for node in report.nodes if node.status == OUTSIDE), None)
    report.notes.append(f"first node outside the bound: {first.label}" if first else
                        f"every judged node is within the bound ({judged} of "
                        f"{len(report.nodes)} judged)")
    return report


def _judge(origin, tensors: dict[str, np.ndarray], producer: str, keep: bool) -> NodeAudit:
    node = origin.node
    theirs = _lookup(tensors, node.output[0])
    inputs = [_lookup(tensors, name) for name in node.input]
    missing = [name for index, (name, value) in enumerate(zip(node.input, inputs, strict=True))
               if name and value is None and origin.constant(index) is None]
    if theirs is None or missing:
        absent = ", ".join(repr(n) for n in ([node.output[0]] if theirs is None else [])
                           + missing)
        return NodeAudit(origin.label, origin.operator, NOT_DUMPED,
                         detail=f"not in the dump: {absent}")
    captured = NodeCapture(inputs, theirs, runtime=producer)
    return judge_node(origin, captured, "main", keep)
