"""``audit --save DIR``: each node padconv computed as a backend-test case folder
``DIR/test_<node name>`` (``verification.onnx_suite.write_case_folder``): the node alone at
the model's opset, the inputs the run gave it and padconv's output as the expected one, which
``padconv verify DIR`` replays.  Nodes padconv did not compute are not written.
"""

from __future__ import annotations

from pathlib import Path

from padconv_cli.audit.judge import AuditReport


def save_cases(report: AuditReport, folder: str) -> list[Path]:
    """Write a case folder for every node whose verdict kept its arrays; their paths."""
    from padconv_cli.verification.onnx_suite import case_folder_name, write_case_folder

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
