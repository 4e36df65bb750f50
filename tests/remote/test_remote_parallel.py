"""Big reads and many-range reads go out as concurrent ranged GETs (issue 22, item 2): a read above
``part_bytes`` is split into GETs of that size, ``concurrency`` at a time, assembled into one buffer; many
ranges are coalesced with their neighbours and the rest fetched concurrently. Request counts, bytes and the
number of GETs in flight at once are the server's own."""

from __future__ import annotations

import http.client

import numpy as np
import pytest

import arrayio
from arrayio import bloscpack, kastore
from arrayio._remote import fetch_ranges
from remote_servers import FileServer

PART = 256 << 10


@pytest.fixture
def slow_server(http_server):
    """The range server, each GET held 250 ms so that concurrent ones overlap (50 ms was not always enough
    for a loaded machine to start the third of three concurrent GETs)."""
    http_server.delay = 0.25
    yield http_server
    http_server.delay = 0.0


def test_a_big_read_goes_out_in_concurrent_parts(slow_server, samples, remote_client):
    path = samples("kastore/ours")
    url = slow_server.put("parallel/store.kas", path.read_bytes())
    with kastore.load(path) as local:
        expected = np.array(local["big"])
    options = {"part_bytes": PART, "concurrency": 3}
    with kastore.load(url, storage_options=options) as store:
        assert store.source.remote.client == remote_client
        # The open's 64 KiB read-ahead may hold the key's first bytes: only the rest is fetched.
        offset = store.extent("big")[0]
        missing = expected.nbytes - max(0, (64 << 10) - offset)
        slow_server.counts.reset()
        slow_server.reset_peak()
        array = np.array(store["big"])
        requests, sent = slow_server.counts.total()
    assert np.array_equal(array, expected)
    assert requests == -(-missing // PART)  # about 1 MiB in parts of 256 KiB
    assert sent == missing
    assert slow_server.peak == 3  # concurrent, and never more than asked


def test_a_read_at_the_threshold_is_one_request(http_server, samples):
    url = http_server.put("parallel/one.kas", samples("kastore/ours").read_bytes())
    with kastore.load(url, storage_options={"part_bytes": 1 << 20}) as store:
        http_server.counts.reset()
        store["big"]  # exactly 1 MiB
        assert http_server.counts.total()[0] == 1


def test_many_ranges_coalesce_and_the_rest_go_concurrently(slow_server):
    data = np.random.default_rng(22).integers(0, 255, 4 << 20, dtype=np.uint8).tobytes()
    url = slow_server.put("parallel/blob.bin", data)
    remote = arrayio.RemoteFile(url, storage_options={"concurrency": 8})
    remote.size  # noqa: B018 - the first request
    # 29 far-apart ranges (one request each) and 60 touching ones in 3 runs (one request per run)
    far = [(100_000 * index, 1000) for index in range(1, 30)]  # byte 0 is in the cache
    near = [(3_000_000 + run * 300_000 + 1000 * index, 1000) for run in range(3) for index in range(20)]
    slow_server.counts.reset()
    slow_server.reset_peak()
    views = remote.read_many(far + near)
    requests, sent = slow_server.counts.total()
    assert [bytes(view) for view in views] == [data[offset:offset + length] for offset, length in far + near]
    assert requests == 29 + 3
    assert sent == 89 * 1000
    assert 2 <= slow_server.peak <= 8
    assert all(view.readonly for view in views)


def test_fetch_ranges_checks_bounds_and_serves_local_sources_too(http_server, samples):
    path = samples("kastore/ours")
    url = http_server.put("parallel/ranges.kas", path.read_bytes())
    size = path.stat().st_size
    ranges = [(0, 8), (size - 8, 8), (1000, 10)]
    with arrayio.open(url) as remote_store, arrayio.open(path) as local_store:
        remote = [bytes(view) for view in fetch_ranges(remote_store.source, ranges)]
        local = [bytes(view) for view in fetch_ranges(local_store.source, ranges)]
        assert remote == local
        with pytest.raises(arrayio.TruncatedError, match="ranges.kas"):
            fetch_ranges(remote_store.source, [(size - 4, 8)])


def test_a_slice_across_100_chunks_is_fetched_in_windows(http_server, tmp_path):
    # 100 chunks of 64 KiB; a cache of 1 MiB takes 512 KiB windows of the slice's span at a time.
    values = np.random.default_rng(19).standard_normal(100 * 8192)
    bloscpack.pack_ndarray_to_file(values, tmp_path / "hundred.blp", chunk_size=64 << 10)
    url = http_server.put("parallel/hundred.blp", (tmp_path / "hundred.blp").read_bytes())
    remote = arrayio.RemoteFile(url, cache_bytes=1 << 20)
    with bloscpack.open(remote) as reader:
        assert reader.nchunks == 100
        http_server.counts.reset()
        np.testing.assert_array_equal(reader[100:99 * 8192 + 5], values[100:99 * 8192 + 5])
        requests, sent = http_server.counts.total()
        span = int(reader.positions[-1] + 16 - reader.positions[0])
    windows = -(-span // (512 << 10))
    # On main: two requests per chunk past the first half of the cache (about 180 here). Chunks are decoded
    # on several threads, which may both miss the cache where a window ends and fetch its next bytes twice.
    assert requests <= windows + 4, (requests, windows)
    assert sent <= 1.05 * span + (64 << 10)
    assert remote._cache.held <= 1 << 20


@pytest.fixture
def file_server(tmp_path):
    """The sendfile server (what benchmarks/remote.py measures against) over one 3 MiB file of random bytes."""
    path = tmp_path / "wire.bin"
    path.write_bytes(np.random.default_rng(23).integers(0, 255, 3 << 20, dtype=np.uint8).tobytes())
    server = FileServer([path])
    server.start()
    yield server, path
    server.stop()


def test_a_big_read_from_the_sendfile_server_lands_whole_and_counted(file_server, remote_client):
    server, path = file_server
    data = path.read_bytes()
    remote = arrayio.RemoteFile(f"{server.url}/{path.name}", storage_options={"part_bytes": PART, "concurrency": 4})
    assert remote.client == remote_client
    view = remote.read(100, len(data) - 100)  # the open's read-ahead holds the first 64 KiB: the rest in parts
    assert view.readonly and bytes(view) == data[100:]
    requests, sent = server.counts.total()
    missing = len(data) - (64 << 10)
    assert (requests, sent) == (1 + -(-missing // PART), len(data))
    assert (remote.stats.requests, remote.stats.bytes_fetched) == (requests, sent)


@pytest.mark.one_client  # no client of ours: plain http.client
def test_the_sendfile_server_answers_ranges_like_the_range_server(file_server):
    server, path = file_server
    data = path.read_bytes()
    connection = http.client.HTTPConnection("127.0.0.1", int(server.url.rsplit(":", 1)[1]), timeout=10)
    answers = []
    for method, target, wanted in (("GET", path.name, "bytes=-10"), ("GET", path.name, f"bytes={len(data)}-"),
                                   ("HEAD", path.name, None), ("GET", "missing", None)):
        connection.request(method, f"/{target}", headers={"Range": wanted} if wanted else {})
        response = connection.getresponse()
        answers.append((response.status, response.getheader("Content-Range"), response.read()))
    assert answers == [(206, f"bytes {len(data) - 10}-{len(data) - 1}/{len(data)}", data[-10:]),
                       (416, f"bytes */{len(data)}", b""), (200, None, b""), (404, None, b"")]
    assert server.counts.total() == (4, 10)
    connection.request("GET", FileServer.COUNTS_PATH)
    assert connection.getresponse().read() == b"4 10"
    assert server.counts.total() == (0, 0)


def test_read_into_fills_a_callers_buffer_in_concurrent_parts(slow_server, samples, remote_client):
    """RemoteFile.read_into: the object's bytes from an offset, in parts written in place, `concurrency`
    at a time; a range past the end is a usage error before any request."""
    data = samples("kastore/ours").read_bytes()
    url = slow_server.put("parallel/into.kas", data)
    remote = arrayio.RemoteFile(url, {"part_bytes": PART})
    assert remote.size == len(data)  # opened: the first request
    buffer = bytearray(len(data) - 1000)
    slow_server.counts.reset()
    slow_server.reset_peak()
    remote.read_into(buffer, 1000, concurrency=3)
    requests, sent = slow_server.counts.total()
    assert bytes(buffer) == data[1000:]
    assert requests == -(-len(buffer) // PART) and sent == len(buffer)
    assert slow_server.peak == 3
    with pytest.raises(ValueError, match="not inside"):
        remote.read_into(bytearray(10), len(data) - 5)
