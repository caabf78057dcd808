"""Start-up of a small command (issue #29): modules that would each add 1-2 ms to every run
(creating dataclasses; shutil with its compression modules; difflib) stay unloaded."""

from __future__ import annotations

import ast
import subprocess
import sys

import numpy as np

AVOIDED = ("dataclasses", "difflib", "shutil")


def test_a_conv_command_loads_no_dataclasses_shutil_or_difflib(tmp_path):
    np.save(tmp_path / "x.npy", np.ones((1, 3, 8, 8), np.float32))
    np.save(tmp_path / "w.npy", np.ones((4, 3, 3, 3), np.float32))
    argv = ["padconv", "conv", str(tmp_path / "x.npy"), str(tmp_path / "w.npy"),
            "--output", str(tmp_path / "y.npy")]
    code = ("import sys\nimport numpy, click\nbefore = set(sys.modules)\n"
            "from padconv_cli.cli.main import main\n"
            f"sys.argv = {argv!r}\n"
            "try:\n    status = main()\nexcept SystemExit as stop:\n    status = stop.code\n"
            "assert status in (0, None), status\n"
            f"print(sorted(set({AVOIDED!r}) & (set(sys.modules) - before)))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert ast.literal_eval(done.stdout.strip()) == []
    assert np.load(tmp_path / "y.npy").shape == (1, 4, 6, 6)
