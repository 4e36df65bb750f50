"""Every writer writes to a URL; the object appears whole or not at all, also when the writing process is
killed half-way through an upload."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import fsspec
import numpy as np
import pytest
from remote_samples import BUCKET, OBJECT_STORES, assert_same

import arrayio
from arrayio import bloscpack, kast, kastore, kdb, pycauset
from arrayio._binary import output_stream

# Writes always go through fsspec; the reads that check them are tested with both clients elsewhere.
REMOTE_CLIENTS = ("obstore",)

REPO = Path(__file__).resolve().parents[2]


def _keyed_data() -> dict[str, np.ndarray]:
    return {"a": np.arange(10, dtype=np.int16), "b": np.linspace(0, 1, 5000), "c": np.array([], dtype=np.uint8)}


def _write(name: str, target) -> object:
    """Write a sample of format ``name`` to ``target``; returns what reading it back must give."""
    if name in ("kastore", "kast"):
        data = _keyed_data()
        (kastore if name == "kastore" else kast).dump(data, target)
        return data
    if name == "bloscpack":
        array = np.arange(300_000, dtype=np.float32).reshape(1000, 300)
        bloscpack.pack_ndarray_to_file(array, target, chunk_size=64 << 10)
        return array
    if name == "kdb":
        states = np.ones((4, 2), np.float32)
        with kdb.Writer(target) as out:
            out.add_episode(states, states * 2, images={"cam": np.full((4, 8, 8, 3), 7, np.uint8)}, task="t")
        return states
    matrix = np.arange(120.0).reshape(10, 12)
    pycauset.save(matrix, target)
    return matrix


def _read(name: str, reader) -> object:
    if name in ("kastore", "kast"):
        return {key: np.array(reader[key]) for key in reader}
    if name == "bloscpack":
        return reader.read()
    if name == "kdb":
        episode = reader.read_episode(0)
        assert episode.images["cam"].shape == (4, 8, 8, 3)
        return np.array(episode.states)
    return np.array(reader.array)


@pytest.mark.parametrize("object_store", OBJECT_STORES, indirect=True)
@pytest.mark.parametrize("name", ["kastore", "kast", "bloscpack", "kdb", "pycauset"])
def test_write_to_an_object_store_round_trips(object_store, name):
    url = f"{object_store.root}/written/sample.{name}"
    options = object_store.options
    expected = _write(name, arrayio.RemoteFile(url, options))
    with arrayio.open(url, storage_options=options) as reader:
        assert_same(expected, _read(name, reader))
    assert arrayio.validate(url, storage_options=options) == []


@pytest.mark.parametrize("name", ["kastore", "pycauset"])
def test_write_through_an_fsspec_open_file(s3_options, name):
    url = f"s3://{BUCKET}/written/openfile.{name}"
    expected = _write(name, fsspec.open(url, "wb", **s3_options))
    with arrayio.open(url, storage_options=s3_options) as reader:
        assert_same(expected, _read(name, reader))


def test_write_to_memory_moves_a_temporary_key():
    url = "memory://arrayio-remote-test/folder/sample.kas"
    expected = _write("kastore", url)
    with arrayio.open(url) as reader:
        assert_same(expected, _read("kastore", reader))
    assert fsspec.filesystem("memory").ls("/arrayio-remote-test/folder", detail=False) == [
        "/arrayio-remote-test/folder/sample.kas"]


def test_write_to_a_file_url_is_an_atomic_local_write(tmp_path):
    expected = _write("bloscpack", f"file://{tmp_path}/local.blp")
    assert_same(expected, bloscpack.unpack_ndarray_from_file(tmp_path / "local.blp"))
    assert os.listdir(tmp_path) == ["local.blp"]


def _objects(s3_server, prefix: str) -> list[str]:
    listing = s3_server.client.list_objects_v2(Bucket=BUCKET, Prefix=prefix)
    return [item["Key"] for item in listing.get("Contents", [])]


def test_a_failed_write_leaves_no_object(s3_server, s3_options):
    url = f"s3://{BUCKET}/failed/episodes.kdb"
    with pytest.raises(RuntimeError, match="half-way"), kdb.Writer(arrayio.RemoteFile(url, s3_options)) as out:
        out.add_episode(np.ones((3, 2), np.float32), np.ones((3, 2), np.float32))
        raise RuntimeError("the caller failed half-way")
    with pytest.raises(ValueError), output_stream(arrayio.RemoteFile(f"s3://{BUCKET}/failed/raw", s3_options)) \
            as stream:
        stream.write(b"x" * 1000)
        raise ValueError("stop")
    assert _objects(s3_server, "failed/") == []


def test_writing_over_http_is_refused_clearly(http_server):
    with pytest.raises(arrayio.UnsupportedError, match="HTTP"):
        kastore.dump(_keyed_data(), f"{http_server.url}/new.kas")


KILLED_WRITER = """
import json, sys
import numpy as np
import arrayio
from arrayio import kastore

url, options = sys.argv[1], json.loads(sys.argv[2])
data = {"x": np.random.default_rng(0).integers(0, 255, 96 << 20, dtype=np.uint8)}
kastore.dump(data, arrayio.RemoteFile(url, options))
"""


def test_a_killed_upload_leaves_no_object(s3_server, s3_options):
    key = "killed/big.kas"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")]))
    process = subprocess.Popen([sys.executable, "-c", KILLED_WRITER, f"s3://{BUCKET}/{key}", json.dumps(s3_options)],
                               env=env)
    try:
        deadline = time.monotonic() + 120
        parts = 0
        while time.monotonic() < deadline and process.poll() is None:
            uploads = s3_server.client.list_multipart_uploads(Bucket=BUCKET, Prefix="killed/").get("Uploads", [])
            if uploads:
                parts = len(s3_server.client.list_parts(Bucket=BUCKET, Key=key,
                                                        UploadId=uploads[0]["UploadId"]).get("Parts", []))
                if parts:
                    break
            time.sleep(0.02)
        assert process.poll() is None, "the writer finished before it could be killed"
        assert parts >= 1  # killed while the upload was under way, with parts on the server
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=30)
    assert _objects(s3_server, "killed/") == []
    with pytest.raises(FileNotFoundError):
        arrayio.open(f"s3://{BUCKET}/{key}", storage_options=s3_options)
