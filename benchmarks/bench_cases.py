"""Benchmark cases: the tensors, the operator attributes and the work each case represents."""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

FLOAT32_BYTES = 4


@dataclass(frozen=True)
class ConvCase:
    """One Conv call: input/weight shapes and the ONNX attributes (no bias, float32)."""

    name: str
    label: str
    x_shape: tuple[int, ...]
    w_shape: tuple[int, ...]
    pads: tuple[int, ...] | None = None
    strides: tuple[int, ...] | None = None
    dilations: tuple[int, ...] | None = None
    group: int = 1

    kind = "conv"

    @property
    def spatial_rank(self) -> int:
        return len(self.x_shape) - 2

    def attributes(self) -> dict[str, object]:
        """The ONNX Conv attributes of the case, omitting those left at their default."""
        attrs: dict[str, object] = {"group": self.group}
        for key in ("pads", "strides", "dilations"):
            value = getattr(self, key)
            if value is not None:
                attrs[key] = list(value)
        return attrs

    def output_spatial(self) -> tuple[int, ...]:
        """out_i = floor((in_i + pad_begin_i + pad_end_i - ((k_i - 1) * d_i + 1)) / s_i) + 1."""
        rank = self.spatial_rank
        pads = self.pads or (0,) * (2 * rank)
        strides = self.strides or (1,) * rank
        dilations = self.dilations or (1,) * rank
        sizes = []
        for i in range(rank):
            extent = (self.w_shape[2 + i] - 1) * dilations[i] + 1
            padded = self.x_shape[2 + i] + pads[i] + pads[i + rank]
            sizes.append((padded - extent) // strides[i] + 1)
        return tuple(sizes)

    def output_shape(self) -> tuple[int, ...]:
        """(N, M, *out_spatial) with M = W.shape[0]."""
        return (self.x_shape[0], self.w_shape[0], *self.output_spatial())

    def reduction_size(self) -> int:
        """Products summed per output element: C/group * prod(kernel) = prod(W.shape[1:])."""
        return math.prod(self.w_shape[1:])

    def flops(self) -> int:
        """2 * N * M * C/group * prod(kernel) * prod(out_spatial) (one multiply + one add each)."""
        n, m = self.x_shape[0], self.w_shape[0]
        return 2 * n * m * self.reduction_size() * math.prod(self.output_spatial())

    def describe(self) -> str:
        """Short human summary: shapes and the non-default attributes."""
        parts = [f"X {'x'.join(map(str, self.x_shape))}", f"W {'x'.join(map(str, self.w_shape))}"]
        for key in ("pads", "strides", "dilations"):
            value = getattr(self, key)
            if value is not None and len(set(value)) == 1:
                parts.append(f"{key} {value[0]}")
            elif value is not None:
                parts.append(f"{key} {list(value)}")
        if self.group != 1:
            parts.append(f"group {self.group}")
        return ", ".join(parts)

    def make_inputs(self, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """X and W drawn uniformly from [-1, 1) as float32."""
        return {"X": uniform_float32(rng, self.x_shape), "W": uniform_float32(rng, self.w_shape)}


@dataclass(frozen=True)
class PadCase:
    """One Pad call: input shape, ONNX pads (all axes, begins then ends) and the mode."""

    name: str
    label: str
    x_shape: tuple[int, ...]
    pads: tuple[int, ...]
    mode: str

    kind = "pad"

    def output_shape(self) -> tuple[int, ...]:
        """out_i = in_i + pads[i] + pads[i + rank]."""
        rank = len(self.x_shape)
        return tuple(d + self.pads[i] + self.pads[i + rank] for i, d in enumerate(self.x_shape))

    def numpy_pad_width(self) -> tuple[tuple[int, int], ...]:
        """ONNX [b_0..b_{r-1}, e_0..e_{r-1}] as numpy ((b_0, e_0), ...)."""
        rank = len(self.x_shape)
        return tuple((self.pads[i], self.pads[i + rank]) for i in range(rank))

    def interior_slices(self) -> tuple[slice, ...]:
        """Where the input lands inside the output (non-negative pads only)."""
        width = self.numpy_pad_width()
        return tuple(slice(b, b + d) for (b, _), d in zip(width, self.x_shape, strict=True))

    def bytes_moved(self) -> int:
        """Input bytes + output bytes (float32)."""
        return FLOAT32_BYTES * (math.prod(self.x_shape) + math.prod(self.output_shape()))

    def describe(self) -> str:
        """Short human summary: shape, pads and mode."""
        pads = ",".join(map(str, self.pads))
        return f"X {'x'.join(map(str, self.x_shape))}, pads [{pads}]"

    def make_inputs(self, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """The data tensor drawn uniformly from [-1, 1) as float32."""
        return {"data": uniform_float32(rng, self.x_shape)}


Case = ConvCase | PadCase


def uniform_float32(rng: np.random.Generator, shape: Sequence[int]) -> np.ndarray:
    """Uniform [-1, 1) samples of the given shape, float32."""
    return rng.uniform(-1.0, 1.0, size=shape).astype(np.float32)


def _spatial_pads(rank: int, amount: int) -> tuple[int, ...]:
    """ONNX pads adding `amount` before and after each of the last two axes."""
    begins = (0,) * (rank - 2) + (amount, amount)
    return begins + begins


CONV_CASES: tuple[ConvCase, ...] = (
    ConvCase("conv/resnet3x3", "ResNet 3x3", (1, 64, 56, 56), (64, 64, 3, 3), pads=(1,) * 4),
    ConvCase(
        "conv/stem7x7s2", "stem 7x7 /2", (1, 3, 224, 224), (64, 3, 7, 7),
        pads=(3,) * 4, strides=(2, 2),
    ),
    ConvCase("conv/pointwise", "pointwise 1x1", (1, 256, 28, 28), (512, 256, 1, 1)),
    ConvCase(
        "conv/depthwise", "depthwise 3x3", (1, 256, 56, 56), (256, 1, 3, 3),
        pads=(1,) * 4, group=256,
    ),
    ConvCase("conv/1d", "1-D k9", (4, 16, 16000), (32, 16, 9), pads=(4, 4)),
    ConvCase("conv/3d", "3-D 3x3x3", (1, 8, 32, 32, 32), (16, 8, 3, 3, 3), pads=(1,) * 6),
    ConvCase(
        "conv/dilated", "dilated 3x3 d2", (1, 32, 64, 64), (32, 32, 3, 3),
        pads=(2,) * 4, dilations=(2, 2),
    ),
    ConvCase("conv/batch8", "ResNet 3x3, N=8", (8, 64, 56, 56), (64, 64, 3, 3), pads=(1,) * 4),
)

PAD_MODES = ("constant", "reflect", "edge", "wrap")

PAD_CASES: tuple[PadCase, ...] = tuple(
    PadCase(f"pad/{mode}", f"Pad {mode}", (8, 64, 128, 128), _spatial_pads(4, 3), mode)
    for mode in PAD_MODES
)

KERNEL_CASES: tuple[Case, ...] = CONV_CASES + PAD_CASES

# Whole-process measurements, selectable with --cases like the kernel cases.
PROCESS_CASES: tuple[str, ...] = ("cli/startup", "cli/peak-rss")


def matches(name: str, patterns: Iterable[str]) -> bool:
    """True when no pattern is given or any pattern matches: glob if it has *?[ else substring."""
    patterns = list(patterns)
    if not patterns:
        return True
    for pattern in patterns:
        is_glob = any(ch in pattern for ch in "*?[")
        if (is_glob and fnmatch.fnmatchcase(name, pattern)) or (not is_glob and pattern in name):
            return True
    return False


def select_cases(patterns: Iterable[str]) -> list[Case]:
    """The kernel cases whose names match the --cases patterns."""
    patterns = list(patterns)
    return [case for case in KERNEL_CASES if matches(case.name, patterns)]
