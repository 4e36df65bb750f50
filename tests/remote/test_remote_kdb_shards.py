"""kdb datasets and shard listings over URL globs: ``s3://bucket/shards/*.kdb`` and ``memory://...`` are listed
through fsspec (sorted, protocol kept), a glob matching nothing names the pattern, HTTP globs are refused
because HTTP cannot be listed, and `arrayio kdb stats` gets URL globs through the same listing."""

from __future__ import annotations

import json

import fsspec
import numpy as np
import pytest
from remote_samples import BUCKET, OBJECT_STORES

import arrayio
from arrayio import kdb
from arrayio.robot._shards import resolve_sources

torch = pytest.importorskip("torch")

from arrayio.robot.torch import EpisodeDataset, FrameDataset  # noqa: E402 - after the torch skip

SHARD_FRAMES = [(4, 5), (6,), (3, 3, 3)]  # frames per episode of shards 0, 1, 2


def _shard_bytes(tmp_path, number: int) -> bytes:
    """A shard whose states say (shard, episode, frame), so every item shows where it came from."""
    path = tmp_path / f"local-{number}.kdb"
    with kdb.Writer(path) as writer:
        for episode, frames in enumerate(SHARD_FRAMES[number]):
            marks = np.stack([np.full(frames, number), np.full(frames, episode), np.arange(frames)], 1)
            writer.add_episode(marks.astype(np.float32), marks[:, :2].astype(np.float32),
                               images={"front": np.full((frames, 4, 6, 3), number, np.uint8)}, task=f"shard {number}")
    return path.read_bytes()


@pytest.fixture
def shard_bytes(tmp_path) -> list[bytes]:
    return [_shard_bytes(tmp_path, number) for number in range(len(SHARD_FRAMES))]


def _assert_shards_in_order(dataset: FrameDataset) -> None:
    """Every frame of shards 0, 1, 2 in that order, each item the one its state names."""
    expected = [(shard, episode, frame) for shard, episodes in enumerate(SHARD_FRAMES)
                for episode, frames in enumerate(episodes) for frame in range(frames)]
    assert len(dataset) == len(expected)
    for index in (0, 8, 9, 14, len(expected) - 1):
        item = dataset[index]
        assert tuple(int(value) for value in item["state"]) == expected[index]
        assert int(item["shard"]) == expected[index][0]
        assert int(item["image.front"][0, 0, 0]) == expected[index][0]


def test_memory_glob_is_listed_sorted_with_its_protocol(shard_bytes):
    filesystem = fsspec.filesystem("memory")
    for number in (2, 0, 1):  # written out of order: the listing sorts
        filesystem.pipe(f"/arrayio-shards/run/part-{number}.kdb", shard_bytes[number])
    filesystem.pipe("/arrayio-shards/run/notes.txt", b"not a shard")
    pattern = "memory://arrayio-shards/run/part-*.kdb"
    assert resolve_sources(pattern) == [f"memory:///arrayio-shards/run/part-{number}.kdb" for number in range(3)]
    _assert_shards_in_order(FrameDataset(pattern, image_format="uint8"))
    episodes = EpisodeDataset(pattern, image_format="uint8")
    assert len(episodes) == 6 and episodes[5]["task"] == "shard 2"
    with pytest.raises(FileNotFoundError, match=r"no file matches 'memory://arrayio-shards/run/none-\*\.kdb'"):
        FrameDataset("memory://arrayio-shards/run/none-*.kdb")


@pytest.mark.parametrize("object_store", OBJECT_STORES, indirect=True)
def test_object_store_glob_with_storage_options(object_store, shard_bytes):
    for number in (1, 2, 0):
        object_store.put(f"shards/part-{number}.kdb", shard_bytes[number])
    object_store.put("shards/part-0.kdb.json", b"{}")  # a neighbour the pattern must not take
    pattern = f"{object_store.root}/shards/part-*.kdb"
    options = object_store.options
    assert resolve_sources(pattern, options) == [f"{object_store.root}/shards/part-{number}.kdb" for number in range(3)]
    _assert_shards_in_order(FrameDataset(pattern, image_format="uint8", storage_options=options))
    episodes = EpisodeDataset([pattern], image_format="uint8", storage_options=options)
    assert [episodes[index]["task"] for index in (0, 2, 5)] == ["shard 0", "shard 1", "shard 2"]
    with pytest.raises(FileNotFoundError, match=f"no file matches '{object_store.root}/shards/absent-\\*\\.kdb'"):
        FrameDataset(f"{object_store.root}/shards/absent-*.kdb", storage_options=options)


def test_a_glob_takes_arrayio_transport_options_beside_the_backend_ones(s3_put, s3_options, shard_bytes,
                                                                      remote_client):
    # "client", "concurrency" and "part_bytes" are arrayio's: the listing must not hand them to s3fs.
    for number in range(3):
        s3_put(f"ours/part-{number}.kdb", shard_bytes[number])
    pattern = f"s3://{BUCKET}/ours/part-*.kdb"
    options = {**s3_options, "client": remote_client, "concurrency": 2, "part_bytes": 1 << 20}
    assert resolve_sources(pattern, options) == [f"s3://{BUCKET}/ours/part-{number}.kdb" for number in range(3)]
    _assert_shards_in_order(FrameDataset(pattern, image_format="uint8", storage_options=options))


def test_a_list_mixing_local_paths_and_a_remote_glob(s3_put, s3_options, shard_bytes, tmp_path):
    # storage_options go to the remote shards only: a local path given them would be refused.
    local = tmp_path / "first.kdb"
    local.write_bytes(shard_bytes[0])
    for number in (1, 2):
        s3_put(f"mixed/part-{number}.kdb", shard_bytes[number])
    dataset = FrameDataset([str(local), f"s3://{BUCKET}/mixed/part-*.kdb"], image_format="uint8",
                           storage_options=s3_options)
    _assert_shards_in_order(dataset)


def test_http_globs_are_refused_because_http_cannot_be_listed(http_server, shard_bytes):
    url = http_server.put("shards/part-0.kdb", shard_bytes[0])
    with pytest.raises(arrayio.UnsupportedError, match=r"part-\*\.kdb: HTTP\(S\) servers cannot be listed"):
        FrameDataset(url.replace("part-0", "part-*"))
    # A plain URL with a query (a signed URL) is one shard, not a pattern.
    assert resolve_sources(url + "?signature=abc") == [url + "?signature=abc"]
    assert len(FrameDataset(url, image_format="uint8")) == 9


@pytest.mark.one_client  # CLI subprocesses: slow, and the listing and reads are tested with both clients above
def test_kdb_stats_and_merge_verbs_take_an_s3_glob(cli, s3_server, s3_put, s3_options, shard_bytes, monkeypatch,
                                                   tmp_path):
    for number in range(3):
        s3_put(f"cli-shards/part-{number}.kdb", shard_bytes[number])
    options = ["--storage-option", "key=testing", "--storage-option", "secret=testing",
               "--storage-option", f"client_kwargs.endpoint_url={s3_server.endpoint}",
               "--storage-option", "client_kwargs.region_name=us-east-1"]
    pattern = f"s3://{BUCKET}/cli-shards/part-*.kdb"
    result = cli("kdb", "stats", "--json", pattern, *options)
    assert result.returncode == 0, result.stderr.decode()
    facts = json.loads(result.stdout)
    assert [entry["path"] for entry in facts["files"]] == [f"s3://{BUCKET}/cli-shards/part-{n}.kdb"
                                                         for n in range(3)]
    assert facts["episodes"] == 6 and facts["frames"] == sum(map(sum, SHARD_FRAMES))
    merged = tmp_path / "merged.kdb"
    result = cli("kdb", "merge", pattern, "-o", str(merged), *options)
    assert result.returncode == 0, result.stderr.decode()
    with kdb.open(merged) as f:
        assert len(f) == 6 and f.num_frames == facts["frames"]
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_server.endpoint)  # or the environment gives the endpoint
    by_environment = cli("kdb", "stats", "--json", pattern)
    assert by_environment.returncode == 0 and json.loads(by_environment.stdout)["episodes"] == 6
    missing = cli("kdb", "stats", f"s3://{BUCKET}/cli-shards/none-*.kdb", *options)
    assert missing.returncode == 1 and b"none-*.kdb" in missing.stderr and b"Traceback" not in missing.stderr


def test_a_batch_asks_each_shard_for_its_episodes_at_once(http_server, tmp_path):
    # 4 shards of 40 episodes of 24 frames with bigger images (so one episode's image section outgrows a read-ahead).
    rng = np.random.default_rng(22)
    urls = []
    for number in range(4):
        path = tmp_path / f"batch-{number}.kdb"
        with kdb.Writer(path, created_timestamp=0) as writer:
            for _episode in range(40):
                writer.add_episode(rng.standard_normal((24, 3)).astype(np.float32),
                                   rng.standard_normal((24, 2)).astype(np.float32),
                                   images={"front": rng.integers(0, 255, (24, 32, 32, 3), np.uint8)})
        urls.append(http_server.put(f"batch/{path.name}", path.read_bytes()))
    dataset = FrameDataset(urls, image_format="uint8")
    items = np.random.default_rng(5).choice(len(dataset), 64, replace=False)
    http_server.counts.reset()
    batch = dataset.__getitems__(items.tolist())
    requests, _sent = http_server.counts.total()
    touched = len(np.unique(dataset.shards.locate(items)))
    # Per shard its index blocks (5 of 8 entries) and per touched episode one request for its state/action
    # section and one for its image section; on main the frame walks of every episode added more.
    assert requests <= 4 * 5 + 2 * touched, (requests, touched)
    local = FrameDataset([tmp_path / f"batch-{number}.kdb" for number in range(4)], image_format="uint8")
    expected = local.__getitems__(items.tolist())
    assert len(batch) == len(expected) == 64
    for got, want in zip(batch, expected):
        assert np.array_equal(got["image.front"], want["image.front"]) and np.array_equal(got["state"], want["state"])


def _served_jpeg_shards(http_server, tmp_path, name: str) -> tuple[list[str], list]:
    """2 shards of 12 episodes of 10 JPEG frames (tasks t0, t1, t2 in turn) on the range server: (urls, paths)."""
    rng = np.random.default_rng(8)
    urls, paths = [], []
    for number in range(2):
        path = tmp_path / f"{name}-{number}.kdb"
        with kdb.Writer(path, compress="jpeg") as writer:
            for episode in range(12):
                writer.add_episode(np.zeros((10, 3), np.float32), np.zeros((10, 2), np.float32), task=f"t{episode % 3}",
                                   images={"front": rng.integers(0, 255, (10, 64, 64, 3), np.uint8)})
        urls.append(http_server.put(f"{name}/{path.name}", path.read_bytes()))
        paths.append(path)
    return urls, paths


def test_stats_of_remote_shards_read_every_episode_together(http_server, tmp_path):
    """`arrayio kdb stats` reads each episode's metadata and the cameras of its first frame: one request per
    episode (and more), one after another, before; now per shard the whole index, then the metadata and the
    first frames in a GET of several ranges each."""
    from arrayio.robot.tools import stats

    urls, paths = _served_jpeg_shards(http_server, tmp_path, "stats")
    http_server.counts.reset()
    remote = stats(urls)
    requests, sent = http_server.counts.total()
    local = stats(paths)
    assert {key: value for key, value in remote.items() if key != "files"} == \
        {key: value for key, value in local.items() if key != "files"}
    assert requests <= 2 * 5, requests  # per shard: the open, the index, the metadata, the first frames (+1 spare)
    assert sent <= sum(path.stat().st_size for path in paths) // 3, sent


def _episodes_of(path) -> list[tuple]:
    with kdb.open(path) as reader:
        return [(reader.read_meta(position).task, reader.steps(position).tobytes(),
                 [bytes(reader.image_bytes([record.offset], [record.length])[0])
                  for frame in range(reader.entry(position).num_frames)
                  for record in reader.image_records(position, frame)])
                for position in range(len(reader))]


def test_merge_and_filter_of_remote_shards_fetch_episodes_ahead_in_few_requests(http_server, tmp_path):
    """merge and filter copy episode after episode: each cost its sections' requests one after another (and,
    once, one per frame); now runs of episodes are fetched ahead together."""
    from arrayio.robot.tools import episode_filter, filter_file, merge

    urls, paths = _served_jpeg_shards(http_server, tmp_path, "merge")
    http_server.counts.reset()
    merge(urls, tmp_path / "remote.kdb")
    merged = http_server.counts.total()[0]
    http_server.counts.reset()
    filter_file(urls[0], tmp_path / "remote-filtered.kdb", episode_filter(task="t1"))
    filtered = http_server.counts.total()[0]
    merge(paths, tmp_path / "local.kdb")
    filter_file(paths[0], tmp_path / "local-filtered.kdb", episode_filter(task="t1"))
    assert _episodes_of(tmp_path / "remote.kdb") == _episodes_of(tmp_path / "local.kdb")
    assert _episodes_of(tmp_path / "remote-filtered.kdb") == _episodes_of(tmp_path / "local-filtered.kdb")
    assert merged <= 2 * 6 and filtered <= 8, (merged, filtered)  # per shard: open, index, metadata, sections
