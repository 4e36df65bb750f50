"""Every format read from http:// (a range server in this process), s3:// (moto), gs://
(gcp-storage-emulator) and az:// (Azurite, where installed) equals the local read, and the request and byte
bounds hold, counted by the servers themselves."""

from __future__ import annotations

import fsspec
import numpy as np
import pytest
from remote_samples import BUCKET, OBJECT_STORES, SAMPLES, assert_same, snapshot

import arrayio
from arrayio import bloscpack, kast, kastore, kdb, pycauset

SLACK = 64 << 10
BACKENDS = ["http", *OBJECT_STORES]
# Backends read through fsspec's info() and cat_file: opening costs one request more (docs/remote.md).
INFO_FIRST = {"az"}


@pytest.fixture
def served(request, samples, object_stores):
    """Serve a sample on a backend: returns (url, storage_options, server counts, local path).

    A backend's server starts on first use."""
    def serve(kind: str, backend: str):
        path = samples(kind)
        name = f"{kind.replace('/', '-')}-{path.name}"
        if backend == "http":
            server = request.getfixturevalue("http_server")
            url, options, counts = server.put(name, path.read_bytes()), {}, server.counts
        else:
            store = object_stores(backend)
            url, options, counts = store.put(name, path.read_bytes()), store.options, store.counts
        counts.reset()
        return url, options, counts, path
    return serve


def _format_entry_point(kind: str):
    """The format's own loader, taking (target, storage_options)."""
    name = kind.split("/")[0]
    return {"kastore": lambda t, o: kastore.load(t, storage_options=o),
            "kast": lambda t, o: kast.load(t, storage_options=o),
            "bloscpack": lambda t, o: bloscpack.open(t, storage_options=o),
            "kdb": lambda t, o: kdb.open(t, storage_options=o),
            "pycauset": lambda t, o: pycauset.load(t, storage_options=o)}[name]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", SAMPLES)
def test_remote_read_equals_local(served, kind, backend):
    url, options, _counts, path = served(kind, backend)
    with arrayio.open(path) as local:
        expected = snapshot(local)
    with arrayio.open(url, storage_options=options) as remote:
        assert_same(expected, snapshot(remote))
    with _format_entry_point(kind)(url, options) as remote:
        assert_same(expected, snapshot(remote))
    # An open fsspec file works too, with what the file already knows (its size) reused.
    with fsspec.open(url, "rb", **options) as handle, _format_entry_point(kind)(handle, None) as remote:
        assert_same(expected, snapshot(remote))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", SAMPLES)
def test_open_takes_at_most_two_requests_and_stats_agree(served, kind, backend, remote_client):
    url, options, counts, _path = served(kind, backend)
    with arrayio.open(url, storage_options=options) as reader:
        # the backend's storage_options map to obstore's configuration: no silent fallback to fsspec
        assert reader.source.remote.client == remote_client
        requests, sent = counts.total()
        assert 1 <= requests <= 2 + (backend in INFO_FIRST)
        assert reader.source.stats.requests == requests
        assert reader.source.stats.bytes_fetched == sent


def _read_one_item(reader, kind: str) -> int:
    """Read one item of the reader's format; returns the bytes that item occupies in the file."""
    name = kind.split("/")[0]
    if name in ("kastore", "kast"):
        array = reader["big"]
        assert array.dtype == np.float64 and len(array) == 1 << 17
        return array.nbytes
    if name == "bloscpack":
        rows = reader[1000:1100]
        assert rows.shape == (100, 64)
        # rows 1000..1100 are data bytes 512000..563200: chunks 3 and 4 of 128 KiB
        return int(reader.positions[5] - reader.positions[3])
    if name == "kdb":
        episode = reader.read_episode(5)
        assert episode.meta.task == "task 5" and episode.images["front"].shape == (5, 64, 64, 3)
        entry = reader.entry(5)
        return entry.meta_length + entry.actions_length + entry.images_length
    rows = reader.read_rows(100, 164)
    assert rows.shape == (64, 256)
    return rows.nbytes


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", SAMPLES)
def test_one_item_moves_its_bytes_plus_64k_in_three_requests(served, kind, backend):
    url, options, counts, path = served(kind, backend)
    with arrayio.open(url, storage_options=options) as reader:
        counts.reset()
        reader.source.stats.reset()
        size = _read_one_item(reader, kind)
        requests, sent = counts.total()
        assert 1 <= requests <= 3
        assert sent <= size + SLACK
        assert (reader.source.stats.requests, reader.source.stats.bytes_fetched) == (requests, sent)
    assert sent < path.stat().st_size  # the bound means something: the file is bigger than the item


def test_kastore_small_key_after_open(served):
    url, _options, counts, _path = served("kastore/reference", "http")
    with kastore.load(url) as store:
        counts.reset()
        assert np.array_equal(store["small"], np.arange(100, dtype=np.int32))
        requests, sent = counts.total()
        assert requests == 1 and sent <= 400 + SLACK


def test_cache_size_is_settable_and_bounded(served):
    url, _options, counts, path = served("bloscpack/ours", "http")
    remote = arrayio.RemoteFile(url, cache_bytes=256 << 10, readahead=4 << 10)
    with bloscpack.open(remote) as reader:
        assert np.array_equal(reader.read(), bloscpack.unpack_ndarray_from_file(path))
        assert remote._cache.held <= 256 << 10
        assert remote.cache_bytes == 256 << 10
        before = counts.total()[0]
        reader[0:10]  # the last chunks read are cached, the first ones were dropped
        assert counts.total()[0] > before



def test_a_large_cached_range_stays_found_among_small_ones_inside_it(served):
    """Small ranges read first, then one request holding them all: every later read inside it is answered from
    the cache (the small ones used to hide it, five extents on: each such read fetched its bytes again)."""
    url, _options, counts, _path = served("kastore/ours", "http")
    remote = arrayio.RemoteFile(url, readahead=16)
    remote.size  # noqa: B018 - the first request
    remote.prefetch([(1000 + 100 * step, 10) for step in range(8)])
    remote.prefetch([(900, 1200)])
    counts.reset()
    assert [bytes(remote.read(offset, 50)) for offset in (1750, 1950, 1030)] == [
        bytes(remote.read(offset, 50)) for offset in (1750, 1950, 1030)]
    assert counts.total()[0] == 0
    remote.prefetch([(950, 20)])  # inside what is held: nothing to add, nothing hidden
    assert bytes(remote.read(2000, 50)) and counts.total()[0] == 0

def test_adjacent_ranges_coalesce_into_one_request(served):
    url, _options, counts, _path = served("kastore/ours", "http")
    remote = arrayio.RemoteFile(url, readahead=16)
    remote.size  # noqa: B018 - the first request
    counts.reset()
    remote.prefetch([(1000, 100), (1100, 50), (1150, 10), (5000, 10)])
    assert counts.total() == (2, 160 + 10)
    remote.read(1020, 100)
    assert counts.total()[0] == 2


def test_unpack_ndarray_from_url(served):
    url, _options, _counts, path = served("bloscpack/reference", "http")
    assert np.array_equal(bloscpack.unpack_ndarray_from_file(url), bloscpack.unpack_ndarray_from_file(path))


@pytest.mark.parametrize("store", OBJECT_STORES)
def test_info_and_validate_of_urls(served, store):
    for kind in SAMPLES:
        url, options, _counts, path = served(kind, store)
        assert arrayio.validate(url, storage_options=options) == []
        assert arrayio.info(url, storage_options=options) == arrayio.info(path)


def test_detect_from_the_first_response(served):
    url, _options, counts, _path = served("pycauset/reference", "http")
    assert arrayio.detect(arrayio.RemoteFile(url)) == "pycauset"
    assert counts.total()[0] == 1


def test_a_small_file_is_detected_and_opened_from_one_request(http_server):
    url = http_server.put("tiny.kas", kastore.dumps({"a": np.arange(10), "b": np.ones(3)}))
    http_server.counts.reset()
    with arrayio.open(url) as store:
        assert np.array_equal(store["a"], np.arange(10)) and np.array_equal(store["b"], np.ones(3))
    assert http_server.counts.total()[0] == 1


def test_chained_and_memory_urls(http_server, samples):
    path = samples("bloscpack/ours")
    url = http_server.put("chained.blp", path.read_bytes())
    expected = bloscpack.unpack_ndarray_from_file(path)
    assert np.array_equal(bloscpack.unpack_ndarray_from_file(f"simplecache::{url}"), expected)
    with fsspec.open("memory://arrayio-read-test/m.blp", "wb") as handle:
        handle.write(path.read_bytes())
    with arrayio.open("memory://arrayio-read-test/m.blp") as reader:
        assert np.array_equal(reader.read(), expected)
        assert reader.source.stats.requests >= 2  # info() for the size, then ranges


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_empty_object_is_no_format(http_server, object_stores, backend):
    if backend == "http":
        url, options = http_server.put("empty.kas", b""), {}
    else:
        store = object_stores(backend)
        url, options = store.put("empty.kas", b""), store.options
    with pytest.raises(arrayio.FormatError, match="empty.kas"):
        arrayio.open(url, storage_options=options)
    with pytest.raises(EOFError):
        kastore.load(url, storage_options=options)


@pytest.mark.parametrize("backend", BACKENDS)
def test_one_kdb_frame_costs_at_most_its_episode(served, backend):
    # Frames are not indexed (variable-length image records): a frame read fetches its episode's
    # state/action and image sections, never more (docs/remote.md).
    url, options, counts, path = served("kdb/ours", backend)
    with kdb.open(url, storage_options=options) as reader, kdb.open(path) as local:
        counts.reset()
        frame = reader.read_frame(7, 3)
        expected = local.read_frame(7, 3)
        assert np.array_equal(frame.state, expected.state)
        assert np.array_equal(frame.images["front"], expected.images["front"])
        entry = reader.entry(7)
        requests, sent = counts.total()
        assert requests <= 3
        assert sent <= entry.actions_length + entry.images_length + SLACK


def test_bloscpack_slots_kept_for_appending_are_not_fetched_at_open(http_server, tmp_path):
    # 1,000 chunks keep 10,000 spare offset slots (80 KB): more than the open's read-ahead.
    values = np.random.default_rng(0).integers(0, 9, 1000 * 512).astype("<f8")
    bloscpack.pack_ndarray_to_file(values, tmp_path / "many.blp", chunk_size=4096)
    url = http_server.put("many-chunks.blp", (tmp_path / "many.blp").read_bytes())
    http_server.counts.reset()
    with bloscpack.open(url) as reader:
        np.testing.assert_array_equal(reader[500 * 512:501 * 512], values[500 * 512:501 * 512])
        requests, sent = http_server.counts.total()
        assert requests <= 3 and sent <= 1.01 * 4096 + (64 << 10)
        assert reader.offsets_count == 11_000 and len(reader.offsets) == 11_000  # read when asked for


def test_obstore_by_name_says_why_it_cannot_read_a_target(http_server, s3_options):
    url = http_server.put("named-client.kas", kastore.dumps({"a": np.arange(3)}))
    with pytest.raises(arrayio.UnsupportedError, match="storage option headers"):
        arrayio.open(url, storage_options={"client": "obstore", "headers": {"X-Token": "t"}})
    with pytest.raises(arrayio.UnsupportedError, match="chained"):
        arrayio.open(f"simplecache::{url}", storage_options={"client": "obstore"})
    with pytest.raises(arrayio.UnsupportedError, match="config_kwargs_typo"):
        arrayio.open(f"s3://{BUCKET}/x.kas", storage_options={**s3_options, "client": "obstore",
                                                               "config_kwargs_typo": 1})
    # Without the name, the same targets are read through fsspec.
    with arrayio.open(url, storage_options={"headers": {"X-Token": "t"}}) as store:
        assert store.source.remote.client == "fsspec" and list(store) == ["a"]


def _read_in_child(remote, url, results) -> None:
    results.put((bytes(remote.read(200_000, 6)), remote.client, bytes(arrayio.RemoteFile(url).read(3, 6))))


@pytest.mark.one_client  # about the obstore client, the default
def test_a_forked_child_reads_on(http_server):
    # obstore's runtime does not survive a fork (a DataLoader worker): a child reads through fsspec instead
    # of waiting forever, inherited RemoteFiles included.
    import multiprocessing

    url = http_server.put("forked.bin", b"abc" * 100_000)
    remote = arrayio.RemoteFile(url)
    assert bytes(remote.read(0, 6)) == b"abcabc" and remote.client == "obstore"
    context = multiprocessing.get_context("fork")
    results = context.Queue()
    child = context.Process(target=_read_in_child, args=(remote, url, results))
    child.start()
    child.join(timeout=30)
    if child.is_alive():
        child.kill()
    assert child.exitcode == 0
    assert results.get(timeout=5) == (b"cabcab", "fsspec", b"abcabc")
