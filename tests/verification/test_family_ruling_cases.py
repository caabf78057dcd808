"""padconv's own cases of the convolution family's rulings: backend-test folders shipped as
package data, one per ruling, current with the independent oracles, and run by ``padconv
verify`` without arguments."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from padconv_cli.kernels.family_rulings import RULINGS
from padconv_cli.verification.onnx_suite import shipped_cases

REPO = Path(__file__).resolve().parents[2]


def test_every_ruling_is_applied_by_a_shipped_case():
    from padconv_cli.onnx_nodes import kernel_call
    from padconv_cli.ops import plan_call

    applied = set()
    for case in shipped_cases():
        call = kernel_call(case.op, case.attributes, case.inputs, opset=case.opset)
        applied.update(plan_call(call).rulings)
    assert applied >= set(RULINGS)


def test_shipped_cases_cover_the_three_operators():
    assert {case.op for case in shipped_cases()} == {"ConvTranspose", "ConvInteger",
                                                     "QLinearConv"}


def test_verify_without_arguments_runs_and_passes_them(run_cli):
    result = run_cli("verify", "--json")
    assert result.exit_code == 0, result.stdout[-2000:]
    records = [json.loads(line) for line in result.stdout.splitlines()]
    family = [r for r in records[:-1] if r["name"].startswith("test_fam_")]
    assert len(family) == len(shipped_cases())
    assert all(r["status"] == "passed" for r in family)


def test_shipped_cases_are_current_with_the_oracles():
    done = subprocess.run([sys.executable, "scripts/make_family_cases.py", "--check"],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
