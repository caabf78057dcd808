"""A real dask cluster for the tests: a scheduler and workers started with the dask CLI on
127.0.0.1, each worker in its own working folder, optionally in a private mount namespace
where the client's private folder is hidden under a tmpfs (holding decoy files instead).

Every process runs under ``timeout`` (it stops by itself even if the test run is killed),
workers exit when their scheduler is gone (``--death-timeout``), and :meth:`Cluster.stop`
kills whatever is left.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

LIFETIME_SECONDS = 600
START_SECONDS = 60


def can_hide_folders() -> str | None:
    """None when ``unshare -m`` with a tmpfs works here, else the reason it does not."""
    if shutil.which("unshare") is None:
        return "no unshare command"
    if os.geteuid() != 0:
        return "hiding a folder from a worker needs root (unshare -m and mount)"
    probe = subprocess.run(
        ["unshare", "-m", "sh", "-c", "mount -t tmpfs tmpfs /mnt && umount /mnt"],
        capture_output=True,
        timeout=30,
    )
    if probe.returncode != 0:
        return f"unshare -m cannot mount a tmpfs here ({probe.stderr.decode().strip()[:100]})"
    return None


def child_environment() -> dict[str, str]:
    """The environment of started processes: they import the padconv under test."""
    import padconv_cli

    package_root = str(Path(padconv_cli.__file__).resolve().parent.parent)
    paths = [package_root, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}


def _dask_command(*args: str) -> list[str]:
    return ["timeout", "-s", "KILL", str(LIFETIME_SECONDS), sys.executable, "-m", "dask", *args]


@dataclass
class Cluster:
    """Handles on the started processes."""

    root: Path
    address: str = ""
    processes: dict[str, subprocess.Popen] = field(default_factory=dict)

    def start_scheduler(self) -> None:
        """A scheduler on a free loopback port; its address comes from its scheduler file."""
        scheduler_file = self.root / "scheduler.json"
        self._spawn(
            "scheduler",
            _dask_command(
                "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                "--scheduler-file", str(scheduler_file), "--no-show",
            ),
            self.root,
        )
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            if scheduler_file.exists():
                try:
                    self.address = json.loads(scheduler_file.read_text())["address"]
                    return
                except (ValueError, KeyError):
                    pass
            time.sleep(0.1)
        raise RuntimeError(f"the dask scheduler did not start: {self.log('scheduler')}")

    def start_worker(
        self,
        name: str,
        hide: Path | None = None,
        decoys: Path | None = None,
        memory_limit: str = "2GiB",
        nanny: bool = True,
        death_timeout: int = 15,
    ) -> None:
        """A one-thread worker in its own folder ``root/name``; with ``hide``, in a private
        mount namespace where ``hide`` is a tmpfs holding a copy of ``decoys``."""
        folder = self.root / name
        folder.mkdir(exist_ok=True)
        worker = _dask_command(
            "worker", self.address, "--host", "127.0.0.1", "--name", name, "--nthreads", "1",
            "--memory-limit", memory_limit, "--no-dashboard", "--death-timeout", str(death_timeout),
            "--local-directory", str(folder), "--nanny" if nanny else "--no-nanny",
        )
        if hide is not None:
            copy = f" && cp -a {decoys}/. {hide}/" if decoys is not None else ""
            script = f"mount -t tmpfs tmpfs {hide}{copy} && exec \"$@\""
            worker = ["unshare", "-m", "sh", "-c", script, "sh", *worker]
        self._spawn(name, worker, folder)

    def wait_for_workers(self, count: int) -> None:
        """Block until ``count`` workers are connected."""
        from distributed import Client

        with Client(self.address, timeout=START_SECONDS) as client:
            client.wait_for_workers(count, timeout=START_SECONDS)

    def _spawn(self, name: str, command: list[str], cwd: Path) -> None:
        log = open(self.root / f"{name}.log", "wb")  # noqa: SIM115 (closed with the process)
        self.processes[name] = subprocess.Popen(
            command,
            cwd=cwd,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=child_environment(),
        )
        log.close()

    def log(self, name: str) -> str:
        """The last lines a process printed."""
        path = self.root / f"{name}.log"
        return path.read_text(errors="replace")[-2000:] if path.exists() else ""

    def kill(self, name: str) -> None:
        """SIGKILL the process ``name`` (and everything in its session)."""
        process = self.processes.get(name)
        if process is not None and process.poll() is None:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            process.wait(timeout=30)

    def wait_exit(self, name: str, seconds: float) -> bool:
        """Wait up to ``seconds`` for the process ``name`` to end by itself."""
        try:
            self.processes[name].wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            return False
        return True

    def worker_address(self, name: str) -> str:
        """The address the scheduler knows the worker ``name`` by."""
        from distributed import Client

        with Client(self.address, timeout=START_SECONDS) as client:
            workers = client.scheduler_info()["workers"]
        return next(addr for addr, info in workers.items() if info.get("name") == name)

    def stop(self) -> None:
        """Kill every process that is still running."""
        for name in list(self.processes):
            self.kill(name)
