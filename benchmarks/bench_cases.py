"""What is measured: the cases, the float64 Conv oracle and its error bound, and the peers.

A peer's `prepare(case, inputs)` does all that is not timed and returns the call to time.
"""

import fnmatch
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

import numpy as np

EPS32 = float(np.finfo(np.float32).eps)  # 2**-23
THREADS = 2  # of onnxruntime (intra-op) and torch


@dataclass(frozen=True)
class Case:
    """One float32 call: Conv when `w_shape` is given (pads of the spatial axes, no bias), else
    Pad (pads of every axis, begins then ends, and `mode`)."""

    name: str
    label: str
    x_shape: tuple[int, ...]
    w_shape: tuple[int, ...] = ()
    pads: tuple[int, ...] = ()
    strides: tuple[int, ...] = ()
    dilations: tuple[int, ...] = ()
    group: int = 1
    mode: str = "constant"

    @property
    def kind(self) -> str:
        return "conv" if self.w_shape else "pad"

    def resolved(self) -> tuple[tuple[int, ...], ...]:
        """Conv (pads, strides, dilations) with the ONNX defaults 0, 1, 1 filled in."""
        r = len(self.x_shape) - 2
        return self.pads or (0,) * 2 * r, self.strides or (1,) * r, self.dilations or (1,) * r

    def attributes(self) -> dict[str, object]:
        """The Conv attributes given, as the ONNX node and padconv's conv take them."""
        given = {k: list(getattr(self, k)) for k in ("pads", "strides", "dilations")}
        return {k: v for k, v in given.items() if v} | {"group": self.group}

    def width(self) -> list[tuple[int, int]]:
        """Pad: ONNX [b_0..b_r-1, e_0..e_r-1] as numpy's [(b_0, e_0), ...]."""
        r = len(self.x_shape)
        return [(self.pads[i], self.pads[r + i]) for i in range(r)]

    def output_shape(self) -> tuple[int, ...]:
        """Pad: in_i + b_i + e_i. Conv: (N, M, *out) with
        out_i = floor((in_i + b_i + e_i - (k_i - 1) * d_i - 1) / s_i) + 1."""
        if self.kind == "pad":
            return tuple(d + b + e for d, (b, e) in zip(self.x_shape, self.width(), strict=True))
        (pads, strides, dils), r = self.resolved(), len(self.x_shape) - 2
        return (self.x_shape[0], self.w_shape[0], *(
            (self.x_shape[2 + i] + pads[i] + pads[r + i] - (self.w_shape[2 + i] - 1) * dils[i]
             - 1) // strides[i] + 1 for i in range(r)))

    def reduction_size(self) -> int:
        """n, the products summed per Conv output: C/group * prod(kernel)."""
        return math.prod(self.w_shape[1:])

    def work(self) -> int:
        """Conv: 2 * n * prod(output shape) FLOP; Pad: 4 * (input + output size) bytes moved."""
        if self.kind == "conv":
            return 2 * self.reduction_size() * math.prod(self.output_shape())
        return 4 * (math.prod(self.x_shape) + math.prod(self.output_shape()))

    def describe(self) -> str:
        """'X 1x64x56x56, W 64x64x3x3, pads 1, group 4': the shapes and attributes given."""
        x, w = ("x".join(map(str, shape)) for shape in (self.x_shape, self.w_shape))
        if self.kind == "pad":
            return f"X {x}, pads [{','.join(map(str, self.pads))}]"
        attrs = [f"{k} {v if k == 'group' else v[0] if len(set(v)) == 1 else v}"
                 for k, v in self.attributes().items() if v != 1]
        return ", ".join([f"X {x}", f"W {w}", *attrs])

    def shrunk(self) -> "Case":
        """The --quick size: spatial sizes / 8, at least 9 (more than any kernel or pad here)."""
        return replace(self, x_shape=(*self.x_shape[:2], *(max(9, d // 8)
                                                           for d in self.x_shape[2:])))

    def make_inputs(self, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """X and W (Conv) or data (Pad), uniform on [-1, 1), float32."""
        shapes = {"X": self.x_shape, "W": self.w_shape} if self.w_shape else {"data": self.x_shape}
        return {k: rng.uniform(-1, 1, s).astype(np.float32) for k, s in shapes.items()}


def conv(name: str, label: str, x: tuple, w: tuple, pad: int = 0, **attrs: object) -> Case:
    """A Conv case with `pad` before and after every spatial axis."""
    return Case(name, label, x, w, pads=(pad,) * 2 * (len(x) - 2) if pad else (), **attrs)


CONV_CASES = (
    conv("conv/resnet3x3", "ResNet 3x3", (1, 64, 56, 56), (64, 64, 3, 3), 1),
    conv("conv/stem7x7s2", "stem 7x7 /2", (1, 3, 224, 224), (64, 3, 7, 7), 3, strides=(2, 2)),
    conv("conv/pointwise", "pointwise 1x1", (1, 256, 28, 28), (512, 256, 1, 1)),
    conv("conv/depthwise", "depthwise 3x3", (1, 256, 56, 56), (256, 1, 3, 3), 1, group=256),
    conv("conv/1d", "1-D k9", (4, 16, 16000), (32, 16, 9), 4),
    conv("conv/3d", "3-D 3x3x3", (1, 8, 32, 32, 32), (16, 8, 3, 3, 3), 1),
    conv("conv/dilated", "dilated 3x3 d2", (1, 32, 64, 64), (32, 32, 3, 3), 2, dilations=(2, 2)),
    conv("conv/batch8", "ResNet 3x3, N=8", (8, 64, 56, 56), (64, 64, 3, 3), 1),
)
PAD_CASES = tuple(Case(f"pad/{mode}", f"Pad {mode}", (8, 64, 128, 128),
                       pads=(0, 0, 3, 3, 0, 0, 3, 3), mode=mode)
                  for mode in ("constant", "reflect", "edge", "wrap"))
KERNEL_CASES = CONV_CASES + PAD_CASES
# Whole processes, the `padconv` command from .npy files to a .npy file.
STARTUP = (Case("cli/startup", "padconv pad", (1, 3, 8, 8), pads=(0, 0, 1, 1) * 2,
                mode="reflect"), conv("cli/startup", "padconv conv", (1, 3, 8, 8), (4, 3, 3, 3), 1))
LARGE_CONV = conv("cli/large", "large", (1, 16, 1024, 4096), (16, 16, 3, 3), 1)  # 256 MiB
PROCESS_CASES = ("cli/startup", "cli/large")


def matches(name: str, patterns: Iterable[str]) -> bool:
    """No pattern, or one matching: as a glob if it has *?[, else as a substring."""
    patterns = list(patterns)
    return not patterns or any(fnmatch.fnmatchcase(name, p) if set(p) & set("*?[") else p in name
                               for p in patterns)


def conv64(case: Case, x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """The ONNX Conv in float64, one kernel tap t at a time:
    y[n, g, m, o] = sum_{c, t} xpad[n, g, c, o * s + t * d] * w[g, m, c, t] (g: group)."""
    (pads, strides, dils), (n, c), m, g = case.resolved(), x.shape[:2], w.shape[0], case.group
    r, out = x.ndim - 2, case.output_shape()[2:]
    xp = np.pad(x.astype(np.float64), [(0, 0)] * 2 + [(pads[i], pads[r + i]) for i in range(r)])
    xg = xp.reshape(n, g, c // g, *xp.shape[2:])
    wg = w.astype(np.float64).reshape(g, m // g, c // g, *w.shape[2:])
    y = np.zeros((n, g, m // g, *out))
    for tap in np.ndindex(*w.shape[2:]):
        window = tuple(slice(t * d, t * d + (o - 1) * s + 1, s)
                       for t, d, o, s in zip(tap, dils, out, strides, strict=True))
        y += np.einsum("ngc...,gmc->ngm...", xg[(..., *window)], wg[(..., *tap)], optimize=True)
    return y.reshape(n, m, *out)


def conv_error_ratio(case: Case, y: np.ndarray, y64: np.ndarray, scale: np.ndarray) -> float:
    """max |y - y64| / (n * eps32 * scale), scale = conv64(|x|, |w|): at most 1 for a float32
    result summed in any order (inf for another shape or dtype, or a nan)."""
    if y.shape != y64.shape or y.dtype != np.float32:
        return math.inf
    bound = np.maximum(case.reduction_size() * EPS32 * scale, np.finfo(np.float64).tiny)
    worst = float(np.max(np.abs(y - y64) / bound)) if y.size else 0.0
    return worst if math.isfinite(worst) else math.inf


class PeerSkipped(Exception):
    """This peer cannot run this case; the message says why (so does a failed import)."""


@dataclass(frozen=True)
class Peer:
    """An implementation and the case kinds it runs; a `floor` writes no border (it is not
    verified); a `capped` one is a slow reference (no warm-up, a few calls)."""

    name: str
    kinds: tuple[str, ...]
    prepare: Callable[[Case, dict], Callable[[], np.ndarray]]
    floor: bool = False
    capped: bool = False


def _padconv(case: Case, inputs: dict, out: bool = False) -> Callable[[], np.ndarray]:
    from padconv_cli import conv, pad

    if case.kind == "conv":
        return lambda: conv(inputs["X"], inputs["W"], **case.attributes())
    buf = {"out": np.empty(case.output_shape(), np.float32)} if out else {}
    return lambda: pad(inputs["data"], list(case.pads), mode=case.mode, **buf)


def one_node_model(case: Case, inputs: dict) -> bytes:
    """The case as a serialized one-node ONNX model (opset 22); `inputs` are graph inputs."""
    from onnx import TensorProto, helper, numpy_helper

    def info(name: str, shape: list | None) -> object:
        return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)

    if case.kind == "conv":
        node, inits = helper.make_node("Conv", ["X", "W"], ["Y"], **case.attributes()), []
    else:
        node = helper.make_node("Pad", ["data", "pads"], ["Y"], mode=case.mode)
        inits = [numpy_helper.from_array(np.array(case.pads, np.int64), "pads")]
    graph = helper.make_graph([node], "bench", [info(k, list(v.shape)) for k, v in inputs.items()],
                              [info("Y", None)], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)], ir_version=10)
    return model.SerializeToString()


def _onnx(case: Case, inputs: dict, reference: bool = False) -> Callable[[], np.ndarray]:
    """onnxruntime (CPU provider, THREADS intra-op threads), or onnx.reference, on the model."""
    model = one_node_model(case, inputs)
    if reference:
        from onnx.reference import ReferenceEvaluator

        session = ReferenceEvaluator(model)
    else:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads, options.inter_op_num_threads = THREADS, 1
        session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    return lambda: session.run(None, inputs)[0]


def _torch(case: Case, inputs: dict) -> Callable[[], np.ndarray]:
    """F.conv{1,2,3}d (symmetric pads) or F.pad (edge = replicate, wrap = circular)."""
    import torch
    import torch.nn.functional as F  # noqa: N812

    torch.set_num_threads(THREADS)
    tensors = [torch.from_numpy(a) for a in inputs.values()]
    if case.kind == "pad":
        width = case.width()
        while width[0] == (0, 0):  # F.pad's modes pad trailing axes only
            width.pop(0)
        mode = {"edge": "replicate", "wrap": "circular"}.get(case.mode, case.mode)
        fn, kwargs = F.pad, {"pad": [v for pair in reversed(width) for v in pair], "mode": mode}
    else:
        (pads, strides, dils), r = case.resolved(), len(case.x_shape) - 2
        if pads[:r] != pads[r:]:
            raise PeerSkipped("torch conv takes symmetric pads only")
        fn, kwargs = (F.conv1d, F.conv2d, F.conv3d)[r - 1], {
            "stride": strides, "padding": pads[:r], "dilation": dils, "groups": case.group}

    def run() -> np.ndarray:
        with torch.inference_mode():
            return fn(*tensors, **kwargs).numpy()

    return run


def _copy_floor(case: Case, inputs: dict) -> Callable[[], None]:
    """`out[interior] = x` into a buffer made once: the floor of Pad (it writes no border)."""
    inside = tuple(slice(b, b + d) for (b, _), d in zip(case.width(), case.x_shape, strict=True))
    interior = np.empty(case.output_shape(), np.float32)[inside]
    return lambda: np.copyto(interior, inputs["data"])


PADCONV, PADCONV_OUT, NUMPY_PAD, COPY = "padconv", "padconv (out=)", "numpy.pad", "strided copy"
ORT, TORCH, REFERENCE = "onnxruntime", "torch", "onnx.reference"
INTERPRETER, ORT_SCRIPT = 'python -c "import numpy"', "onnxruntime script"  # whole processes
PEERS = (
    Peer(PADCONV, ("conv", "pad"), _padconv),
    Peer(PADCONV_OUT, ("pad",), lambda c, i: _padconv(c, i, out=True)),
    Peer(ORT, ("conv", "pad"), _onnx),
    Peer(TORCH, ("conv", "pad"), _torch),
    Peer(NUMPY_PAD, ("pad",), lambda c, i: lambda: np.pad(i["data"], c.width(), mode=c.mode)),
    Peer(COPY, ("pad",), _copy_floor, floor=True),
    Peer(REFERENCE, ("conv", "pad"), lambda c, i: _onnx(c, i, reference=True), capped=True),
)
