"""Description of the machine and software the benchmark ran on."""

from __future__ import annotations

import ctypes
import importlib
import os
import platform
import sys
from pathlib import Path
from typing import Any

BLAS_ENVIRONMENT = (
    "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
)
VERSIONED_PACKAGES = ("numpy", "onnx", "onnxruntime", "torch", "ml_dtypes", "padconv_cli")


def cpu_model() -> str:
    """The first 'model name' of /proc/cpuinfo, else platform.processor()."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def usable_cores() -> int:
    """Cores this process may run on (scheduler affinity), else os.cpu_count()."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def package_versions() -> dict[str, str]:
    """Version of each benchmarked package, or 'not installed'."""
    versions = {}
    for name in VERSIONED_PACKAGES:
        try:
            module = importlib.import_module(name)
        except ImportError:
            versions[name] = "not installed"
            continue
        versions[name] = str(getattr(module, "__version__", "unknown"))
    return versions


def numpy_blas() -> dict[str, Any]:
    """numpy's BLAS as numpy.show_config reports it, plus the OpenBLAS runtime core and threads."""
    import numpy as np

    info: dict[str, Any] = {}
    try:
        config = np.show_config(mode="dicts")
        blas = config.get("Build Dependencies", {}).get("blas", {})
        info = {"name": blas.get("name"), "version": blas.get("version"),
                "configuration": blas.get("openblas configuration")}
        simd = config.get("SIMD Extensions", {})
        info["simd_found"] = simd.get("found")
    except (TypeError, AttributeError):  # older numpy without mode="dicts"
        info = {"name": "see numpy.show_config()"}
    info.update(threadpool_info() or openblas_runtime())
    return info


def threadpool_info() -> dict[str, Any]:
    """threadpoolctl's view of the BLAS libraries, when threadpoolctl is installed."""
    try:
        from threadpoolctl import threadpool_info as pools
    except ImportError:
        return {}
    blas_pools = [pool for pool in pools() if pool.get("user_api") == "blas"]
    return {"threadpools": [
        {key: pool.get(key) for key in ("internal_api", "version", "num_threads", "architecture")}
        for pool in blas_pools
    ]}


def openblas_runtime() -> dict[str, Any]:
    """Core type and thread count of the OpenBLAS library loaded by numpy (Linux, via ctypes)."""
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return {}
    paths = sorted({line.split()[-1] for line in maps.splitlines() if "openblas" in line.lower()})
    for path in paths:
        try:
            library = ctypes.CDLL(path)
        except OSError:
            continue
        found = _openblas_queries(library)
        if found:
            return found
    return {}


def _openblas_queries(library: ctypes.CDLL) -> dict[str, Any]:
    """Call whichever openblas_get_corename/get_num_threads spelling the library exports."""
    result: dict[str, Any] = {}
    for suffix in ("", "64_"):
        for prefix in ("openblas_", "scipy_openblas_"):
            corename = getattr(library, f"{prefix}get_corename{suffix}", None)
            threads = getattr(library, f"{prefix}get_num_threads{suffix}", None)
            if corename is not None and threads is not None:
                corename.restype = ctypes.c_char_p
                result["runtime_core"] = corename().decode()
                result["runtime_threads"] = int(threads())
                return result
    return result


def describe_machine() -> dict[str, Any]:
    """CPU, cores, load, Python, package versions, BLAS and the BLAS environment variables."""
    return {
        "cpu": cpu_model(),
        "cores": usable_cores(),
        "load_average": load_average(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "versions": package_versions(),
        "numpy_blas": numpy_blas(),
        "environment": {name: os.environ.get(name, "(unset)") for name in BLAS_ENVIRONMENT},
    }


def load_average() -> str:
    """1, 5 and 15 minute load averages, as os.getloadavg gives them."""
    try:
        return " ".join(f"{value:.2f}" for value in os.getloadavg())
    except OSError:
        return "unknown"


def machine_lines(machine: dict[str, Any]) -> list[str]:
    """The machine description as short 'key: value' lines."""
    blas = machine["numpy_blas"]
    blas_text = ", ".join(
        f"{key} {value}" for key, value in blas.items() if value not in (None, "", [])
    )
    versions = ", ".join(f"{name} {version}" for name, version in machine["versions"].items())
    environment = ", ".join(f"{name}={value}" for name, value in machine["environment"].items())
    return [
        f"CPU: {machine['cpu']} ({machine['cores']} usable cores)",
        f"Load average (1, 5, 15 min) at start: {machine['load_average']}"
        + (f"; at end: {machine['load_average_end']}" if "load_average_end" in machine else ""),
        f"Python {machine['python']} on {machine['platform']}",
        f"Versions: {versions}",
        f"numpy BLAS: {blas_text}",
        f"Environment: {environment}",
    ]
