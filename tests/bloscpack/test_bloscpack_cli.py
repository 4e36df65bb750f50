"""``arrayio blpk`` and the generic verbs on .blp files, through the real entry point
(cases from bloscpack's cram transcripts, plus clean errors where the reference crashes)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import arrayio.bloscpack as bp


@pytest.fixture
def data_file(tmp_path):
    path = tmp_path / "data.dat"
    path.write_bytes(np.linspace(0, 1, 300_000).tobytes())  # 2.4 MB
    return path


def _ok(result):
    assert result.returncode == 0, result.stderr.decode()
    return result.stdout.decode()


def test_help_and_usage(cli):
    text = _ok(cli("blpk", "--help"))
    for name in ("compress|c", "decompress|d", "append|a", "info|i", "--nthreads", "--force"):
        assert name in text
    result = cli("blpk")
    assert result.returncode == 2 and b"too few arguments" in result.stderr
    assert b"python-blosc" in cli("blpk", "--version").stdout


def test_compress_decompress_naming_and_force(cli, data_file, tmp_path):
    _ok(cli("blpk", "compress", data_file))
    packed = tmp_path / "data.dat.blp"
    assert packed.exists()
    result = cli("blpk", "c", data_file)
    assert result.returncode == 1
    assert result.stderr.decode().strip() == f"arrayio: output file '{packed}' exists! (--force replaces it)"
    _ok(cli("blpk", "--force", "c", data_file))
    result = cli("blpk", "d", packed)
    assert result.returncode == 1 and b"exists!" in result.stderr
    data_file.unlink()
    _ok(cli("blpk", "decompress", packed))
    assert data_file.read_bytes() == np.linspace(0, 1, 300_000).tobytes()
    result = cli("blpk", "c", tmp_path / "missing")
    assert result.returncode == 1 and b"does not exist!" in result.stderr


def test_decompress_extension_rules(cli, data_file, tmp_path):
    other = tmp_path / "packed.bin"
    _ok(cli("blpk", "c", data_file, other))
    result = cli("blpk", "d", other)
    assert result.returncode == 1 and b"does not end with '.blp'" in result.stderr
    result = cli("blpk", "d", "-e", other)
    assert result.returncode == 1 and b"requires use of <out_file>" in result.stderr
    _ok(cli("blpk", "d", "-e", other, tmp_path / "out"))
    assert (tmp_path / "out").read_bytes() == data_file.read_bytes()


@pytest.mark.parametrize("args, code", [
    (["-c", "snappy"], 2), (["-c", "zstd"], 0), (["-k", "sha3"], 2), (["-k", "sha512"], 0),
    (["-z", "64K"], 0), (["-z", "65536"], 0), (["-z", "max"], 0), (["-z", "-1"], 2), (["-z", "garbage"], 2),
    (["-l", "10"], 2), (["-l", "0", "-s", "-t", "4"], 0), (["-o"], 0),
])
def test_compress_options(cli, data_file, tmp_path, args, code):
    out = tmp_path / "o.blp"
    result = cli("blpk", "c", *args, data_file, out)
    assert result.returncode == code, result.stderr.decode()
    if code == 0:
        assert bp.unpack_bytes_from_file(out)[0] == data_file.read_bytes()
        assert bp.validate(out) == []


def test_chunk_size_max_and_no_offsets(cli, data_file, tmp_path):
    _ok(cli("blpk", "c", "-z", "max", "-o", data_file, tmp_path / "m.blp"))
    facts = bp.open(tmp_path / "m.blp").info()
    assert facts["nchunks"] == 1 and facts["chunk_size"] == data_file.stat().st_size and not facts["offsets"]


def test_threads_option(cli, data_file, tmp_path):
    _ok(cli("blpk", "-n", "1", "c", data_file, tmp_path / "t.blp"))
    result = cli("blpk", "-n", "0", "c", data_file, tmp_path / "u.blp")
    assert result.returncode == 1 and result.stderr.decode().strip() == "arrayio: -n must be 1 <= n <= 256"


def test_verbose_and_debug(cli, data_file, tmp_path):
    text = _ok(cli("blpk", "-v", "c", data_file, tmp_path / "v.blp"))
    assert "input file is:" in text and "output file size:" in text
    assert "blosc args" in _ok(cli("blpk", "-d", "-f", "c", data_file, tmp_path / "v.blp"))
    assert cli("blpk", "-v", "-d", "c", data_file, tmp_path / "w.blp").returncode == 2


def test_metadata_and_info(cli, data_file, tmp_path):
    meta = tmp_path / "meta.json"
    meta.write_text(json.dumps({"dtype": "float64", "shape": [300000], "container": "mine"}))
    packed = tmp_path / "m.blp"
    _ok(cli("blpk", "c", "-m", meta, data_file, packed))
    text = _ok(cli("blpk", "i", packed))
    assert "nchunks: 3" in text and "max_app_chunks: 30" in text and "'container': 'mine'" in text
    assert "meta_codec" in text and "First chunk blosc header" in text
    out = _ok(cli("blpk", "d", packed, tmp_path / "out"))
    assert "Metadata:" in out and "'shape': [300000]" in out
    meta.write_text("{broken")
    result = cli("blpk", "c", "-m", meta, data_file, tmp_path / "x.blp")
    assert result.returncode == 1 and b"not valid JSON" in result.stderr


def test_zero_length_file(cli, tmp_path):
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    _ok(cli("blpk", "c", empty))
    assert (tmp_path / "empty.blp").stat().st_size == 140
    empty.unlink()
    _ok(cli("blpk", "d", tmp_path / "empty.blp"))
    assert empty.read_bytes() == b""


def test_append_grows_the_file_and_rewrites_metadata(cli, data_file, tmp_path):
    packed = tmp_path / "a.blp"
    meta = tmp_path / "meta.json"
    meta.write_text('{"round": 1}')
    _ok(cli("blpk", "c", "-m", meta, data_file, packed))
    size = packed.stat().st_size
    meta.write_text('{"round": 2}')
    _ok(cli("blpk", "append", "-m", meta, packed, data_file))
    assert packed.stat().st_size > size
    assert bp.unpack_bytes_from_file(packed) == (data_file.read_bytes() * 2, {"round": 2})
    _ok(cli("blpk", "a", "-m", meta, packed, data_file))  # unchanged metadata is not an error
    result = cli("blpk", "a", data_file, data_file)
    assert result.returncode == 1 and b"does not end with '.blp'" in result.stderr
    result = cli("blpk", "a", packed, tmp_path / "missing")
    assert result.returncode == 1 and b"new file" in result.stderr


def test_corrupt_file_errors_cleanly(cli, data_file, tmp_path):
    packed = tmp_path / "c.blp"
    bp.pack_file_to_file(data_file, packed)
    raw = bytearray(packed.read_bytes())
    first = bp.open(packed).info()["first_offsets"][0]
    raw[first + 20] ^= 0xFF
    packed.write_bytes(bytes(raw))
    result = cli("blpk", "d", packed, tmp_path / "out")
    assert result.returncode == 1
    assert result.stderr.decode().startswith(f"arrayio: {packed}: bloscpack: chunk 0 adler32 digest at byte")
    assert not (tmp_path / "out").exists()
    result = cli("validate", packed)
    assert result.returncode == 1 and b"chunk 0 adler32 digest" in result.stdout
    packed.write_bytes(b"blpk\x09" + bytes(40))
    result = cli("blpk", "i", packed)
    assert result.returncode == 1 and b"header.format_version at byte 4: expected 3, found 9" in result.stderr


def test_generic_verbs_on_blp(cli, tmp_path):
    path = tmp_path / "g.blp"
    array = np.arange(12, dtype="i4").reshape(4, 3)
    bp.pack_ndarray_to_file(array, path, chunk_size=24)
    facts = json.loads(_ok(cli("info", "--json", path)))
    assert facts["format"] == "bloscpack" and facts["shape"] == [4, 3] and facts["nchunks"] == 2
    assert "ndarray 4x3 int32" in facts["summary"]
    assert "valid bloscpack file" in _ok(cli("validate", path))
    assert _ok(cli("ls", path)).split() == ["chunk0", "chunk1"]
    assert _ok(cli("cat", path, "data")).split() == [str(i) for i in range(12)]
    assert _ok(cli("cat", path, "chunk1")).split() == [str(i) for i in range(6, 12)]
    assert json.loads(_ok(cli("cat", path, "metadata")))["container"] == "numpy"
    result = cli("cat", path, "nope")
    assert result.returncode == 1 and b"no such entry" in result.stderr


def test_large_file_transcript_with_progress(cli, tmp_path):
    path = tmp_path / "big.dat"
    np.linspace(0, 100, 20_000_000).tofile(path)
    _ok(cli("blpk", "c", path))
    text = _ok(cli("blpk", "info", tmp_path / "big.dat.blp"))
    assert "nchunks: 153" in text and "last_chunk: 616448" in text and "max_app_chunks: 1530" in text
    assert "[13496," in text
    path.unlink()
    _ok(cli("blpk", "d", tmp_path / "big.dat.blp"))
    assert np.array_equal(np.fromfile(path), np.linspace(0, 100, 20_000_000))
