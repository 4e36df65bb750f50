"""kdb over http:// and s3:// in a file of many small episodes: what open, one episode, one frame and the
whole-index calls cost, counted by the servers, and bad index fields found remotely with the local errors."""

from __future__ import annotations

import io
import struct

import numpy as np
import pytest

from arrayio import kdb
from arrayio.kdb._reader import INDEX_BLOCK_ENTRIES
from arrayio.kdb._records import HEADER, INDEX_ENTRY

SLACK = 64 << 10
BACKENDS = ["http", "s3"]
EPISODES = 2000
POSITION = EPISODES * 5 // 8


@pytest.fixture(scope="module")
def many_episodes() -> bytes:
    """2,000 episodes of 2 frames (one 4x4 raw camera): about 220 bytes each, so the 128 KiB index dwarfs one."""
    rng = np.random.default_rng(20261122)
    out = io.BytesIO()
    with kdb.Writer(out, created_timestamp=0) as writer:
        for index in range(EPISODES):
            writer.add_episode(rng.standard_normal((2, 4)).astype(np.float32),
                               rng.standard_normal((2, 2)).astype(np.float32),
                               images={"front": rng.integers(0, 255, (2, 4, 4, 3), dtype=np.uint8)},
                               task=f"task {index}")
    return out.getvalue()


@pytest.fixture
def serve(http_server, s3_server, s3_options, s3_put):
    """Put bytes on a backend: returns (url, storage_options, the server's counts, reset)."""
    def put(name: str, data: bytes, backend: str):
        if backend == "http":
            url, options, counts = http_server.put(name, data), {}, http_server.counts
        else:
            url, options, counts = s3_put(name, data), s3_options, s3_server.counts
        counts.reset()
        return url, options, counts
    return put


def _episode_bytes(reader: kdb.KdbFile, position: int) -> int:
    entry = reader.entry(position)
    return entry.meta_length + entry.actions_length + entry.images_length


@pytest.mark.parametrize("backend", BACKENDS)
def test_open_and_one_episode_move_about_the_episode(serve, many_episodes, backend):
    url, options, counts = serve("many.kdb", many_episodes, backend)
    with kdb.open(url, storage_options=options) as reader:
        opened_requests, opened_bytes = counts.total()
        assert opened_requests <= 2 and opened_bytes <= SLACK  # the header's read-ahead, no index
        episode = reader.read_episode(POSITION)
        images = np.asarray(episode.images["front"])
        requests, sent = counts.total()
        item = _episode_bytes(reader, POSITION)
    with kdb.open(many_episodes) as local:
        expected = local.read_episode(POSITION)
        assert episode.meta == expected.meta and np.array_equal(episode.steps, expected.steps)
        assert np.array_equal(images, np.asarray(expected.images["front"]))
    assert requests <= 5
    assert sent <= 1.01 * (item + SLACK)
    assert sent < len(many_episodes) // 4


@pytest.mark.parametrize("backend", BACKENDS)
def test_one_frame_costs_its_episode_sections_in_one_request(serve, many_episodes, backend):
    # Frames are not indexed (docs/formats/kdb.md "Reading remotely"): a frame fetches its episode's
    # state/action and image sections (one request) after its index block (one request).
    url, options, counts = serve("frames.kdb", many_episodes, backend)
    with kdb.open(url, storage_options=options) as reader, kdb.open(many_episodes) as local:
        counts.reset()
        frame = reader.read_frame(POSITION, 1)
        requests, sent = counts.total()
        entry = reader.entry(POSITION)
        assert requests <= 2
        assert sent <= INDEX_BLOCK_ENTRIES * INDEX_ENTRY.size + entry.actions_length + entry.images_length
        expected = local.read_frame(POSITION, 1)
        assert np.array_equal(frame.state, expected.state) and np.array_equal(frame.action, expected.action)
        assert np.array_equal(frame.images["front"], expected.images["front"])
        counts.reset()
        again = reader.read_frame(POSITION, 0)
        assert np.array_equal(again.images["front"], local.read_frame(POSITION, 0).images["front"])
        assert counts.total()[0] == 0  # the episode's other frames come from what was fetched


@pytest.mark.parametrize("backend", BACKENDS)
def test_one_frame_of_equal_frames_fetches_the_images_up_to_it(serve, backend):
    # With frames of one size the walk's guess of where frame t ends holds: only frames 0..t are fetched.
    rng = np.random.default_rng(1)
    out = io.BytesIO()
    with kdb.Writer(out, created_timestamp=0) as writer:
        for _ in range(3):
            writer.add_episode(np.zeros((10, 3), np.float32), np.zeros((10, 2), np.float32),
                               images={"front": rng.integers(0, 255, (10, 32, 32, 3), dtype=np.uint8)})
    url, options, counts = serve("equal.kdb", out.getvalue(), backend)
    with kdb.open(url, storage_options=options) as reader, kdb.open(out.getvalue()) as local:
        counts.reset()
        assert np.array_equal(reader.read_frame(1, 2).images["front"], local.read_frame(1, 2).images["front"])
        requests, sent = counts.total()
        entry = reader.entry(1)
        assert requests <= 2
        assert sent <= INDEX_BLOCK_ENTRIES * INDEX_ENTRY.size + entry.actions_length + 3 * entry.images_length // 10


@pytest.mark.parametrize("backend", BACKENDS)
def test_frames_of_unequal_sizes_are_walked_right(serve, backend):
    # The guess of where frame t ends falls short or lands inside another frame: the walk reads the real
    # records and fetches the rest of the section with one more request.
    rng = np.random.default_rng(2)
    sizes = [8, 36, 12, 56, 4, 24]
    out = io.BytesIO()
    with kdb.Writer(out, created_timestamp=0) as writer:  # episode 0 keeps episode 1 out of open's read-ahead
        writer.add_episode(np.zeros((1, 3), np.float32), np.zeros((1, 2), np.float32),
                           images={"front": np.zeros((1, 200, 200, 3), np.uint8)})
        writer.add_episode(np.zeros((6, 3), np.float32), np.zeros((6, 2), np.float32),
                           images={"front": [rng.integers(0, 255, (size, size, 3), dtype=np.uint8) for size in sizes],
                                   "wrist": [rng.integers(0, 255, (60 - size, 4, 1), dtype=np.uint8)
                                             for size in sizes]})
    url, options, counts = serve("unequal.kdb", out.getvalue(), backend)
    with kdb.open(out.getvalue()) as local:
        expected = [local.read_frame(1, frame).images for frame in range(len(sizes))]
        offsets = [local.frame_offset(1, index) for index in range(len(sizes) + 1)]
    for frame in range(len(sizes)):
        with kdb.open(url, storage_options=options) as reader:
            counts.reset()
            images = reader.read_frame(1, frame).images
            assert 2 <= counts.total()[0] <= 3
            assert images.keys() == expected[frame].keys()
            assert all(np.array_equal(images[camera], expected[frame][camera]) for camera in images)
            assert [reader.frame_offset(1, index) for index in range(len(sizes) + 1)] == offsets


def test_neighbouring_episodes_share_an_index_block(serve, many_episodes):
    url, options, counts = serve("neighbours.kdb", many_episodes, "http")
    first = POSITION - POSITION % INDEX_BLOCK_ENTRIES
    with kdb.open(url, storage_options=options) as reader:
        counts.reset()
        metas = [reader.read_meta(position) for position in range(first, first + INDEX_BLOCK_ENTRIES)]
        assert [meta.task for meta in metas] == [f"task {position}" for position in range(first, first + 8)]
        assert counts.total()[0] <= 1 + INDEX_BLOCK_ENTRIES  # one index block, then each metadata blob


def test_whole_index_calls_read_the_index_once(serve, many_episodes):
    url, options, counts = serve("whole.kdb", many_episodes, "http")
    with kdb.open(url, storage_options=options) as reader, kdb.open(many_episodes) as local:
        counts.reset()
        assert reader.num_frames == local.num_frames == 2 * EPISODES
        requests, sent = counts.total()
        assert requests == 1 and sent >= EPISODES * INDEX_ENTRY.size
        assert reader.locate(2 * POSITION + 1) == (POSITION, 1)
        assert reader.position_of(POSITION) == POSITION
        assert np.array_equal(reader.index, local.index)
        assert counts.total()[0] == 1


def _patched(data: bytes, record, field: str, value: int, base: int = 0, index: int = 0) -> bytes:
    out = bytearray(data)
    struct.pack_into("<Q" if record.widths[field] == 8 else "<I", out, record.offset_of(field, base, index), value)
    return bytes(out)


def _message(action) -> str:
    """The message of the KinoError ``action`` raises, without the file's name (a URL here, none for bytes)."""
    with pytest.raises(kdb.KinoError) as caught:
        action()
    return caught.value.message


@pytest.mark.parametrize("backend", BACKENDS)
def test_bad_header_frame_count_is_found_when_the_whole_index_is_read(serve, many_episodes, backend):
    bad = _patched(many_episodes, HEADER, "num_frames", 2 * EPISODES + 1)
    url, options, _counts = serve("bad-frames.kdb", bad, backend)
    local = _message(lambda: kdb.open(bad))
    assert "header.num_frames" in local and f"byte {HEADER.offsets['num_frames']}" in local
    with kdb.open(url, storage_options=options) as reader:
        assert reader.read_episode(3).meta.task == "task 3"  # one episode needs no whole-index check
        assert _message(lambda: reader.num_frames) == local
        assert _message(lambda: list(reader)) == local
    with kdb.open(url, storage_options=options) as reader:
        problems = reader.validate()
    assert [problem.offset for problem in problems] == [HEADER.offsets["num_frames"]]
    assert [problem.message for problem in problems] == [problem.message for problem in kdb.validate(bad)]


@pytest.mark.parametrize("backend", BACKENDS)
def test_bad_entry_is_found_when_its_episode_is_read(serve, many_episodes, backend):
    base = HEADER.unpack(many_episodes, 0).index_offset
    entry = INDEX_ENTRY.unpack(many_episodes, base + POSITION * INDEX_ENTRY.size)
    bad = _patched(many_episodes, INDEX_ENTRY, "actions_length", entry.actions_length - 1, base, POSITION)
    url, options, _counts = serve("bad-entry.kdb", bad, backend)
    with kdb.open(bad) as local:
        expected = _message(lambda: local.read_episode(POSITION))
    assert f"episode {POSITION} index.actions_length" in expected
    with kdb.open(url, storage_options=options) as reader:
        assert reader.read_episode(POSITION - 1).meta.task == f"task {POSITION - 1}"
        assert _message(lambda: reader.read_episode(POSITION)) == expected
        assert _message(lambda: reader.read_frame(POSITION, 0)) == expected
        with pytest.raises(kdb.KinoError, match=f"^{url}: kdb: episode {POSITION} "):  # found late, named all the same
            reader.read_episode(POSITION)
        problems = reader.validate()
    assert [(problem.field, problem.offset) for problem in problems] == \
        [(problem.field, problem.offset) for problem in kdb.validate(bad)]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_cut_object_names_its_url_once(serve, many_episodes, backend, tmp_path):
    # Before: "URL: kdb: episode index (2000 entries of 64 bytes) of URL at byte ...": the remote source wrote
    # its URL into the field, from before every FormatError named its file in front.
    cut = many_episodes[:len(many_episodes) - 1000]
    url, options, _counts = serve("cut.kdb", cut, backend)
    (tmp_path / "cut.kdb").write_bytes(cut)
    with pytest.raises(kdb.KinoError) as local, kdb.open(tmp_path / "cut.kdb") as reader:
        len(reader.index)
    with pytest.raises(kdb.KinoError) as remote, kdb.open(url, storage_options=options) as reader:
        len(reader.index)
    assert remote.value.file == url and str(remote.value).count(url) == 1
    assert remote.value.message == local.value.message and "episode index" in remote.value.message


@pytest.fixture(scope="module")
def big_episodes() -> bytes:
    """12 episodes of 2 raw 160x160 frames: their metadata blobs 150 KB apart, past any read's window."""
    rng = np.random.default_rng(20261126)
    out = io.BytesIO()
    with kdb.Writer(out, created_timestamp=0) as writer:
        for index in range(12):
            writer.add_episode(rng.standard_normal((2, 4)).astype(np.float32),
                               rng.standard_normal((2, 2)).astype(np.float32), fps=10.0 + index,
                               images={"front": rng.integers(0, 255, (2, 160, 160, 3), dtype=np.uint8)},
                               task=f"task {index}")
    return out.getvalue()


def test_every_metadata_blob_comes_in_one_several_range_get(serve, big_episodes):
    """What a set's fps, the tree and an export read: each episode's metadata blob was a round trip of its own,
    one after another (12 here); over HTTP they come in one GET of several ranges."""
    from arrayio._tree import tree_of

    url, options, counts = serve("metas.kdb", big_episodes, "http")
    with kdb.open(url, storage_options=options) as reader, kdb.open(big_episodes) as local:
        assert len(reader.index) == 12
        counts.reset()
        assert reader.read_metas() == [local.read_meta(position) for position in range(12)]
        assert counts.total()[0] == 1
    with kdb.open(url, storage_options=options) as reader:
        counts.reset()
        assert [array for array in tree_of(reader).arrays()]
        tree_requests = counts.total()[0]
    assert tree_requests <= 4, tree_requests


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_tree_of_a_remote_file_reads_each_episode_first_frame_not_the_file(serve, backend):
    """Every view (zarr, kerchunk, dask, `arrayio tree`) describes a file through its tree, which names each
    episode's cameras from its first frame: it read each episode through read_episode, which fetched its whole
    sections, so describing a remote file downloaded all of it (52 MB of 52 MB over HTTP, 46 requests)."""
    from arrayio._tree import tree_of

    rng = np.random.default_rng(3)
    out = io.BytesIO()
    with kdb.Writer(out, created_timestamp=0, compress="jpeg") as writer:
        for _ in range(6):
            writer.add_episode(np.zeros((20, 3), np.float32), np.zeros((20, 2), np.float32),
                               images={"front": rng.integers(0, 255, (20, 96, 96, 3), dtype=np.uint8)})
    data = out.getvalue()
    url, options, counts = serve("described.kdb", data, backend)
    with kdb.open(url, storage_options=options) as reader, kdb.open(data) as local:
        described = {name: (array.shape, array.dtype) for name, array in tree_of(reader).arrays()}
        requests, sent = counts.total()
        assert described == {name: (array.shape, array.dtype) for name, array in tree_of(local).arrays()}
    assert sent <= len(data) // 8 + SLACK, (sent, len(data))
    assert requests <= (4 if backend == "http" else 4 + 2 * 6), requests


def test_the_metadata_of_many_episodes_comes_in_concurrent_several_range_gets(serve, many_episodes, http_server):
    """2,000 blobs: 32 GETs of 64 ranges, the first alone (it tells whether the server answers several ranges),
    the others several at once (one after another before)."""
    url, options, counts = serve("metas-many.kdb", many_episodes, "http")
    with kdb.open(url, storage_options=options) as reader, kdb.open(many_episodes) as local:
        assert len(reader.index) == EPISODES
        http_server.delay = 0.1
        try:
            counts.reset()
            http_server.reset_peak()
            metas = reader.read_metas()
            requests, peak = counts.total()[0], http_server.peak
        finally:
            http_server.delay = 0.0
        assert metas == [local.read_meta(position) for position in range(EPISODES)]
    # Those of the open's first 64 KiB are cached already: the rest, 64 a GET.
    assert 2 <= requests <= -(-EPISODES // 64) and peak >= 2, (requests, peak)
