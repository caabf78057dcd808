"""Running a model in the peers padconv is compared with: onnx.reference and onnxruntime,
quietly (neither prints warnings or logs), each run ending in a status and an output or a
one-line message."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np


def first_line(error: BaseException) -> str:
    """A peer's message on one line; onnxruntime's status prefix is dropped."""
    from padconv_cli.tensorio.files import one_line

    text = str(error)
    _, marker, status = text.partition("Status Message: ")
    return one_line(status if marker else f"{type(error).__name__}: {text}", 160)


def onnx_array(array: Any, kinds: str = "U") -> np.ndarray:
    """``array`` as the runtimes take it: text (numpy kinds ``kinds``) as an object array,
    as ONNX strings have no width."""
    array = np.asarray(array)
    return array.astype(object) if array.dtype.kind in kinds else array


def quiet_reference(model: Any, evaluator_class: type | None = None) -> Any:
    """An onnx.reference evaluator of ``model`` whose ``run`` prints no warnings."""
    from onnx.reference import ReferenceEvaluator

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        evaluator = (evaluator_class or ReferenceEvaluator)(model)
    run = evaluator.run

    def quiet_run(*args: Any) -> Any:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return run(*args)

    evaluator.run = quiet_run
    return evaluator


def ort_session(model: Any) -> Any:
    """An onnxruntime CPU session of ``model`` that logs nothing (its log would repeat our
    report on stderr)."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.log_severity_level = 4
    return onnxruntime.InferenceSession(model.SerializeToString(), options,
                                        providers=["CPUExecutionProvider"])


def ort_run(session: Any, feeds: Mapping[str, np.ndarray]) -> list:
    """Every output of ``session`` on ``feeds``, logging nothing."""
    import onnxruntime

    run_options = onnxruntime.RunOptions()
    run_options.log_severity_level = 4
    return session.run(None, dict(feeds), run_options)


def _peer_run(load: Any, run: Any) -> tuple[str, Any]:
    """("ran", output) of ``run(load())``; ("unsupported", message) when ``load`` fails (the
    peer cannot take the model), ("refused", message) when ``run`` does (nor these inputs)."""
    try:
        loaded = load()
    except Exception as error:  # the peers raise their own exception types
        return "unsupported", first_line(error)
    try:
        return "ran", run(loaded)[0]
    except Exception as error:  # any failure of the peer on these inputs
        return "refused", first_line(error)


def run_in_reference(model: Any, feeds: dict[str, np.ndarray]) -> tuple[str, Any]:
    """("ran", output) / ("unsupported" | "refused", message) for onnx.reference."""
    return _peer_run(lambda: quiet_reference(model), lambda peer: peer.run(None, feeds))


def onnxruntime_installed() -> bool:
    """True when onnxruntime can be imported."""
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        return False
    return True


def run_in_onnxruntime(model: Any, feeds: dict[str, np.ndarray]) -> tuple[str, Any]:
    """("ran", output) / ("unavailable" | "unsupported" | "refused", message)."""
    if not onnxruntime_installed():
        return "unavailable", "onnxruntime is not installed (pip install 'padconv[check]')"
    return _peer_run(lambda: ort_session(model), lambda session: ort_run(session, feeds))
