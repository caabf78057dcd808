"""One input limit for every source (files, stdin, external data, models), and stdin read
against it header first: an endless or oversized stream is refused early, with one line."""

from __future__ import annotations

import io
import resource
import subprocess
import zipfile

import numpy as np
import pytest
from hostile.runner import padconv_command
from npy_bytes import header_dict, npy_image

from padconv_cli.errors import InputError
from padconv_cli.tensor_sources import read_tensor
from padconv_cli.tensorio import ReadPolicy

WAIT_SECONDS = 60
ADDRESS_SPACE = 3 * 2**30  # keeps a regression from eating the machine's memory


def _capped() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


def _npy_bytes(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


def _run(args: list[str], cwd, stdin) -> subprocess.CompletedProcess:
    return subprocess.run([*padconv_command(), *args], cwd=cwd, stdin=stdin,
                          capture_output=True, timeout=WAIT_SECONDS, preexec_fn=_capped)


def _one_line(process: subprocess.CompletedProcess, *words: str) -> str:
    text = process.stderr.decode("utf-8", "replace")
    assert process.returncode == 2, text
    assert "Traceback" not in text and len(text.splitlines()) == 1, text
    for word in words:
        assert word in text, text
    return text


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
@pytest.mark.parametrize("args", [["pad", "-", "--pads", "1", "1"],
                                  ["pad", "[1.0, 2.0]", "--pads", "@-"]], ids=["data", "pads"])
def test_endless_device_on_stdin_is_refused_at_once(tmp_path, device, args):
    with open(device, "rb") as stream:
        process = _run([*args, "-o", "out.npy"], tmp_path, stream)
    _one_line(process, "<stdin>")
    assert not (tmp_path / "out.npy").exists()


def _endless_writer(chunk: bytes) -> subprocess.Popen:
    code = f"import sys\nchunk = {chunk!r} * 65536\nwhile True: sys.stdout.buffer.write(chunk)"
    return subprocess.Popen(["python", "-c", code], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)


@pytest.mark.parametrize("chunk", [b"\x28\x01", b"\x4a\x00"], ids=["int32_data", "raw_data"])
def test_endless_well_formed_tensorproto_stream_stops_at_the_limit(tmp_path, chunk):
    writer = _endless_writer(chunk)
    try:
        process = _run(["pad", "-", "--pads", "1", "1", "--max-input-bytes", "1M"],
                       tmp_path, writer.stdout)
    finally:
        writer.kill()
        writer.wait()
    _one_line(process, "<stdin>", "1.0 MiB", "--max-input-bytes")


def test_npy_header_on_stdin_is_judged_before_the_body_arrives(tmp_path):
    """The stream stays open after the header: the refusal cannot wait for its end."""
    child = subprocess.Popen(
        [*padconv_command(), "pad", "-", "--pads", "1", "1", "--max-input-bytes", "1M"],
        cwd=tmp_path, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    try:
        child.stdin.write(npy_image(header_dict("<f8", (2**27,))))  # 1 GiB of float64 declared
        child.stdin.flush()
        code = child.wait(timeout=WAIT_SECONDS)
        stderr = child.stderr.read().decode()
    finally:
        child.kill()
        child.wait()
        child.stdin.close()
        child.stdout.close()
        child.stderr.close()
    assert code == 2, stderr
    assert "declares" in stderr and "--max-input-bytes" in stderr, stderr


def test_npy_streamed_on_stdin_is_read_exactly(run_cli):
    data = np.arange(1000, dtype=np.float64)
    result = run_cli("pad", "-", "--pads", "1", "1", "-o", "-", input=_npy_bytes(data) + b"x")
    assert result.exit_code == 0, result.stderr
    np.testing.assert_array_equal(np.load(io.BytesIO(result.stdout_bytes)),
                                  np.pad(data, 1))


def test_truncated_npy_body_on_stdin_is_one_line(run_cli):
    image = _npy_bytes(np.arange(100, dtype=np.float64))
    result = run_cli("pad", "-", "--pads", "1", "1", "-o", "-", input=image[:-8])
    assert result.exit_code == 2
    assert "truncated" in result.stderr


def _npz_bytes(**arrays: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, array in arrays.items():
            archive.writestr(f"{name}.npy", _npy_bytes(array))
    return buffer.getvalue()


def test_npz_on_stdin_over_the_limit(run_cli):
    image = _npz_bytes(a=np.zeros(4096))
    result = run_cli("pad", "-", "--pads", "1", "1", "--max-input-bytes", "1K", "-o", "-",
                     input=image)
    assert result.exit_code == 2
    assert "--max-input-bytes" in result.stderr and result.stdout_bytes == b""


@pytest.mark.parametrize("suffix", ["npy", "pb", "npz"])
def test_files_over_the_limit_are_refused_before_reading(run_cli, tmp_path, suffix):
    array = np.zeros((64, 64), np.float64)  # 32 KiB
    path = tmp_path / f"x.{suffix}"
    if suffix == "npy":
        np.save(path, array)
    elif suffix == "npz":
        path.write_bytes(_npz_bytes(x=array))
    else:
        from onnx import numpy_helper

        path.write_bytes(numpy_helper.from_array(array).SerializeToString())
    refused = run_cli("show", str(path), "--max-input-bytes", "16K")
    assert refused.exit_code == 2
    assert "--max-input-bytes = 16.0 KiB" in refused.stderr, refused.stderr
    accepted = run_cli("show", str(path), "--max-input-bytes", "64K")
    assert accepted.exit_code == 0, accepted.stderr


def test_model_over_the_limit_is_refused(run_cli, tmp_path):
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.zeros((8, 8, 16, 16), np.float32), "W")
    node = helper.make_node("Conv", ["X", "W"], ["Y"])
    graph = helper.make_graph([node], "g", [], [], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    (tmp_path / "m.onnx").write_bytes(model.SerializeToString())
    np.save(tmp_path / "x.npy", np.zeros((1, 8, 16, 16), np.float32))
    del TensorProto
    result = run_cli("conv", str(tmp_path / "x.npy"), "--from-model", str(tmp_path / "m.onnx"),
                     "--explain", "--max-input-bytes", "8K")
    assert result.exit_code == 2
    assert "m.onnx" in result.stderr and "--max-input-bytes" in result.stderr


def test_library_callers_pass_the_limit_to_one_read(tmp_path):
    np.save(tmp_path / "x.npy", np.zeros(1024, np.float64))
    with pytest.raises(InputError) as caught:
        read_tensor(tmp_path / "x.npy", policy=ReadPolicy(max_input_bytes=1000))
    assert caught.value.param == "max_input_bytes"
    assert read_tensor(tmp_path / "x.npy").shape == (1024,)


def test_one_run_does_not_leak_its_limit_into_the_next(run_cli, tmp_path):
    np.save(tmp_path / "x.npy", np.zeros(1024, np.float64))
    assert run_cli("show", str(tmp_path / "x.npy"), "--max-input-bytes", "1K").exit_code == 2
    assert run_cli("show", str(tmp_path / "x.npy")).exit_code == 0


def _scan(data: bytes, limit: int = 2**30) -> bytes:
    from padconv_cli.tensorio.sniff import read_tensorproto_stream

    def over(what: str) -> InputError:
        return InputError(f"over: {what}")

    return read_tensorproto_stream(io.BytesIO(data[1:]), data[:1], limit, "<stdin>", over)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int8", "uint16", "int32", "int64",
                                   "uint64", "bool", "complex64", "float16"])
# (1,) * 32: many dimensions, within numpy 1.26's limit of 32 (numpy 2 allows 64)
@pytest.mark.parametrize("shape", [(), (0,), (3,), (2, 3, 4), (1,) * 32])
def test_every_tensorproto_onnx_writes_passes_the_stream_scanner(dtype, shape):
    from onnx import numpy_helper

    array = (np.arange(int(np.prod(shape))) % 2).astype(dtype).reshape(shape)
    data = numpy_helper.from_array(array, name="t").SerializeToString()
    assert _scan(data) == data


def test_typed_fields_strings_and_external_entries_pass_the_scanner():
    from onnx import TensorProto, helper

    tensors = [
        helper.make_tensor("f", TensorProto.FLOAT, [3], [1.0, 2.0, 3.0]),
        helper.make_tensor("d", TensorProto.DOUBLE, [2], [1.0, 2.0]),
        helper.make_tensor("i", TensorProto.INT64, [2], [-1, 2**40]),
        helper.make_tensor("u", TensorProto.UINT64, [1], [2**63]),
        helper.make_tensor("s", TensorProto.STRING, [2], [b"a", b"bc"]),
    ]
    external = TensorProto(name="e", data_type=TensorProto.FLOAT, dims=[2], doc_string="x")
    external.data_location = TensorProto.EXTERNAL
    entry = external.external_data.add()
    entry.key, entry.value = "location", "data.bin"
    for tensor in [*tensors, external]:
        data = tensor.SerializeToString()
        assert _scan(data) == data


def test_scanner_refuses_more_than_64_dims_and_long_fields():
    with pytest.raises(InputError, match="more than 64 dims"):
        _scan(b"\x08\x01" * 65)
    with pytest.raises(InputError, match="over: field 9 announces"):
        _scan(b"\x4a\xff\xff\xff\x0f", limit=2**20)


def _refused_cleanly(process: subprocess.CompletedProcess, folder, kept: list[str],
                     *words: str) -> None:
    _one_line(process, "--max-input-bytes", *words)
    assert process.stdout == b""
    assert sorted(p.name for p in folder.iterdir()) == sorted(kept)


@pytest.mark.parametrize("engine, output", [("tiled", "out.npy"), ("dask", "out.zarr")])
def test_out_of_core_reads_over_the_limit_are_refused(tmp_path, engine, output):
    """The out-of-core engines read the input in boxes; each box counts against the limit."""
    if engine == "dask":
        pytest.importorskip("zarr")
    np.save(tmp_path / "x.npy", np.ones((1, 2, 512, 1024), np.float32))  # 4 MiB
    process = _run(["pad", "x.npy", "--pads", "0", "0", "1", "1", "0", "0", "1", "1",
                    "--engine", engine, "--max-input-bytes", "1M", "-o", output],
                   tmp_path, subprocess.DEVNULL)
    _refused_cleanly(process, tmp_path, ["x.npy"], "x.npy", "at once")


def test_tiles_within_the_limit_are_read(tmp_path):
    array = np.arange(2 * 512 * 1024, dtype=np.float32).reshape(1, 2, 512, 1024)
    np.save(tmp_path / "x.npy", array)
    process = _run(["pad", "x.npy", "--pads", "0", "0", "1", "1", "0", "0", "1", "1",
                    "--engine", "tiled", "--max-input-bytes", "1M", "--memory-limit", "512K",
                    "-o", "out.npy"], tmp_path, subprocess.DEVNULL)
    assert process.returncode == 0, process.stderr
    expected = np.pad(array, [(0, 0), (0, 0), (1, 1), (1, 1)])
    np.testing.assert_array_equal(np.load(tmp_path / "out.npy"), expected)


def _zarr_store(folder, shape, chunks) -> None:
    zarr = pytest.importorskip("zarr")
    store = zarr.create_array(store=str(folder / "z.zarr"), shape=shape, chunks=chunks,
                              dtype="f8")
    store[...] = np.ones(shape)


PAD = ["pad", "z.zarr", "--pads", "1", "1", "1", "1"]


@pytest.mark.parametrize("args", [["show", "z.zarr"],
                                  [*PAD, "--engine", "memory", "-o", "out.npy"],
                                  [*PAD, "--engine", "dask", "-o", "out.zarr"]],
                         ids=["show", "pad_in_memory", "pad_dask"])
def test_zarr_chunk_that_decodes_over_the_limit_is_refused(tmp_path, args):
    """A 4x4 array stored in one 32x32 chunk: 128 bytes of array, 8 KiB decoded at once."""
    _zarr_store(tmp_path, (4, 4), (32, 32))
    process = _run([*args, "--max-input-bytes", "1K"], tmp_path, subprocess.DEVNULL)
    _refused_cleanly(process, tmp_path, ["z.zarr"], "z.zarr", "chunk")


def test_zarr_array_over_the_limit_is_refused_in_memory(tmp_path):
    _zarr_store(tmp_path, (64, 64), (8, 8))
    process = _run(["show", "z.zarr", "--max-input-bytes", "16K"], tmp_path, subprocess.DEVNULL)
    _refused_cleanly(process, tmp_path, ["z.zarr"], "z.zarr", "declares shape [64, 64]")


def test_library_reads_follow_the_policy(tmp_path):
    from padconv_cli.outofcore.npy_blocks import open_npy_input

    np.save(tmp_path / "x.npy", np.ones((64, 64), np.float64))
    source = open_npy_input(str(tmp_path / "x.npy"), ReadPolicy(max_input_bytes=4096))
    assert source.read((slice(0, 8), slice(None))).shape == (8, 64)  # 4 KiB: within
    with pytest.raises(InputError, match="max_input_bytes"):
        source.read((slice(0, 9), slice(None)))
