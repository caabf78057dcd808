"""The convolution family's cases: ConvTranspose (float32), ConvInteger and QLinearConv (uint8
X); their oracles (float64 for ConvTranspose, exact integers for the others), what a right
result is, and how each peer runs them. Peers: padconv and onnxruntime on every case; torch
(`torch.nn.functional.conv_transpose1d/2d`) on ConvTranspose only, as torch has no operator
with ConvInteger's or QLinearConv's ONNX semantics (its quantized convolution takes other
arguments and rounds otherwise)."""

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

import numpy as np

EPS32 = float(np.finfo(np.float32).eps)  # 2**-23
KINDS = ("convtranspose", "convinteger", "qlinearconv")
PART = "family"  # where a run's result keeps these cases


@dataclass(frozen=True)
class FamilyCase:
    """One call of the family: W is ``C x M/group x k...`` for ConvTranspose, ``M x C/group x
    k...`` for the integer operators; `pads` begins then ends, the same on every axis here."""

    name: str
    label: str
    op: str  # ONNX name: ConvTranspose, ConvInteger or QLinearConv
    x_shape: tuple[int, ...]
    w_shape: tuple[int, ...]
    pads: tuple[int, ...] = ()
    strides: tuple[int, ...] = ()
    group: int = 1

    @property
    def kind(self) -> str:
        return self.op.lower()

    @property
    def part(self) -> str:
        return PART

    @property
    def transposed(self) -> bool:
        return self.op == "ConvTranspose"

    def attributes(self) -> dict[str, Any]:
        """The attributes that differ from the ONNX defaults."""
        given = {"pads": (self.pads, 0), "strides": (self.strides, 1)}
        return {k: list(v) for k, (v, default) in given.items() if set(v) - {default}} | (
            {"group": self.group} if self.group > 1 else {})

    def width(self) -> list[tuple[int, int]]:
        r = len(self.x_shape) - 2
        pads = self.pads or (0,) * 2 * r
        return [(pads[i], pads[r + i]) for i in range(r)]

    def stride(self) -> tuple[int, ...]:
        return self.strides or (1,) * (len(self.x_shape) - 2)

    def output_shape(self) -> tuple[int, ...]:
        """ConvTranspose: ``s * (in - 1) + k - b - e``; the others: Conv's
        ``floor((in + b + e - k) / s) + 1``."""
        spatial = zip(self.x_shape[2:], self.w_shape[2:], self.stride(), self.width(),
                      strict=True)
        if self.transposed:
            return (self.x_shape[0], self.w_shape[1] * self.group,
                    *(s * (i - 1) + k - b - e for i, k, s, (b, e) in spatial))
        return (self.x_shape[0], self.w_shape[0],
                *((i + b + e - k) // s + 1 for i, k, s, (b, e) in spatial))

    def products(self) -> int:
        """The products per output element at most: C/group * prod(k) (for ConvTranspose a
        bound: with stride s only about 1/prod(s) of the taps reach each output)."""
        channels = self.x_shape[1] // self.group
        return channels * math.prod(self.w_shape[2:])

    def work(self) -> int:
        """2 * the products formed: ConvTranspose ``2 * N * C * M/G * prod(k) * prod(in)``, the
        others ``2 * n * prod(output)``."""
        if self.transposed:
            return 2 * math.prod(self.x_shape) * math.prod(self.w_shape[1:])
        return 2 * math.prod(self.w_shape[1:]) * math.prod(self.output_shape())

    def describe(self) -> str:
        """'ConvTranspose X 1x64x128x128, W 64x32x2x2, strides 2': the operator, the shapes
        and the attributes given."""
        shapes = [f"{k} {'x'.join(map(str, s))}" for k, s in (("X", self.x_shape),
                                                              ("W", self.w_shape))]
        attrs = [f"{k} {v[0] if len(set(v)) == 1 else v}" if k != "group" else f"group {v}"
                 for k, v in self.attributes().items()]
        extra = {"QLinearConv": ["uint8 X, int8 W per-channel scales, int32 B"],
                 "ConvInteger": ["uint8 X and W"]}.get(self.op, [])
        return f"{self.op} " + ", ".join(shapes + attrs + extra)

    def shrunk(self) -> "FamilyCase":
        """The --quick size: spatial sizes / 8, at least 9."""
        return replace(self, x_shape=(*self.x_shape[:2], *(max(9, d // 8)
                                                           for d in self.x_shape[2:])))

    def make_inputs(self, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """The node's inputs by ONNX name, in node order. ConvTranspose: float32 uniform on
        [-1, 1). ConvInteger: uint8 X and W, zero points 128 and 120. QLinearConv: uint8 X
        (zero point 128, scale 0.05), int8 W (zero points 0, scales per channel in [0.005,
        0.015)), y_scale 1, y_zero_point 128 (uint8 Y), int32 B in [-5000, 5000)."""
        if self.transposed:
            return {k: rng.uniform(-1, 1, s).astype(np.float32)
                    for k, s in (("X", self.x_shape), ("W", self.w_shape))}
        x = rng.integers(0, 256, self.x_shape, dtype=np.uint8)
        m = self.w_shape[0]
        if self.op == "ConvInteger":
            return {"x": x, "w": rng.integers(0, 256, self.w_shape, dtype=np.uint8),
                    "x_zero_point": np.array(128, np.uint8),
                    "w_zero_point": np.array(120, np.uint8)}
        return {"x": x, "x_scale": np.array(0.05, np.float32),
                "x_zero_point": np.array(128, np.uint8),
                "w": rng.integers(-127, 128, self.w_shape, dtype=np.int8),
                "w_scale": rng.uniform(0.005, 0.015, m).astype(np.float32),
                "w_zero_point": np.zeros(m, np.int8),
                "y_scale": np.array(1.0, np.float32), "y_zero_point": np.array(128, np.uint8),
                "B": rng.integers(-5000, 5000, m, dtype=np.int32)}


def transposed(name: str, label: str, x: tuple, w: tuple, stride: int, pad: int = 0
               ) -> FamilyCase:
    r = len(x) - 2
    return FamilyCase(name, label, "ConvTranspose", x, w, (pad,) * 2 * r, (stride,) * r)


def integer(name: str, label: str, op: str, x: tuple, w: tuple, pad: int) -> FamilyCase:
    return FamilyCase(name, label, op, x, w, (pad,) * 2 * (len(x) - 2))


CASES = (
    transposed("family/unet-up", "U-Net 2x up k2 s2", (1, 64, 128, 128), (64, 32, 2, 2), 2),
    transposed("family/gan-k4s2", "GAN k4 s2 p1", (1, 256, 32, 32), (256, 128, 4, 4), 2, 1),
    transposed("family/decoder-1d", "1-D decoder k16 s8", (1, 256, 1000), (256, 128, 16), 8, 4),
    integer("family/qlinear-resnet3x3", "QLinearConv ResNet 3x3", "QLinearConv",
            (1, 64, 56, 56), (64, 64, 3, 3), 1),
    integer("family/convinteger3x3", "ConvInteger 3x3", "ConvInteger",
            (1, 64, 56, 56), (64, 64, 3, 3), 1),
)


# --- oracles and verification -----------------------------------------------------------------


def conv_transpose64(case: FamilyCase, x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """ConvTranspose in float64, one tap at a time: ``full[n, m, i*s + k] += x[n, c, i] *
    w[c, m, k]``, then cropped by the pads (group 1)."""
    n, r = x.shape[0], x.ndim - 2
    inner = [s * (i - 1) + k for i, k, s in zip(x.shape[2:], w.shape[2:], case.stride(),
                                                 strict=True)]
    full = np.zeros((n, w.shape[1], *inner))
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    for tap in np.ndindex(*w.shape[2:]):
        window = tuple(slice(t, t + (i - 1) * s + 1, s) for t, i, s in zip(
            tap, x.shape[2:], case.stride(), strict=True))
        full[(..., *window)] += np.einsum("nc...,cm->nm...", x64, w64[(..., *tap)],
                                          optimize=True)
    crop = tuple(slice(b, d - e) for (b, e), d in zip(case.width(), inner, strict=True))
    assert len(crop) == r
    return full[(..., *crop)]


def integer_sums(case: FamilyCase, x: np.ndarray, xz: int, w: np.ndarray,
                 wz: np.ndarray) -> np.ndarray:
    """``sum (Xpad - xz) * (W[m] - wz[m])`` exactly (int64; the float64 sums of integers
    below 2**53 are exact), the padding holding xz (group 1)."""
    xs = np.pad(x.astype(np.float64) - xz, [(0, 0)] * 2 + case.width())
    ws = w.astype(np.float64) - np.asarray(wz, np.float64).reshape((-1,) + (1,) * (w.ndim - 1))
    out = case.output_shape()[2:]
    y = np.zeros((x.shape[0], w.shape[0], *out))
    for tap in np.ndindex(*w.shape[2:]):
        window = tuple(slice(t, t + (o - 1) * s + 1, s) for t, o, s in zip(
            tap, out, case.stride(), strict=True))
        y += np.einsum("nc...,mc->nm...", xs[(..., *window)], ws[(..., *tap)], optimize=True)
    return y.astype(np.int64)


def requantized(acc: np.ndarray, inputs: dict) -> np.ndarray:
    """``saturate(round_half_to_even(acc * x_scale * w_scale[m] / y_scale) + y_zero_point)``
    from the exact rational multipliers, in Python integers."""
    m = acc.shape[1]
    xs, ys = Fraction(float(inputs["x_scale"])), Fraction(float(inputs["y_scale"]))
    scales = np.broadcast_to(inputs["w_scale"].reshape(-1), (m,))
    y = np.empty(acc.shape, np.int64)
    for channel in range(m):
        f = xs * Fraction(float(scales[channel])) / ys
        num = acc[:, channel].astype(object) * f.numerator
        low, rest = num // f.denominator, num % f.denominator
        up = (2 * rest > f.denominator) | ((2 * rest == f.denominator) & (low % 2 == 1))
        y[:, channel] = (low + up).astype(np.int64)
    info = np.iinfo(inputs["y_zero_point"].dtype)
    return np.clip(y + int(inputs["y_zero_point"]), info.min, info.max).astype(info.dtype)


def expected(case: FamilyCase, inputs: dict) -> Any:
    """ConvTranspose: (y64, the same on |x| and |w|); ConvInteger: the exact sums wrapped to
    int32; QLinearConv: the exactly requantized result."""
    if case.transposed:
        x, w = inputs["X"], inputs["W"]
        return conv_transpose64(case, x, w), conv_transpose64(case, np.abs(x), np.abs(w))
    wz = np.broadcast_to(np.asarray(inputs["w_zero_point"], np.int64).reshape(-1),
                         (case.w_shape[0],))
    acc = integer_sums(case, inputs["x"], int(inputs["x_zero_point"]), inputs["w"], wz)
    if case.op == "ConvInteger":
        return acc.astype(np.int32)  # the sums here are far below 2**31: no wrap
    return requantized(acc + inputs["B"].reshape((1, -1) + (1,) * (acc.ndim - 2)), inputs)


def verify(case: FamilyCase, want: Any, got: Any, who: str = "") -> tuple[str, float | None,
                                                                           str]:
    """(status, error ratio, note). ConvTranspose: the worst |y - y64| / (n * eps32 * scale)
    with n = C/group * prod(k) (at most 1 for any float32 sum order). Integer results: equal
    to the oracle, type included; a peer other than padconv whose QLinearConv result differs
    by one unit somewhere is reported ("ok", counted in the note: float32 requantization
    rounds ties and near-ties either way), padconv never."""
    got = np.asarray(got)
    if case.transposed:
        (y64, scale), ratio = want, math.inf
        if got.shape == y64.shape and got.dtype == np.float32:
            bound = np.maximum(case.products() * EPS32 * scale, np.finfo(float).tiny)
            ratio = float(np.max(np.abs(got - y64) / bound)) if got.size else 0.0
        ratio = ratio if math.isfinite(ratio) else math.inf
        return ("ok", ratio, "") if ratio <= 1 else ("mismatch", ratio,
                                                     f"error {ratio:.3g}x the bound")
    if got.shape != want.shape or got.dtype != want.dtype:
        return "mismatch", None, f"{got.dtype} {got.shape}, expected {want.dtype} {want.shape}"
    differ = np.abs(got.astype(np.int64) - want.astype(np.int64))
    if not differ.any():
        return "ok", 0.0, ""
    one_unit = case.op == "QLinearConv" and "padconv" not in who and differ.max() == 1
    count = int(np.count_nonzero(differ))
    if one_unit:
        return "ok", None, f"{count} elements off by one (float32 requantization)"
    return "mismatch", None, f"{count} elements differ, by up to {int(differ.max())}"


# --- how each peer runs a case ----------------------------------------------------------------


def padconv_call(case: FamilyCase, inputs: dict) -> Callable[[], np.ndarray]:
    """padconv_cli.conv_transpose / conv_integer / qlinear_conv on the inputs."""
    import padconv_cli

    attrs = case.attributes()
    if case.transposed:
        return lambda: padconv_cli.conv_transpose(inputs["X"], inputs["W"], **attrs)
    if case.op == "ConvInteger":
        return lambda: padconv_cli.conv_integer(*inputs.values(), **attrs)
    args = [inputs[k] for k in ("x", "x_scale", "x_zero_point", "w", "w_scale", "w_zero_point",
                                "y_scale", "y_zero_point")]
    return lambda: padconv_cli.qlinear_conv(*args, inputs["B"], **attrs)


def one_node_model(case: FamilyCase, inputs: dict) -> bytes:
    """The case as a one-node ONNX model (opset 22; ConvInteger and QLinearConv are the opset-10
    operators it includes) whose inputs are all graph inputs, fed on every call as Conv's
    are."""
    from onnx import helper

    def info(name: str, array: np.ndarray) -> object:
        return helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(array.dtype),
                                             list(array.shape))

    node = helper.make_node(case.op, list(inputs), ["Y"], **case.attributes())
    y_type = {"ConvTranspose": np.float32, "ConvInteger": np.int32}.get(case.op, np.uint8)
    out = helper.make_tensor_value_info("Y", helper.np_dtype_to_tensor_dtype(np.dtype(y_type)),
                                        None)
    graph = helper.make_graph([node], "bench", [info(k, v) for k, v in inputs.items()], [out])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)], ir_version=10)
    return model.SerializeToString()


def torch_call(case: FamilyCase, inputs: dict) -> Callable[[], np.ndarray]:
    """F.conv_transpose1d/2d with symmetric padding; torch has no ONNX ConvInteger or
    QLinearConv (ImportError: reported as skipped)."""
    if not case.transposed:
        raise ImportError(f"torch has no {case.op} with ONNX semantics")
    import torch
    import torch.nn.functional as F  # noqa: N812

    x, w = torch.from_numpy(inputs["X"]), torch.from_numpy(inputs["W"])
    r = len(case.x_shape) - 2
    fn = (F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d)[r - 1]
    kwargs = {"stride": case.stride(), "padding": [b for b, _ in case.width()],
              "groups": case.group}

    def run() -> np.ndarray:
        with torch.inference_mode():
            return fn(x, w, **kwargs).numpy()

    return run
