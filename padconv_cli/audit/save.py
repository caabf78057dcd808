"""``audit --save DIR``: every checked node as an ONNX backend-test case folder.

Each node padconv computed becomes ``DIR/test_<node name>`` (see
:mod:`padconv_cli.verification.case_folder`): the node alone at the model's opset, the inputs
the run gave it, and padconv's output, the one audit checked against the runtime, as the
expected output.  ``padconv verify DIR`` replays them: the bridge from a real model to CI
conformance data.  Nodes padconv did not compute (not reached, refused) are not written.
"""

from __future__ import annotations

from pathlib import Path

from padconv_cli.audit.judge import AuditReport


def save_cases(report: AuditReport, folder: str) -> list[Path]:
    """Write a case folder for every node whose verdict kept its arrays; their paths."""
    from padconv_cli.verification.case_folder import case_folder_name, write_case_folder

    written, used = [], set()
    for index, node in enumerate(report.nodes):
        if node.arrays is None:
            continue
        proto, opset, inputs, output = node.arrays
        if any(name and array is None for name, array in zip(proto.input, inputs,
                                                               strict=False)):
            continue
        name = case_folder_name(node.label, index)
        if name.lower() in used:
            name = f"{name}_{index}"
        used.add(name.lower())
        written.append(write_case_folder(folder, name, proto, inputs, output, opset))
    return written
