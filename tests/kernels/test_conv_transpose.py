"""ConvTranspose against the float64 scatter-add oracle, torch, and itself on other threads."""

from __future__ import annotations

import signal

import ml_dtypes
import numpy as np
import pytest
from family_oracles import (
    assert_transpose_within_bound,
    conv_transpose_error_bound,
    oracle_conv_transpose,
)
from hypothesis import given, settings
from hypothesis import strategies as st
from native_stops import (
    STOP_SECONDS,
    outcome_when_stopped_from_another_thread,
    seconds_to_stop_on_a_signal,
)

from padconv_cli.errors import AttributeValueError, UnsupportedDtypeError
from padconv_cli.kernels import native
from padconv_cli.kernels.conv_transpose import conv_transpose, plan_conv_transpose, scatter_add


def random_case(x_shape, w_shape, dtype=np.float32, seed=0, group=1):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(x_shape).astype(dtype)
    w = rng.standard_normal(w_shape).astype(dtype)
    b = rng.standard_normal(w_shape[1] * group).astype(dtype)
    return x, w, b


CASES = [
    ((1, 3, 5), (3, 2, 3), {}),
    ((2, 4, 5, 6), (4, 3, 3, 3), {"strides": [2, 3], "pads": [1, 0, 2, 1]}),
    ((1, 4, 4, 5), (4, 2, 2, 3), {"group": 2, "strides": [3, 2], "dilations": [2, 3]}),
    ((1, 6, 4, 4), (6, 1, 3, 3), {"group": 6, "strides": [2, 2], "pads": [1, 1, 1, 1],
                                  "output_padding": [1, 1]}),
    ((1, 2, 3, 4, 3), (2, 2, 2, 3, 2), {"strides": [2, 1, 3], "dilations": [1, 2, 1]}),
    ((1, 2, 4, 4), (2, 3, 4, 4), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((1, 2, 3, 3), (2, 2, 3, 3), {"strides": [3, 2], "output_shape": [10, 8]}),
    ((1, 2, 3, 3), (2, 2, 3, 3), {"strides": [2, 2], "auto_pad": "SAME_LOWER",
                                  "output_padding": [1, 0]}),
    ((1, 2, 5), (2, 2, 2), {"strides": [4], "pads": [5, 3]}),
    ((1, 2, 5), (2, 2, 3), {"strides": [3], "dilations": [4], "output_padding": [3]}),
    ((1, 2, 3), (2, 1, 1), {"strides": [3], "auto_pad": "SAME_UPPER"}),
    ((2, 5, 4, 3), (5, 3, 2, 2), {"strides": [2, 2]}),  # kernel == stride: stacked phases
    ((1, 3, 7), (3, 4, 3), {"strides": [3]}),
    ((1, 2, 3, 2, 4), (2, 2, 2, 1, 3), {"strides": [2, 1, 3]}),
    ((2, 3, 5), (3, 2, 16), {"strides": [8], "pads": [4, 4]}),  # phases interleaved
    ((1, 3, 5), (3, 2, 2), {"strides": [2], "pads": [2, 2]}),  # ... each from inside X
    ((1, 4, 3, 4, 2), (4, 2, 4, 3, 2), {"strides": [2, 1, 2], "pads": [1, 1, 0, 1, 1, 0],
                                        "group": 2}),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, ml_dtypes.bfloat16])
@pytest.mark.parametrize(("x_shape", "w_shape", "attrs"), CASES)
def test_matches_the_scatter_add_oracle(x_shape, w_shape, attrs, dtype):
    x, w, b = random_case(x_shape, w_shape, dtype, group=attrs.get("group", 1))
    y = conv_transpose(x, w, b, **attrs)
    assert y.dtype == np.dtype(dtype)
    assert_transpose_within_bound(y, x, w, b, **attrs)


@pytest.mark.parametrize(("x_shape", "w_shape", "attrs"), CASES)
def test_col2im_path_matches_the_oracle(x_shape, w_shape, attrs):
    x, w, b = random_case(x_shape, w_shape, np.float64, group=attrs.get("group", 1))
    plan = plan_conv_transpose(x.shape, w.shape, b.shape, **attrs)
    assert_transpose_within_bound(scatter_add(plan, x, w, b), x, w, b, **attrs)


def test_infinite_weight_makes_no_nan_from_padding():
    x = np.ones((1, 1, 2), np.float32)
    w = np.array([[[np.inf, 1.0]]], np.float32)
    y = conv_transpose(x, w, strides=[3])
    np.testing.assert_array_equal(y, [[[np.inf, 1.0, 0.0, np.inf, 1.0]]])


@pytest.mark.parametrize("value", [np.inf, np.nan])
def test_non_finite_weight_of_interleaved_phases_reaches_only_its_outputs(value):
    """A GAN-like 4x4 stride-2 pads-1 layer (phases interleaved, W checked while gathered):
    the one bad tap reaches only the outputs the definition gives it."""
    x, w, b = random_case((1, 3, 4, 4), (3, 2, 4, 4), np.float64, seed=11)
    w[1, 0, 2, 3] = value
    attrs = {"strides": [2, 2], "pads": [1, 1, 1, 1]}
    y = conv_transpose(x.astype(np.float32), w.astype(np.float32), b.astype(np.float32),
                       **attrs)
    expected = oracle_conv_transpose(x, w, b, **attrs)
    np.testing.assert_array_equal(np.isfinite(y), np.isfinite(expected))
    assert np.isfinite(y[0, 1]).all() and not np.isfinite(y[0, 0]).all()


@pytest.mark.parametrize("threads", ["1", "2", "3"])
def test_result_does_not_depend_on_the_thread_count(monkeypatch, threads):
    x, w, b = random_case((2, 16, 9, 11), (16, 8, 4, 4), seed=3)
    attrs = {"strides": [2, 2], "pads": [1, 1, 1, 1]}
    monkeypatch.setenv("PADCONV_NATIVE_THREADS", "1")
    one = conv_transpose(x, w, b, **attrs)
    monkeypatch.setenv("PADCONV_NATIVE_THREADS", threads)
    np.testing.assert_array_equal(conv_transpose(x, w, b, **attrs), one)


@pytest.mark.parametrize("threads", ["2", "3"])
def test_kernel_equal_to_stride_does_not_depend_on_the_thread_count(monkeypatch, threads):
    x, w, b = random_case((2, 16, 9, 11), (16, 8, 2, 3), seed=4)
    attrs = {"strides": [2, 3]}
    monkeypatch.setenv("PADCONV_NATIVE_THREADS", "1")
    one = conv_transpose(x, w, b, **attrs)
    assert_transpose_within_bound(one, x, w, b, **attrs)
    monkeypatch.setenv("PADCONV_NATIVE_THREADS", threads)
    np.testing.assert_array_equal(conv_transpose(x, w, b, **attrs), one)


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_any_attributes_match_the_oracle(data):
    rank = data.draw(st.integers(1, 2), label="rank")
    group = data.draw(st.integers(1, 2), label="group")
    cg, mg = data.draw(st.integers(1, 2)), data.draw(st.integers(1, 2))
    size = [data.draw(st.integers(1, 4)) for _ in range(rank)]
    kernel = [data.draw(st.integers(1, 3)) for _ in range(rank)]
    strides = [data.draw(st.integers(1, 3)) for _ in range(rank)]
    dilations = [data.draw(st.integers(1, 3)) for _ in range(rank)]
    padding = [data.draw(st.integers(0, max(s, d) - 1))
               for s, d in zip(strides, dilations, strict=True)]
    attrs = {"strides": strides, "dilations": dilations, "group": group,
             "output_padding": padding}
    mode = data.draw(st.sampled_from(["pads", "SAME_UPPER", "SAME_LOWER", "VALID", "shape"]))
    if mode == "pads":
        attrs["pads"] = [data.draw(st.integers(0, 2)) for _ in range(2 * rank)]
    elif mode == "shape":
        attrs["output_shape"] = [data.draw(st.integers(1, 12)) for _ in range(rank)]
    else:
        attrs["auto_pad"] = mode
    x, w, b = random_case((1, cg * group, *size), (cg * group, mg, *kernel), np.float64,
                          seed=data.draw(st.integers(0, 99)), group=group)
    try:
        plan = plan_conv_transpose(x.shape, w.shape, b.shape, **attrs)
    except AttributeValueError:
        return  # an empty output
    y = conv_transpose(x, w, b, **attrs)
    assert y.shape == plan.output_shape
    assert_transpose_within_bound(y, x, w, b, **attrs)


def test_grouped_weights_keep_their_groups():
    """W is (C, M/group, k): each group's output channels see only its input channels, and
    each output channel its own bias."""
    x = np.zeros((1, 4, 1), np.float64)
    x[0, 2] = 1.0  # only group 1 (channels 2, 3) has input
    w = np.arange(4 * 3 * 1, dtype=np.float64).reshape(4, 3, 1)
    b = np.arange(6, dtype=np.float64) * 100
    y = conv_transpose(x, w, b, group=2)
    np.testing.assert_array_equal(y[0, :, 0], [0, 100, 200, 300 + 6, 400 + 7, 500 + 8])
    np.testing.assert_array_equal(y, oracle_conv_transpose(x, w, b, group=2))


@pytest.mark.parametrize(("attrs", "param"), [
    ({"output_padding": [2]}, "output_padding"),
    ({"output_padding": [-1]}, "output_padding"),
    ({"pads": [1, 1], "auto_pad": "SAME_UPPER"}, ("pads", "auto_pad")),
    ({"output_shape": [0]}, "output_shape"),
    ({"output_shape": [3, 4]}, "output_shape"),
    ({"strides": [0]}, "strides"),
    ({"group": 3}, "group"),
    ({"pads": [4, 4]}, "pads"),
    ({"kernel_shape": [2]}, "kernel_shape"),
])
def test_bad_attributes_name_their_parameter(attrs, param):
    x, w, b = random_case((1, 2, 3), (2, 2, 3))
    with pytest.raises(AttributeValueError) as caught:
        conv_transpose(x, w, b, strides=attrs.pop("strides", [2]), **attrs)
    assert caught.value.param == param


def test_weights_with_the_wrong_channel_count_are_refused():
    x, w, _ = random_case((1, 2, 3), (3, 2, 3))
    with pytest.raises(AttributeValueError, match="W"):
        conv_transpose(x, w)


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.complex64])
def test_non_float_inputs_are_refused(dtype):
    with pytest.raises(UnsupportedDtypeError):
        conv_transpose(np.zeros((1, 1, 2), dtype), np.zeros((1, 1, 1), dtype))


def test_mixed_dtypes_are_refused():
    with pytest.raises(UnsupportedDtypeError):
        conv_transpose(np.zeros((1, 1, 2), np.float32), np.zeros((1, 1, 1), np.float64))


torch = pytest.importorskip("torch")


@pytest.mark.parametrize(("x_shape", "w_shape", "attrs"), [
    ((1, 8, 7), (8, 4, 5), {"strides": [3], "pads": [2, 2], "output_padding": [1]}),
    ((2, 6, 5, 6), (6, 2, 4, 4), {"strides": [2, 2], "pads": [1, 1, 1, 1], "group": 3}),
    ((1, 4, 3, 4, 5), (4, 3, 3, 2, 3), {"strides": [1, 2, 2], "dilations": [2, 1, 1],
                                        "pads": [0, 1, 1, 0, 1, 1]}),
    ((1, 2, 5), (2, 2, 3), {"strides": [2], "dilations": [3], "output_padding": [2]}),
])
def test_agrees_with_torch(x_shape, w_shape, attrs):
    """torch takes symmetric pads, output_padding below stride or dilation, W (C, M/G, k)."""
    x, w, b = random_case(x_shape, w_shape, np.float64, seed=5, group=attrs.get("group", 1))
    rank = len(x_shape) - 2
    pads = attrs.get("pads", [0] * 2 * rank)
    function = {1: torch.nn.functional.conv_transpose1d, 2: torch.nn.functional.conv_transpose2d,
                3: torch.nn.functional.conv_transpose3d}[rank]
    expected = function(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b),
                        stride=attrs.get("strides", 1), padding=pads[:rank],
                        output_padding=attrs.get("output_padding", 0),
                        groups=attrs.get("group", 1),
                        dilation=attrs.get("dilations", 1)).numpy()
    y = conv_transpose(x, w, b, **attrs)
    assert y.shape == expected.shape
    # each float64 sum is within the bound of the exact one, so the two within twice the bound
    bound = conv_transpose_error_bound(x, w, b, result_dtype=np.float64, **attrs)
    assert np.all(np.abs(y - expected) <= 2 * bound)


def test_library_bound_covers_a_float32_result_against_float64():
    from padconv_cli.kernels.conv_transpose_bound import conv_transpose_error_bound

    x, w, b = random_case((1, 32, 6, 6), (32, 4, 4, 4), np.float32, seed=9)
    attrs = {"strides": [2, 2], "pads": [1, 1, 1, 1]}
    narrow = conv_transpose(x, w, b, **attrs).astype(np.float64)
    wide = conv_transpose(*(t.astype(np.float64) for t in (x, w, b)), **attrs)
    bound = conv_transpose_error_bound(x, w, b, **attrs)
    assert np.all(np.abs(narrow - wide) <= bound)
    assert np.all(bound > 0)


def test_outputs_no_tap_reaches_hold_the_bias():
    """Stride 7 with a kernel of 2: five of every seven outputs are the bias alone."""
    x, w, b = random_case((1, 3, 4, 3), (3, 2, 2, 1), np.float64, seed=4)
    attrs = {"strides": [7, 5], "output_padding": [6, 4]}
    y = conv_transpose(x, w, b, **attrs)
    assert_transpose_within_bound(y, x, w, b, **attrs)
    np.testing.assert_array_equal(y[0, :, 2, 1], b)


def test_no_input_channels_gives_the_bias():
    x = np.zeros((1, 0, 3), np.float32)
    w = np.zeros((0, 2, 2), np.float32)
    b = np.array([1.5, -2.0], np.float32)
    np.testing.assert_array_equal(conv_transpose(x, w, b), np.broadcast_to(b[:, None], (1, 2, 4)))


def _onnxruntime_conv_transpose(x, w, b, attrs):
    """onnxruntime's ConvTranspose-22 of float32 inputs, or None when it refuses the case."""
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper

    node = helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], **attrs)
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, a.shape)
                      for n, a in (("x", x), ("w", w), ("b", b))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)])
    model.ir_version = 10
    options = ort.SessionOptions()
    options.log_severity_level = 4
    try:
        session = ort.InferenceSession(model.SerializeToString(), options,
                                       providers=["CPUExecutionProvider"])
        return session.run(None, {"x": x, "w": w, "b": b})[0]
    except Exception:  # onnxruntime refuses some valid cases (docs/semantics-family.md)
        return None


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_onnxruntime_agrees_within_the_bound(data):
    """Random attributes; SAME where in*stride exceeds the un-cropped output is onnxruntime's
    documented deviation and is not drawn."""
    rank = data.draw(st.integers(1, 2))
    group = data.draw(st.integers(1, 2))
    size = [data.draw(st.integers(1, 4)) for _ in range(rank)]
    kernel = [data.draw(st.integers(1, 3)) for _ in range(rank)]
    strides = [data.draw(st.integers(1, 3)) for _ in range(rank)]
    dilations = [data.draw(st.integers(1, 2)) for _ in range(rank)]
    padding = [data.draw(st.integers(0, s - 1)) for s in strides]
    attrs = {"strides": strides, "dilations": dilations, "group": group,
             "output_padding": padding}
    mode = data.draw(st.sampled_from(["pads", "SAME_UPPER", "SAME_LOWER", "shape"]))
    if mode == "pads":
        attrs["pads"] = [data.draw(st.integers(0, 1)) for _ in range(2 * rank)]
    elif mode == "shape":
        full = [s * (n - 1) + (k - 1) * d + 1 + p for n, k, s, d, p in
                zip(size, kernel, strides, dilations, padding, strict=True)]
        attrs["output_shape"] = [max(1, f - data.draw(st.integers(0, 2))) for f in full]
    else:
        attrs["auto_pad"] = mode
    x, w, b = random_case((1, 2 * group, *size), (2 * group, 2, *kernel), np.float32,
                          seed=data.draw(st.integers(0, 99)), group=group)
    try:
        plan = plan_conv_transpose(x.shape, w.shape, b.shape, **attrs)
    except AttributeValueError:
        return
    if mode.startswith("SAME") and any(p < 0 for p in plan.pads):
        return
    theirs = _onnxruntime_conv_transpose(x, w, b, attrs)
    if theirs is None:
        return

    ours = conv_transpose(x, w, b, **attrs)
    assert theirs.shape == ours.shape
    oracle = oracle_conv_transpose(x, w, b, **attrs)
    bound = conv_transpose_error_bound(x, w, b, **attrs)
    assert np.all(np.abs(theirs - oracle) <= 2 * bound)
    assert np.all(np.abs(ours - oracle) <= bound)


@pytest.mark.parametrize("group", [1, 2])
def test_chunks_of_output_channels_give_the_same_bits(monkeypatch, group):
    """Images and ranges of output channels computed one at a time (a small phase budget):
    the same result, bit for bit."""
    from padconv_cli.kernels import conv_transpose as module

    x, w, b = random_case((2, 4, 5, 6), (4, 3, 3, 3), np.float32, seed=6, group=group)
    attrs = {"strides": [2, 3], "pads": [1, 0, 0, 2], "group": group}
    whole = conv_transpose(x, w, b, **attrs)
    monkeypatch.setattr(module, "PHASE_BYTES", 64)
    plan = plan_conv_transpose(x.shape, w.shape, b.shape, **attrs)
    assert len(module.channel_chunks(plan, 4 * 8)) > 1
    np.testing.assert_array_equal(conv_transpose(x, w, b, **attrs), whole)
    assert_transpose_within_bound(whole, x, w, b, **attrs)


@pytest.mark.parametrize("output_shape", [[11, 3], [1, 9], [2, 14]])
def test_output_shape_far_from_the_uncropped_output(output_shape):
    """Totals of -7 (pads -3 and -4: bias-only borders) to +3 (cropping inside X)."""
    x, w, b = random_case((1, 2, 2, 3), (2, 3, 2, 2), np.float64, seed=8)
    attrs = {"strides": [2, 3], "output_shape": output_shape}
    y = conv_transpose(x, w, b, **attrs)
    assert y.shape[2:] == tuple(output_shape)
    assert_transpose_within_bound(y, x, w, b, **attrs)


# The one native job of the phases (phase_convs): its refusals, and its stops (Ctrl-C on the
# main thread, request_stop() on any other), like the core's Conv.

def _phase_job(taps=None, first=0, x_channels=256, size=128):
    """About 34 GFLOP on the portable kernels: seconds on any machine."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((256, 64, 64), dtype=np.float32)  # C, M, 8x8 kernel flattened
    x = rng.standard_normal((1, x_channels, size, size), dtype=np.float32)
    y = np.empty((64, 128, 128), np.float32)  # strides 1: one phase slot
    taps = np.arange(64, dtype=np.int64).reshape(1, 64) if taps is None else taps
    return w, None, y, 0, [(x, taps, (8, 8), (4, 4), (1, 1), first)], (1, 1), 2, "generic"


@pytest.mark.parametrize("change", [
    {"taps": np.full((1, 64), 64, np.int64)},  # a tap past W's kernel
    {"taps": np.zeros((1, 63), np.int64)},  # fewer taps than the tap shape holds
    {"first": 1},  # phases past the one slot of strides 1
    {"x_channels": 255},  # X's channels are not W's
])
def test_phase_job_refuses_runs_that_do_not_fit_its_buffers(change):
    from padconv_cli.kernels import conv_transpose as ct

    with pytest.raises(ValueError):
        ct.phase_convs(*_phase_job(**change))


@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="needs setitimer")
def test_a_signal_handler_that_raises_stops_the_phase_job_on_the_main_thread():
    from padconv_cli.kernels import conv_transpose as ct

    job = _phase_job()
    assert seconds_to_stop_on_a_signal(lambda: ct.phase_convs(*job)) < STOP_SECONDS


def test_request_stop_stops_the_phase_job_on_another_thread():
    from padconv_cli.kernels import conv_transpose as ct

    job = _phase_job()
    outcome = outcome_when_stopped_from_another_thread(lambda: ct.phase_convs(*job))
    assert len(outcome) == 1 and isinstance(outcome[0], RuntimeError), outcome
    x, w, b = random_case((1, 3, 4, 4), (3, 2, 4, 4), seed=2)
    attrs = {"strides": [2, 2], "pads": [1, 1, 1, 1]}
    assert_transpose_within_bound(conv_transpose(x, w, b, **attrs), x, w, b, **attrs)


@pytest.mark.parametrize("isa", ["avx512", "avx2", "generic"])
@pytest.mark.parametrize(("x_shape", "w_shape", "attrs"), [
    ((1, 5, 6, 9), (5, 6, 4, 4), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),  # stacked phases
    ((1, 5, 6, 20), (5, 12, 3, 3), {"pads": [1, 1, 1, 1]}),  # one stride-1 phase
])
def test_every_instruction_set_runs_the_phases_within_the_bound(monkeypatch, isa, x_shape,
                                                                 w_shape, attrs):
    # with AVX2 these phases run on the plane kernel's 6-row tiles, packed for them
    if isa not in native.available_isas():
        pytest.skip(f"this CPU has no {isa}")
    monkeypatch.setenv(native.ISA_VARIABLE, isa)
    x, w, b = random_case(x_shape, w_shape)
    assert_transpose_within_bound(conv_transpose(x, w, b, **attrs), x, w, b, **attrs)
