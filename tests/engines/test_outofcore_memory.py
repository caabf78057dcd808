"""Peak resident memory of the tiled engine stays under --memory-limit for inputs several times
larger, and the results are right.

Each run happens in a fresh interpreter: the child resets its peak-RSS counter
(``/proc/self/clear_refs``) right before the tiled call, and reports the peak (``VmHWM``)
minus the resident size just before the call (the interpreter and its imports).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from padconv_cli.kernels.conv import conv
from padconv_cli.kernels.pad import pad

LIMIT = 16 * 2**20
INPUT_SHAPE = (1, 2, 2048, 4096)  # float32: 64 MiB, four times the limit

pytestmark = pytest.mark.skipif(
    not os.path.exists("/proc/self/clear_refs"), reason="needs Linux /proc peak-RSS counters"
)

CHILD = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    from padconv_cli.outofcore.conv_tiles import tiled_conv
    from padconv_cli.outofcore.pad_tiles import tiled_pad

    operator, source, target, weights = sys.argv[1:5]
    w = np.load(weights) if operator == "conv" else None

    def status(field):
        with open("/proc/self/status") as lines:
            for line in lines:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
        raise RuntimeError(field)

    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")  # reset the peak RSS to the current RSS
    before = status("VmRSS")
    if operator == "conv":
        result = tiled_conv(source, w, None, target, memory_limit={limit}, pads=[1, 2, 1, 0])
    else:
        result = tiled_pad(source, target, [0, 0, 3, 2, 0, 0, 1, 5], mode="reflect",
                           memory_limit={limit})
    print(json.dumps({{"growth": status("VmHWM") - before, "tiles": result.tiles}}))
    """
).format(limit=LIMIT)


@pytest.fixture(scope="module")
def big_input(tmp_path_factory):
    """A 64 MiB float32 .npy written in slabs (the test process never holds it whole)."""
    folder = tmp_path_factory.mktemp("big")
    path = folder / "x.npy"
    array = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=INPUT_SHAPE)
    rng = np.random.default_rng(7)
    for channel in range(INPUT_SHAPE[1]):
        array[0, channel] = rng.standard_normal(INPUT_SHAPE[2:], dtype=np.float32)
    array.flush()
    del array
    return folder, path


def run_child(operator: str, source, target, weights) -> dict:
    completed = subprocess.run(
        [sys.executable, "-c", CHILD, operator, str(source), str(target), str(weights)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout.strip().splitlines()[-1])


def test_tiled_conv_stays_under_the_limit(big_input):
    folder, source = big_input
    w = np.random.default_rng(8).standard_normal((1, 2, 3, 3)).astype(np.float32)
    np.save(folder / "w.npy", w)
    report = run_child("conv", source, folder / "y.npy", folder / "w.npy")
    assert report["tiles"] > 4
    assert report["growth"] <= LIMIT, report
    expected = conv(np.load(source), w, pads=[1, 2, 1, 0])
    got = np.load(folder / "y.npy")
    assert got.shape == expected.shape and got.tobytes() == expected.tobytes()


def test_tiled_pad_stays_under_the_limit(big_input):
    folder, source = big_input
    report = run_child("pad", source, folder / "p.npy", "-")
    assert report["tiles"] > 4
    assert report["growth"] <= LIMIT, report
    expected = pad(np.load(source), [0, 0, 3, 2, 0, 0, 1, 5], mode="reflect")
    got = np.load(folder / "p.npy", mmap_mode="r")
    assert got.shape == expected.shape and np.array_equal(got, expected)
    assert got.tobytes() == expected.tobytes()
