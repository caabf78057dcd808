"""The implementations timed side by side: padconv and its peers.

Each peer turns a case and its input arrays into a zero-argument callable that performs exactly
the work being timed and returns the result array.  Everything else (model building, session
creation, output preallocation) happens in `prepare`, outside the timed region.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import numpy as np
from bench_cases import Case, ConvCase, PadCase

# Opset of the one-node models given to onnxruntime and onnx.reference: Conv-22, Pad-21
# (Pad has had the "wrap" mode since Pad-19).
MODEL_OPSET = 22
MODEL_IR_VERSION = 10
ORT_INTRA_OP_THREADS = 2
ORT_INTER_OP_THREADS = 1

PADCONV = "padconv"
PADCONV_OUT = "padconv (out=)"
ORT = "onnxruntime"
REFERENCE = "onnx.reference"
NUMPY_PAD = "numpy.pad"
STRIDED_COPY = "strided copy"
ALLOCATING_COPY = "empty + copy"
TORCH = "torch"


class PeerSkipped(Exception):
    """The peer cannot run this case (not installed, or lacks the feature); the message says why."""


@dataclass(frozen=True)
class Prepared:
    """A ready-to-time call and whether its result is comparable with padconv's."""

    run: Callable[[], np.ndarray]
    comparable: bool = True
    note: str = ""


@dataclass(frozen=True)
class PeerLimits:
    """Per-peer caps so that slow peers do not dominate the run time."""

    max_repeat: int | None = None
    call_timeout_s: float | None = None


@dataclass(frozen=True)
class Peer:
    """A named implementation, the case kinds it handles and how to prepare a call."""

    name: str
    kinds: tuple[str, ...]
    prepare: Callable[[Case, dict[str, np.ndarray]], Prepared]
    limits: PeerLimits = PeerLimits()


def load_padconv_kernels() -> SimpleNamespace:
    """padconv's kernel functions (`conv`, `pad`); raises PeerSkipped when not importable."""
    try:
        conv_module = importlib.import_module("padconv_cli.kernels.conv")
        pad_module = importlib.import_module("padconv_cli.kernels.pad")
    except ImportError as exc:
        raise PeerSkipped(f"padconv kernels not importable: {exc}") from exc
    return SimpleNamespace(conv=conv_module.conv, pad=pad_module.pad)


def padconv_peer(kernels: Any | None = None) -> Peer:
    """padconv's own API; `kernels` (an object with `conv` and `pad`) defaults to the package."""

    def prepare(case: Case, inputs: dict[str, np.ndarray]) -> Prepared:
        impl = kernels if kernels is not None else load_padconv_kernels()
        if isinstance(case, ConvCase):
            x, w, attrs = inputs["X"], inputs["W"], case.attributes()
            return Prepared(lambda: impl.conv(x, w, **attrs))
        data, pads, mode = inputs["data"], list(case.pads), case.mode
        return Prepared(lambda: impl.pad(data, pads, mode=mode))

    return Peer(PADCONV, ("conv", "pad"), prepare)


def padconv_out_peer(kernels: Any | None = None) -> Peer:
    """padconv's Pad writing into an output preallocated once (`pad(x, ..., out=buf)`).

    Like onnxruntime's arena and the strided-copy floor, it reuses memory that is already
    mapped, so it pays no page faults of a fresh output; it is reported as its own row.
    """

    def prepare(case: Case, inputs: dict[str, np.ndarray]) -> Prepared:
        assert isinstance(case, PadCase)
        impl = kernels if kernels is not None else load_padconv_kernels()
        data, pads, mode = inputs["data"], list(case.pads), case.mode
        buf = np.empty(case.output_shape(), dtype=data.dtype)
        return Prepared(lambda: impl.pad(data, pads, mode=mode, out=buf))

    return Peer(PADCONV_OUT, ("pad",), prepare)


def one_node_model(case: Case, inputs: dict[str, np.ndarray]) -> Any:
    """A one-node ONNX model computing the case; tensors in `inputs` are graph inputs."""
    from onnx import TensorProto, helper, numpy_helper

    graph_inputs = [
        helper.make_tensor_value_info(name, TensorProto.FLOAT, list(array.shape))
        for name, array in inputs.items()
    ]
    initializers = []
    if isinstance(case, ConvCase):
        node = helper.make_node("Conv", ["X", "W"], ["Y"], **case.attributes())
    else:
        pads = np.asarray(case.pads, dtype=np.int64)
        initializers.append(numpy_helper.from_array(pads, "pads"))
        node = helper.make_node("Pad", ["data", "pads"], ["Y"], mode=case.mode)
    output = helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)
    graph = helper.make_graph([node], "bench", graph_inputs, [output], initializer=initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", MODEL_OPSET)])
    model.ir_version = MODEL_IR_VERSION
    return model


def ort_session_options() -> Any:
    """CPU session options: intra-op threads 2, inter-op threads 1."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = ORT_INTRA_OP_THREADS
    options.inter_op_num_threads = ORT_INTER_OP_THREADS
    return options


def ort_peer() -> Peer:
    """onnxruntime, CPU provider; only `session.run` is timed."""

    def prepare(case: Case, inputs: dict[str, np.ndarray]) -> Prepared:
        try:
            import onnxruntime
        except ImportError as exc:
            raise PeerSkipped("onnxruntime not installed") from exc
        model = one_node_model(case, inputs).SerializeToString()
        try:
            session = onnxruntime.InferenceSession(
                model, ort_session_options(), providers=["CPUExecutionProvider"]
            )
        except Exception as exc:  # ort reports unsupported modes/opsets by raising here
            raise PeerSkipped(f"onnxruntime rejects the model: {_first_line(exc)}") from exc
        feeds = dict(inputs)
        return Prepared(lambda: session.run(None, feeds)[0])

    return Peer(ORT, ("conv", "pad"), prepare)


def reference_peer(max_repeat: int = 3, call_timeout_s: float = 30.0) -> Peer:
    """onnx.reference.ReferenceEvaluator; evaluator creation is not timed."""

    def prepare(case: Case, inputs: dict[str, np.ndarray]) -> Prepared:
        from onnx.reference import ReferenceEvaluator

        evaluator = ReferenceEvaluator(one_node_model(case, inputs))
        feeds = dict(inputs)
        return Prepared(lambda: evaluator.run(None, feeds)[0])

    return Peer(REFERENCE, ("conv", "pad"), prepare, PeerLimits(max_repeat, call_timeout_s))


def numpy_pad_peer() -> Peer:
    """numpy.pad with the same mode name (ONNX constant/reflect/edge/wrap match numpy's)."""

    def prepare(case: Case, inputs: dict[str, np.ndarray]) -> Prepared:
        assert isinstance(case, PadCase)
        data, width, mode = inputs["data"], case.numpy_pad_width(), case.mode
        return Prepared(lambda: np.pad(data, width, mode=mode))

    return Peer(NUMPY_PAD, ("pad",), prepare)


def strided_copy_peer() -> Peer:
    """The floor for Pad: copy the input into a preallocated output (`out[slices] = x` only)."""

    def prepare(case: Case, inputs: dict[str, np.ndarray]) -> Prepared:
        assert isinstance(case, PadCase)
        data = inputs["data"]
        out = np.empty(case.output_shape(), dtype=data.dtype)
        slices = case.interior_slices()

        def copy_interior() -> np.ndarray:
            out[slices] = data
            return out

        return Prepared(copy_interior, comparable=False, note="floor: borders not written")

    return Peer(STRIDED_COPY, ("pad",), prepare)


def allocating_copy_peer() -> Peer:
    """Strided copy that also allocates its output on each call, as any Pad must (not a target)."""

    def prepare(case: Case, inputs: dict[str, np.ndarray]) -> Prepared:
        assert isinstance(case, PadCase)
        data, shape, slices = inputs["data"], case.output_shape(), case.interior_slices()

        def allocate_and_copy() -> np.ndarray:
            out = np.empty(shape, dtype=data.dtype)
            out[slices] = data
            return out

        return Prepared(allocate_and_copy, comparable=False, note="floor: borders not written")

    return Peer(ALLOCATING_COPY, ("pad",), prepare)


TORCH_PAD_MODES = {"constant": "constant", "reflect": "reflect", "edge": "replicate",
                   "wrap": "circular"}


def torch_peer() -> Peer:
    """torch.nn.functional.conv1d/2d/3d and F.pad, when torch is importable."""

    def prepare(case: Case, inputs: dict[str, np.ndarray]) -> Prepared:
        try:
            import torch
            import torch.nn.functional as functional
        except ImportError as exc:
            raise PeerSkipped("torch not installed") from exc
        if isinstance(case, ConvCase):
            return _torch_conv(torch, functional, case, inputs)
        return _torch_pad(torch, functional, case, inputs)

    return Peer(TORCH, ("conv", "pad"), prepare)


def _torch_conv(torch: Any, functional: Any, case: ConvCase, inputs: dict) -> Prepared:
    """F.conv{1,2,3}d; asymmetric ONNX pads would need an explicit F.pad, not used by the cases."""
    rank = case.spatial_rank
    pads = case.pads or (0,) * (2 * rank)
    if tuple(pads[:rank]) != tuple(pads[rank:]):
        raise PeerSkipped("torch conv with asymmetric pads is not benchmarked")
    conv_fn = {1: functional.conv1d, 2: functional.conv2d, 3: functional.conv3d}.get(rank)
    if conv_fn is None:
        raise PeerSkipped(f"torch has no conv for {rank} spatial axes")
    x, w = torch.from_numpy(inputs["X"]), torch.from_numpy(inputs["W"])
    kwargs = dict(stride=tuple(case.strides or (1,) * rank), padding=tuple(pads[:rank]),
                  dilation=tuple(case.dilations or (1,) * rank), groups=case.group)

    def run() -> np.ndarray:
        with torch.inference_mode():
            return conv_fn(x, w, **kwargs).numpy()

    return Prepared(run)


def _torch_pad(torch: Any, functional: Any, case: PadCase, inputs: dict) -> Prepared:
    """F.pad takes (begin, end) pairs starting from the last axis; its non-constant modes pad
    only the trailing axes, so the unpadded leading axes are left out."""
    width = list(case.numpy_pad_width())
    while len(width) > 1 and width[0] == (0, 0):
        width.pop(0)
    torch_pads = [amount for pair in reversed(width) for amount in pair]
    x, mode = torch.from_numpy(inputs["data"]), TORCH_PAD_MODES[case.mode]

    def run() -> np.ndarray:
        with torch.inference_mode():
            return functional.pad(x, torch_pads, mode=mode).numpy()

    return Prepared(run)


def default_peers(reference_repeat: int, reference_timeout_s: float) -> list[Peer]:
    """padconv first, then every peer, in table order."""
    return [
        padconv_peer(),
        padconv_out_peer(),
        ort_peer(),
        reference_peer(reference_repeat, reference_timeout_s),
        numpy_pad_peer(),
        strided_copy_peer(),
        allocating_copy_peer(),
        torch_peer(),
    ]


def primary_peer(case: Case) -> str:
    """The peer padconv must agree with for its own time to be reported."""
    return ORT if isinstance(case, ConvCase) else NUMPY_PAD


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else type(exc).__name__
