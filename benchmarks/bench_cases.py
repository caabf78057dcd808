"""What is measured and what is right: the cases, the peers, the float64 Conv oracle and its
error bound. A peer's `prepare(case, inputs)` does all that is not timed and returns the call
to time."""

import fnmatch
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

import bench_family as bf
import numpy as np

EPS32 = float(np.finfo(np.float32).eps)  # 2**-23
THREADS = 2  # of onnxruntime (intra-op) and torch


@dataclass(frozen=True)
class Case:
    """One float32 call: Conv when `w_shape` is given (attributes of the spatial axes, no bias),
    else Pad (pads of every axis, begins then ends, and `mode`)."""

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

    @property
    def part(self) -> str:
        """Where a run's result keeps the case: its kind."""
        return self.kind

    def attributes(self) -> dict[str, Any]:
        """The attributes that differ from the ONNX defaults (pads 0, strides, dilations and
        group 1), as the ONNX node, padconv's API and its flags take them."""
        if self.kind == "pad":
            return {"pads": list(self.pads), "mode": self.mode}
        given = {"pads": (self.pads, 0), "strides": (self.strides, 1),
                 "dilations": (self.dilations, 1)}
        return {k: list(v) for k, (v, default) in given.items() if set(v) != {default}} | (
            {"group": self.group} if self.group > 1 else {})

    def width(self) -> list[tuple[int, int]]:
        """ONNX pads [b_0..b_r-1, e_0..e_r-1] as numpy's [(b_0, e_0), ...]."""
        r = len(self.pads) // 2
        return [(self.pads[i], self.pads[r + i]) for i in range(r)]

    def output_shape(self) -> tuple[int, ...]:
        """Pad: in_i + b_i + e_i. Conv: (N, M, *out) with
        out_i = floor((in_i + b_i + e_i - (k_i - 1) * d_i - 1) / s_i) + 1."""
        if self.kind == "pad":
            return tuple(d + b + e for d, (b, e) in zip(self.x_shape, self.width(), strict=True))
        return (self.x_shape[0], self.w_shape[0], *(
            (i + b + e - (k - 1) * d - 1) // s + 1 for i, (b, e), k, s, d in zip(
                self.x_shape[2:], self.width(), self.w_shape[2:], self.strides, self.dilations,
                strict=True)))

    def work(self) -> int:
        """Conv: 2 * n * prod(output shape) FLOP (n = C/group * prod(kernel), the products per
        output); Pad: 4 * (input + output size) bytes moved."""
        if self.kind == "conv":
            return 2 * math.prod(self.w_shape[1:]) * math.prod(self.output_shape())
        return 4 * (math.prod(self.x_shape) + math.prod(self.output_shape()))

    def describe(self) -> str:
        """'X 1x64x56x56, W 64x64x3x3, pads 1, group 4': the shapes and attributes given."""
        shapes = [f"{k} {'x'.join(map(str, s))}" for k, s in (("X", self.x_shape),
                                                              ("W", self.w_shape)) if s]
        return ", ".join(shapes + [f"{k} {v[0] if len(set(v)) == 1 else v}" if k != "group"
                                   else f"group {v}" for k, v in self.attributes().items()
                                   if k != "mode"])

    def shrunk(self) -> "Case":
        """The --quick size: spatial sizes / 8, at least 9 (more than any kernel or pad here)."""
        return replace(self, x_shape=(*self.x_shape[:2], *(max(9, d // 8)
                                                           for d in self.x_shape[2:])))

    def make_inputs(self, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """X and W (Conv) or data (Pad), uniform on [-1, 1), float32."""
        shapes = {"X": self.x_shape, "W": self.w_shape} if self.w_shape else {"data": self.x_shape}
        return {k: rng.uniform(-1, 1, s).astype(np.float32) for k, s in shapes.items()}


def conv(name: str, label: str, x: tuple, w: tuple, pad: int = 0, stride: int = 1,
         dilation: int = 1, group: int = 1) -> Case:
    """A Conv case with `pad` before and after every spatial axis, `stride` and `dilation` on
    each."""
    r = len(x) - 2
    return Case(name, label, x, w, (pad,) * 2 * r, (stride,) * r, (dilation,) * r, group)


CONV_CASES = (
    conv("conv/resnet3x3", "ResNet 3x3", (1, 64, 56, 56), (64, 64, 3, 3), 1),
    conv("conv/stem7x7s2", "stem 7x7 /2", (1, 3, 224, 224), (64, 3, 7, 7), 3, stride=2),
    conv("conv/pointwise", "pointwise 1x1", (1, 256, 28, 28), (512, 256, 1, 1)),
    conv("conv/depthwise", "depthwise 3x3", (1, 256, 56, 56), (256, 1, 3, 3), 1, group=256),
    conv("conv/1d", "1-D k9", (4, 16, 16000), (32, 16, 9), 4),
    conv("conv/3d", "3-D 3x3x3", (1, 8, 32, 32, 32), (16, 8, 3, 3, 3), 1),
    conv("conv/dilated", "dilated 3x3 d2", (1, 32, 64, 64), (32, 32, 3, 3), 2, dilation=2),
    conv("conv/batch8", "ResNet 3x3, N=8", (8, 64, 56, 56), (64, 64, 3, 3), 1),
)
PAD_CASES = tuple(Case(f"pad/{mode}", f"Pad {mode}", (8, 64, 128, 128),
                       pads=(0, 0, 3, 3, 0, 0, 3, 3), mode=mode)
                  for mode in ("constant", "reflect", "edge", "wrap"))
FAMILY_CASES = bf.CASES  # ConvTranspose, ConvInteger, QLinearConv (bench_family.py)
KERNEL_CASES = CONV_CASES + PAD_CASES + FAMILY_CASES
# Whole processes: the `padconv` command from files to a file.
STARTUP = (Case("cli/startup", "padconv pad", (1, 3, 8, 8), pads=(0, 0, 1, 1) * 2,
                mode="reflect"), conv("cli/startup", "padconv conv", (1, 3, 8, 8), (4, 3, 3, 3), 1))
LARGE_CONV = conv("cli/large", "large", (1, 16, 1024, 4096), (16, 16, 3, 3), 1)  # 256 MiB
CLUSTER_CONV = conv("cluster/dask", "cluster", (1, 1, 8192, 8192), (1, 1, 3, 3), 1)  # 256 MiB
CLUSTER_CHUNKS, CLUSTER_WORKERS = 4, 2  # Zarr chunks per axis; worker processes, 1 thread each


def matches(name: str, patterns: Iterable[str]) -> bool:
    """No pattern, or one matching: as a glob if it has *?[, else as a substring."""
    patterns = list(patterns)
    return not patterns or any(fnmatch.fnmatchcase(name, p) if set(p) & set("*?[") else p in name
                               for p in patterns)


def conv64(case: Case, x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """The ONNX Conv in float64, one kernel tap t at a time:
    y[n, g, m, o] = sum_{c, t} xpad[n, g, c, o * s + t * d] * w[g, m, c, t] (g: group)."""
    (n, c), m, g, out = x.shape[:2], w.shape[0], case.group, case.output_shape()[2:]
    xp = np.pad(x.astype(np.float64), [(0, 0)] * 2 + case.width())
    xg = xp.reshape(n, g, c // g, *xp.shape[2:])
    wg = w.astype(np.float64).reshape(g, m // g, c // g, *w.shape[2:])
    y = np.zeros((n, g, m // g, *out))
    for tap in np.ndindex(*w.shape[2:]):
        window = tuple(slice(t * d, t * d + (o - 1) * s + 1, s) for t, d, o, s in zip(
            tap, case.dilations, out, case.strides, strict=True))
        y += np.einsum("ngc...,gmc->ngm...", xg[(..., *window)], wg[(..., *tap)], optimize=True)
    return y.reshape(n, m, *out)


def expected(case: Case, inputs: dict) -> Any:
    """Conv: (y64, conv64(|x|, |w|)), the oracle and its bound's scale; Pad: numpy.pad's; the
    family: bench_family.expected."""
    if case.kind in bf.KINDS:
        return bf.expected(case, inputs)
    if case.kind == "pad":
        return np.pad(inputs["data"], case.width(), mode=case.mode)
    x, w = inputs["X"], inputs["W"]
    return conv64(case, x, w), conv64(case, np.abs(x), np.abs(w))


def verify(case: Case, want: Any, got: Any, who: str = "padconv") -> tuple[str, float | None, str]:
    """(status, error ratio, note) of `who`'s result. Conv: the ratio max |y - y64| / (n * eps32
    * scale) is at most 1 for a float32 result summed in any order (inf for another shape or
    dtype, or a nan). Pad: bit for bit equal to numpy.pad. The family: bench_family.verify."""
    if case.kind in bf.KINDS:
        return bf.verify(case, want, got, who)
    got = np.asarray(got)
    if case.kind == "pad":
        same = got.dtype == want.dtype and got.shape == want.shape and np.array_equal(got, want)
        return ("ok", None, "") if same else ("mismatch", None, "differs from numpy.pad")
    (y64, scale), ratio = want, math.inf
    if got.shape == y64.shape and got.dtype == np.float32:
        bound = np.maximum(math.prod(case.w_shape[1:]) * EPS32 * scale, np.finfo(float).tiny)
        ratio = float(np.max(np.abs(got - y64) / bound)) if got.size else 0.0
    ratio = ratio if math.isfinite(ratio) else math.inf
    return ("ok", ratio, "") if ratio <= 1 else ("mismatch", ratio, f"error {ratio:.3g}x the bound")


# OpenBLAS's helper spins for 2^28 cycles after a product (about 0.11 s of CPU time measured
# here), longer than the usual pause between turns: what calls numpy's BLAS pauses this long
BLAS_PAUSE_S = 0.25


@dataclass(frozen=True)
class Peer:
    """An implementation and the case kinds it runs; a `floor` writes no border (it is not
    verified); a `capped` one is a slow reference (no warm-up, a few calls); `pause_s`, the
    pause after its turns when longer than the usual one."""

    name: str
    kinds: tuple[str, ...]
    prepare: Callable[[Case, dict], Callable[[], np.ndarray]]
    floor: bool = False
    capped: bool = False
    pause_s: float = 0.0


def _padconv(case: Case, inputs: dict, out: bool = False) -> Callable[[], np.ndarray]:
    from padconv_cli import conv, pad

    if case.kind in bf.KINDS:
        return bf.padconv_call(case, inputs)
    attributes = case.attributes()  # built once: the harness's work, not padconv's
    if case.kind == "conv":
        return lambda: conv(inputs["X"], inputs["W"], **attributes)
    buf = {"out": np.empty(case.output_shape(), np.float32)} if out else {}
    return lambda: pad(inputs["data"], **attributes, **buf)


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
    model = (bf.one_node_model if case.kind in bf.KINDS else one_node_model)(case, inputs)
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
    """F.conv{1,2,3}d (pads made symmetric by F.pad when they are not) or F.pad (edge =
    replicate, wrap = circular)."""
    import torch
    import torch.nn.functional as F  # noqa: N812

    torch.set_num_threads(THREADS)
    if case.kind in bf.KINDS:
        return bf.torch_call(case, inputs)
    x, *w = (torch.from_numpy(a) for a in inputs.values())
    width = case.width()
    while case.kind == "pad" and width[0] == (0, 0):  # F.pad's modes pad trailing axes only
        width.pop(0)
    flat, r = [v for pair in reversed(width) for v in pair], len(width)  # last axis first
    symmetric = case.pads[:r] == case.pads[r:]
    if case.kind == "pad":
        mode = {"edge": "replicate", "wrap": "circular"}.get(case.mode, case.mode)
        fn = lambda: F.pad(x, flat, mode=mode)  # noqa: E731
    else:
        conv_nd, kwargs = (F.conv1d, F.conv2d, F.conv3d)[r - 1], {
            "stride": case.strides, "padding": case.pads[:r] if symmetric else 0,
            "dilation": case.dilations, "groups": case.group}
        fn = lambda: conv_nd(x if symmetric else F.pad(x, flat), w[0], **kwargs)  # noqa: E731

    def run() -> np.ndarray:
        with torch.inference_mode():
            return fn().numpy()

    return run


def _copy_floor(case: Case, inputs: dict) -> Callable[[], None]:
    """`out[interior] = x` into a buffer made once: the floor of Pad (it writes no border)."""
    inside = tuple(slice(b, b + d) for (b, _), d in zip(case.width(), case.x_shape, strict=True))
    interior = np.empty(case.output_shape(), np.float32)[inside]
    return lambda: np.copyto(interior, inputs["data"])


PADCONV, PADCONV_OUT, NUMPY_PAD, COPY = "padconv", "padconv (out=)", "numpy.pad", "strided copy"
ORT, TORCH, REFERENCE = "onnxruntime", "torch", "onnx.reference"
INTERPRETER, ORT_SCRIPT = 'python -c "import numpy"', "onnxruntime script"  # whole processes
DASK_SCRIPT = "dask map_overlap script"
PEERS = (
    Peer(PADCONV, ("conv", "pad", *bf.KINDS), _padconv),
    Peer(PADCONV_OUT, ("pad",), lambda c, i: _padconv(c, i, out=True)),
    Peer(ORT, ("conv", "pad", *bf.KINDS), _onnx),
    Peer(TORCH, ("conv", "pad", *bf.KINDS), _torch),
    Peer(NUMPY_PAD, ("pad",), lambda c, i: lambda: np.pad(i["data"], c.width(), mode=c.mode)),
    Peer(COPY, ("pad",), _copy_floor, floor=True),
    Peer(REFERENCE, ("conv", "pad"), lambda c, i: _onnx(c, i, reference=True), capped=True,
         pause_s=BLAS_PAUSE_S),  # its Conv calls numpy's BLAS
)
