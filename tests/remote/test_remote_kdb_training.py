"""Training straight from object storage: FrameDataset over ``s3://bucket/shards/*.kdb`` on moto, shuffled
across shards under 2 DataLoader workers, gives the batches the local files give, and the requests and
bytes the server counts stay bounded: each worker fetches an episode's image section once (one request)
and never a whole shard for one frame."""

from __future__ import annotations

import io

import numpy as np
import pytest
from remote_samples import BUCKET, put_shards, write_jpeg_shards

from arrayio import kdb

torch = pytest.importorskip("torch")

from arrayio.robot.torch import FrameDataset, collate  # noqa: E402 - after the torch skip

SHARDS, EPISODES, FRAMES, SIZE = 3, 4, 12, 64


def _noise_frames(seed: int) -> np.ndarray:
    """Frames of noise: JPEGs of about 10 KB, so an episode's images dwarf the file's header and index."""
    return np.random.default_rng(seed).integers(0, 255, (FRAMES, SIZE, SIZE, 3), np.uint8)


def _marked_episode(shard: int, number: int) -> tuple[np.ndarray, np.ndarray, dict]:
    """States that say where each frame comes from (shard, episode, frame), and noise images."""
    marks = np.stack([np.full(FRAMES, shard), np.full(FRAMES, number), np.arange(FRAMES)], 1)
    return (marks.astype(np.float32), marks[:, :2].astype(np.float32),
            {"images": {"front": _noise_frames(100 * shard + number)}})


@pytest.fixture(scope="module")
def shard_files(tmp_path_factory):
    return write_jpeg_shards(tmp_path_factory.mktemp("train-shards"), SHARDS, EPISODES, _marked_episode)


@pytest.fixture
def remote_shards(shard_files, s3_put, request):
    return put_shards(shard_files, s3_put, request, "train")


def _batches(dataset, workers: int, batch_size: int = 10) -> list[dict]:
    loader = torch.utils.data.DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=workers,
                                         collate_fn=collate, generator=torch.Generator().manual_seed(7))
    return list(loader)


def test_two_workers_shuffle_across_remote_shards_as_over_local_files(shard_files, remote_shards, s3_options,
                                                                      s3_server):
    local = FrameDataset(shard_files, image_format="uint8")
    s3_server.counts.reset()
    remote = FrameDataset(remote_shards, storage_options=s3_options, image_format="uint8")
    got = _batches(remote, workers=2)
    requests, sent = s3_server.counts.total()
    want = _batches(local, workers=0)
    assert len(got) == len(want) == -(-SHARDS * EPISODES * FRAMES // 10)
    for mine, theirs in zip(got, want):
        for key in ("state", "image.front", "shard", "index"):
            assert torch.equal(mine[key], theirs[key]), key
    assert any(len(set(batch["shard"].tolist())) > 1 for batch in got)  # one global shuffle, not shard by shard
    shard_bytes = sum(path.stat().st_size for path in shard_files)
    # Bounded by the server's own counts: each process (the listing one and 2 workers) reads a shard's
    # header and index once and each episode's image section at most once, in one request each.
    assert sent <= 3 * shard_bytes, (sent, shard_bytes)
    assert requests <= 3 * SHARDS * 3 + 2 * SHARDS * EPISODES + 4, requests


def test_two_workers_fetch_each_section_once_between_them(shard_files, remote_shards, s3_options, s3_server):
    """With random frames each worker's first batches want nearly every episode: the workers share what they
    fetch through the set's folder, so each section crosses the wire once (each worker fetched every one)."""
    dataset = FrameDataset(remote_shards, storage_options=s3_options, image_format="uint8")
    sections = 0
    for path in shard_files:
        with kdb.open(path) as local:
            sections += int(local.index["images_length"].sum() + local.index["actions_length"].sum())
    s3_server.counts.reset()
    assert len(_batches(dataset, workers=2)) == -(-SHARDS * EPISODES * FRAMES // 10)
    requests, sent = s3_server.counts.total()
    opening = 2 * SHARDS * (64 * 1024 + 4096)  # each worker's first read of a shard (64 KiB) and its index
    assert sent <= sections + opening, (sent, sections)


def _in_a_forked_worker(call, *args):
    """What ``call(*args)`` returns (or the repr of what it raised) in a process forked from this one, as a
    DataLoader forks its workers."""
    import multiprocessing

    context = multiprocessing.get_context("fork")
    answers = context.Queue()

    def run() -> None:
        try:
            answers.put(call(*args))
        except Exception as error:  # said to the test, not lost in the child
            answers.put(repr(error))

    child = context.Process(target=run)
    child.start()
    answer = answers.get(timeout=60)
    child.join(timeout=60)
    return answer


def _frames_of_every_shard(dataset) -> list[list[int]]:
    return [dataset.shards.file(shard).index["num_frames"].tolist() for shard in range(SHARDS)]


def test_workers_open_the_shards_without_a_request(remote_shards, s3_options, s3_server):
    """Each shard's start and index, read where the set was built, are in the set's folder, and its size and
    ETag travel with the set: a worker opens every shard without asking the server (2 requests each before)."""
    dataset = FrameDataset(remote_shards, storage_options=s3_options)
    s3_server.counts.reset()
    assert _in_a_forked_worker(_frames_of_every_shard, dataset) == [[FRAMES] * EPISODES] * SHARDS
    assert s3_server.counts.total() == (0, 0)


def test_the_set_surveys_remote_shards_at_once(shard_files, http_server):
    """Each shard's start, index and (for delta_timestamps) every episode's fps cost round trips: the set reads
    several shards at once, and the metadata blobs of a shard in one several-range GET. One shard at a time,
    each episode's blob a request of its own before: at most 1 GET in flight, 3 x (2 + 4) requests."""
    urls = [http_server.put(f"survey/{path.name}", path.read_bytes()) for path in shard_files]
    local = FrameDataset(shard_files, delta_timestamps={"state": [0.0]})
    http_server.delay = 0.25  # long enough for concurrent GETs to overlap on a loaded machine
    try:
        http_server.counts.reset()
        http_server.reset_peak()
        remote = FrameDataset(urls, delta_timestamps={"state": [0.0]})
        requests, _ = http_server.counts.total()
        peak = http_server.peak
    finally:
        http_server.delay = 0.0
    assert np.array_equal(remote.shards.episode_fps, local.shards.episode_fps)
    assert np.array_equal(remote.shards.episode_frames, local.shards.episode_frames)
    assert remote.cameras == local.cameras == ["front"] and remote.shards.dims == local.shards.dims
    assert peak >= 2 and requests <= 3 * SHARDS, (peak, requests)


def _entries_of_the_first_shard(dataset) -> list[int]:
    shard = dataset.shards.file(0)
    return [shard.entry(position).num_frames for position in range(len(shard))]


def test_workers_read_every_index_entry_from_the_folder(tmp_path, s3_put, s3_options, s3_server):
    """A shard of more index blocks than one (8 entries each), its index past the first read's 64 KiB: the worker
    holds its whole index as the set was built, from the folder, where it used to fetch it block by block, one
    request after another."""
    path = tmp_path / "many.kdb"
    with kdb.Writer(path) as writer:
        for _ in range(3 * 8 + 1):
            writer.add_episode(np.zeros((2, 500), np.float32), np.zeros((2, 2), np.float32))  # 4 KB each
    assert path.stat().st_size > 96 << 10
    s3_put("many-episodes/part-0.kdb", path.read_bytes())
    dataset = FrameDataset(f"s3://{BUCKET}/many-episodes/*.kdb", storage_options=s3_options)
    s3_server.counts.reset()
    assert _in_a_forked_worker(_entries_of_the_first_shard, dataset) == [2] * (3 * 8 + 1)
    assert s3_server.counts.total() == (0, 0)


def _first_frame_state(dataset) -> list[int]:
    return dataset[0]["state"].tolist()


def test_a_shard_replaced_after_the_set_was_built_is_refused_by_the_worker(remote_shards, s3_options, s3_put,
                                                                         shard_files):
    """The worker checks what the server sends against the version the set was built from (the header and
    index in the folder are that version's): a shard replaced in between, at the same size, is an error that
    names it, not frames of two versions."""
    dataset = FrameDataset(remote_shards, storage_options=s3_options, image_format="uint8")
    data = bytearray(shard_files[0].read_bytes())
    data[-1] ^= 0xFF  # the same size, another ETag
    s3_put(remote_shards.split(f"{BUCKET}/", 1)[1].replace("*", "part-0"), bytes(data))
    answer = _in_a_forked_worker(_first_frame_state, dataset)
    assert "ObjectChangedError" in answer and "part-0.kdb" in answer and "ETag" in answer, answer


def test_one_frame_fetches_its_episode_not_its_shard(shard_files, remote_shards, s3_options, s3_server):
    dataset = FrameDataset(remote_shards, storage_options=s3_options)
    s3_server.counts.reset()
    item = dataset[2 * EPISODES * FRAMES + FRAMES + 5]  # shard 2, episode 1, frame 5
    assert [int(value) for value in item["state"]] == [2, 1, 5]
    requests, sent = s3_server.counts.total()
    shard_size = shard_files[2].stat().st_size
    assert sent < shard_size / 2 and requests <= 4, (requests, sent, shard_size)
    s3_server.counts.reset()
    again = dataset.__getitems__([2 * EPISODES * FRAMES + FRAMES + frame for frame in range(FRAMES)])
    assert len(again) == FRAMES and s3_server.counts.total()[0] == 0  # the episode's bytes are cached


def test_image_bytes_coalesce_the_ranges_of_a_batch(shard_files, remote_shards, s3_options, s3_server):
    with kdb.open(remote_shards.replace("*", "part-1"), storage_options=s3_options) as remote, \
            kdb.open(shard_files[1]) as local:
        tables = [local.image_table(episode)["front"] for episode in range(EPISODES)]
        chosen = np.concatenate([table[[1, 4, 9]] for table in tables])
        chosen = chosen[np.random.default_rng(3).permutation(len(chosen))]  # episodes interleaved
        s3_server.counts.reset()
        pieces = remote.image_bytes(chosen["offset"], chosen["length"])
        requests, sent = s3_server.counts.total()
        assert [bytes(piece) for piece in pieces] == [bytes(piece) for piece in local.image_bytes(
            chosen["offset"], chosen["length"])]
        # One span per episode (frames 1..9 of each), plus the index on its first use; never one per image.
        assert requests <= EPISODES + 1 and sent <= local.source.size
        from PIL import Image

        assert Image.open(io.BytesIO(bytes(pieces[0]))).size == (SIZE, SIZE)


def test_a_batch_joins_the_neighbouring_episodes_of_a_shard_into_one_request(shard_files, remote_shards, s3_options,
                                                                           s3_server):
    dataset = FrameDataset(remote_shards, storage_options=s3_options, image_format="uint8")
    for shard in range(SHARDS):
        dataset.shards.file(shard).index  # header and index read: what follows is the batch's own requests
    s3_server.counts.reset()
    items = [episode * FRAMES + 3 for episode in range(SHARDS * EPISODES)]  # one frame of every episode
    batch = collate(dataset.__getitems__(items))
    requests, sent = s3_server.counts.total()
    assert [tuple(int(value) for value in row) for row in batch["state"]] == [
        (shard, episode, 3) for shard in range(SHARDS) for episode in range(EPISODES)]
    # Each shard's episodes lie back to back (a small metadata blob between them): one request per shard,
    # not one per episode, and no more than the shards' bytes.
    assert requests <= SHARDS, requests
    assert sent <= sum(path.stat().st_size for path in shard_files)



def test_a_batch_fetches_the_small_gap_between_its_episodes_with_them(shard_files, remote_shards, s3_options,
                                                                     s3_server):
    """Episodes 0 and 2 of a shard: episode 1 between them is smaller than a request is worth (and than the
    asked bytes), so it comes in the same request (two before), and reading it later asks for nothing."""
    dataset = FrameDataset(remote_shards, storage_options=s3_options, image_format="uint8")
    local = FrameDataset(shard_files, image_format="uint8")
    assert len(dataset.shards.file(0).index) == EPISODES  # header and index read
    s3_server.counts.reset()
    asked = _episode_frames(0, 0, range(3)) + _episode_frames(0, 2, range(3))
    got = collate(dataset.__getitems__(asked))
    requests, sent = s3_server.counts.total()
    assert requests == 1 and sent <= shard_files[0].stat().st_size, (requests, sent)
    between = _episode_frames(0, 1, range(FRAMES))
    for frames, batch in ((asked, got), (between, collate(dataset.__getitems__(between)))):
        want = collate(local.__getitems__(frames))
        assert all(torch.equal(batch[key], want[key]) for key in ("state", "image.front", "index"))
    assert s3_server.counts.total()[0] == 1


def _three_episodes(folder, middle_frames: int) -> bytes:
    path = folder / f"three-{middle_frames}.kdb"
    with kdb.Writer(path, compress="jpeg") as writer:
        for episode, frames in enumerate((FRAMES, middle_frames, FRAMES)):
            marks = np.zeros((frames, 3), np.float32)
            writer.add_episode(marks, marks[:, :2], images={"front": _noise_frames(episode)[:1].repeat(frames, 0)})
    return path.read_bytes()


@pytest.mark.parametrize("middle", ["larger than the asked episodes", "an entry that fails its checks",
                                    "an entry that points before the gap"])
def test_a_gap_is_fetched_with_its_neighbours_only_when_small_and_sound(middle, tmp_path, s3_put, s3_options,
                                                                       s3_server):
    """The episode between two asked ones is left out when it holds more bytes than they do, when its index
    entry fails its checks, or when its sections lie elsewhere in the file (entries 0 and 1 swapped): the asked
    episodes are fetched as before, and only they, without an error."""
    from arrayio.kdb._records import INDEX_ENTRY

    data = bytearray(_three_episodes(tmp_path, 3 * FRAMES if middle.startswith("larger") else FRAMES))
    path = tmp_path / "three.kdb"
    path.write_bytes(data)
    with kdb.open(path) as local:
        base = local.header.index_offset
        actions_length = int(local.index["actions_length"][1])
    if middle.startswith("an entry that fails"):
        at = INDEX_ENTRY.offset_of("actions_length", base, 1)
        data[at:at + 8] = (actions_length + 1).to_bytes(8, "little")
    elif middle.startswith("an entry that points"):
        first, second = (INDEX_ENTRY.offset_of("episode_id", base, position) for position in (0, 1))
        size = INDEX_ENTRY.size
        data[first:first + size], data[second:second + size] = data[second:second + size], data[first:first + size]
    path.write_bytes(data)
    with kdb.open(path) as local:
        sections = local.index.copy()
        if middle.startswith("an entry that fails"):
            with pytest.raises(kdb.KinoError):
                local.entry(1)
    url = s3_put(f"gaps/{middle.replace(' ', '-')}.kdb", bytes(data))
    with kdb.open(url, storage_options=s3_options) as remote:
        assert len(remote.index) == 3
        s3_server.counts.reset()
        remote.prefetch_episodes([0, 2])
        requests, sent = s3_server.counts.total()
        asked = int(sum(sections[field][episode] for field in ("actions_length", "images_length")
                        for episode in (0, 2)))
        # Swapped, the asked episodes' sections lie back to back: one request, and still only their bytes.
        assert requests == (1 if middle.endswith("before the gap") else 2), requests
        assert sent <= asked + 2 * 4096, (sent, asked)
        assert remote.image_table(2)["front"]["length"].min() > 0


_WORKER_CLIENTS = """
import json, sys, torch
from arrayio.robot.torch import FrameDataset

class Clients(torch.utils.data.Dataset):
    def __init__(self, frames):
        self.frames = frames
    def __len__(self):
        return 2
    def __getitem__(self, item):
        self.frames[item]
        return self.frames.shards.file(0).source.remote.client

frames = FrameDataset(sys.argv[1], storage_options=json.loads(sys.argv[2]), image_format="uint8")
loader = torch.utils.data.DataLoader(Clients(frames), batch_size=1, num_workers=2,
                                     collate_fn=lambda items: items[0])
print(json.dumps(sorted(loader)))
"""


@pytest.mark.one_client  # the child process chooses its clients itself
def test_dataloader_workers_read_with_obstore_when_the_set_was_built_here(remote_shards, s3_options):
    """obstore does not survive a fork: a process that used it hands its workers fsspec (several times the CPU
    per byte). The set is built with fsspec, so workers forked after it still read with obstore."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    pytest.importorskip("obstore")
    root = Path(__file__).resolve().parents[2]
    env = {key: value for key, value in os.environ.items() if key != "ARRAYIO_REMOTE_CLIENT"}
    env["PYTHONPATH"] = os.pathsep.join([str(root / "src"), env.get("PYTHONPATH", "")])
    result = subprocess.run([sys.executable, "-c", _WORKER_CLIENTS, remote_shards, json.dumps(s3_options)],
                            capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads(result.stdout.strip().splitlines()[-1]) == ["obstore", "obstore"]


def test_the_read_ahead_sampler_hands_each_batch_the_next_one_of_its_process():
    from arrayio.robot.torch import ReadAheadBatch, ReadAheadSampler

    batches = [[2 * number, 2 * number + 1] for number in range(5)]
    for workers, span in ((2, 2), (0, 1), (1, 1)):
        made = list(ReadAheadSampler(batches, workers))
        assert made == batches and all(isinstance(batch, ReadAheadBatch) for batch in made)
        assert [batch.ahead for batch in made] == [batches[number + span] if number + span < 5 else None
                                                   for number in range(5)]
    assert len(ReadAheadSampler(batches, 2)) == 5
    import pickle  # the batches travel to the DataLoader workers pickled

    sent = pickle.loads(pickle.dumps(list(ReadAheadSampler(batches, 2))[0]))
    assert sent == [0, 1] and sent.ahead == [4, 5]
    for workers, span in ((2, 2), (0, 1)):  # two batches ahead: those its process reads next
        made = list(ReadAheadSampler(batches, workers, batches_ahead=2))
        assert made == batches and [batch.ahead for batch in made] == [
            sum((batches[later] for later in (number + span, number + 2 * span) if later < 5), []) or None
            for number in range(5)]
    with pytest.raises(ValueError, match="batches_ahead must be >= 1"):
        ReadAheadSampler(batches, 2, batches_ahead=0)


def test_reading_two_batches_ahead_asks_for_nothing_twice(shard_files, remote_shards, s3_options, s3_server):
    """Each batch reads the next two ahead, the first of them asked for already by the batch before: the
    requests only move earlier, as many in all as without read-ahead, and each batch after the first finds its
    bytes fetched."""
    from arrayio.robot.torch import ReadAheadSampler

    places = ((0, 0), (1, 2), (2, 1), (0, 3))  # (shard, episode) of each batch: its own reads ask that shard
    batches = [_episode_frames(shard, episode, range(3)) for shard, episode in places]
    local = FrameDataset(shard_files, image_format="uint8")
    totals = []
    for ahead in (None, 2):
        dataset = FrameDataset(remote_shards, storage_options=s3_options, image_format="uint8")
        for shard in range(SHARDS):
            assert len(dataset.shards.file(shard).index)
        s3_server.counts.reset()
        asked_by_batch = []
        def asked(shard: int) -> int:  # (a read-ahead meanwhile asks for the other shards' bytes)
            return sum(count for path, count in dict(s3_server.counts.requests).items()
                       if path.endswith(f"part-{shard}.kdb"))

        sampled = batches if ahead is None else ReadAheadSampler(batches, 0, batches_ahead=ahead)
        for batch, (shard, _) in zip(sampled, places):
            before = asked(shard)
            got = collate(dataset.__getitems__(batch))
            asked_by_batch.append(asked(shard) - before)
            want = collate(local.__getitems__(list(batch)))
            assert all(torch.equal(got[key], want[key]) for key in ("state", "image.front", "index"))
            dataset.shards.wait_read_ahead()
            if len(asked_by_batch) == 1:  # two batches ahead: the third batch's shard asked for already
                assert (asked(2) > 0) == (ahead == 2)
        totals.append((s3_server.counts.total()[0], asked_by_batch))
    (plain, plain_by_batch), (ahead, ahead_by_batch) = totals
    assert ahead == plain and min(plain_by_batch) > 0
    assert ahead_by_batch[1:] == [0, 0, 0]  # batch 0 fetched batches 1 and 2, batch 1 fetched batch 3


def _episode_frames(shard: int, episode: int, frames: range) -> list[int]:
    return [(shard * EPISODES + episode) * FRAMES + frame for frame in frames]


def test_a_batch_fetches_the_next_batch_ahead_and_never_asks_twice(shard_files, remote_shards, s3_options,
                                                                   s3_server):
    """While a batch is read, the bytes of the next one (but those it shares with this one) are fetched in the
    background: reading the next batch then asks the server for nothing. The requests only move earlier: in
    all, exactly as many as the same two batches without read-ahead."""
    from arrayio.robot.torch import ReadAheadBatch

    now = _episode_frames(0, 1, range(0, 12, 2))
    following = _episode_frames(0, 1, range(1, 12, 2)) + _episode_frames(2, 3, range(4))  # one episode shared
    counted = []
    local = FrameDataset(shard_files, image_format="uint8")
    for ahead in (False, True):
        dataset = FrameDataset(remote_shards, storage_options=s3_options, image_format="uint8")
        for shard in range(SHARDS):
            assert len(dataset.shards.file(shard).index)  # header and index read: what follows is the batches' own
        s3_server.counts.reset()
        batch = ReadAheadBatch(now)
        batch.ahead = following if ahead else None
        first = collate(dataset.__getitems__(batch))
        dataset.shards.wait_read_ahead()
        before_next = s3_server.counts.total()[0]
        second = collate(dataset.__getitems__(following))
        counted.append((before_next, s3_server.counts.total()[0]))
        for got, frames in ((first, now), (second, following)):
            want = collate(local.__getitems__(frames))
            assert all(torch.equal(got[key], want[key]) for key in ("state", "image.front", "index"))
    (plain_before, plain_total), (ahead_before, ahead_total) = counted
    assert ahead_total == plain_total and plain_total > plain_before  # the next batch asked for its episode
    assert ahead_before == ahead_total  # ... and with read-ahead, had it before it asked


def test_two_workers_read_ahead_across_remote_shards_as_over_local_files(shard_files, remote_shards, s3_options,
                                                                         s3_server):
    from arrayio.robot.torch import ReadAheadSampler
    from arrayio.robot.torch_loader import GpuLoader

    local = FrameDataset(shard_files, image_format="uint8")
    remote = FrameDataset(remote_shards, storage_options=s3_options, image_format="uint8")

    def assert_as_local(batches) -> None:
        seen = []
        for batch in batches:
            want = collate(local.__getitems__(batch["index"].tolist()))
            assert all(torch.equal(batch[key], want[key]) for key in ("state", "image.front", "index"))
            seen.extend(batch["index"].tolist())
        assert sorted(seen) == list(range(len(local)))

    s3_server.counts.reset()
    sampler = torch.utils.data.BatchSampler(torch.utils.data.RandomSampler(
        remote, generator=torch.Generator().manual_seed(7)), 10, drop_last=False)
    got = list(torch.utils.data.DataLoader(remote, batch_sampler=ReadAheadSampler(sampler, 2), num_workers=2,
                                           collate_fn=collate))
    requests, sent = s3_server.counts.total()
    assert_as_local(got)
    assert any(len(set(batch["shard"].tolist())) > 1 for batch in got)
    # The bounds of plain reads: each worker fetches an episode's sections at most once, ahead or not.
    assert sent <= 3 * sum(path.stat().st_size for path in shard_files), sent
    assert requests <= 3 * SHARDS * 3 + 2 * SHARDS * EPISODES + 4, requests
    loader = GpuLoader(remote, batch_size=10, device="cpu", decode="cpu", num_workers=0, shuffle=True,
                       generator=torch.Generator().manual_seed(7), image_format="uint8")
    assert isinstance(loader.loader.batch_sampler, ReadAheadSampler)  # remote shards: read ahead by itself
    assert_as_local(list(loader))
    assert not isinstance(GpuLoader(local, batch_size=10, device="cpu", decode="cpu").loader.batch_sampler,
                          ReadAheadSampler)
    assert loader.batches_ahead == 2 and loader.loader.batch_sampler.batches_ahead == 2  # two batches by default
    assert not isinstance(GpuLoader(remote, batch_size=10, device="cpu", decode="cpu", batches_ahead=0).loader
                          .batch_sampler, ReadAheadSampler)
    for bad, error in ((-1, ValueError), (1.5, TypeError)):
        with pytest.raises(error, match="batches_ahead"):
            GpuLoader(remote, batch_size=10, device="cpu", decode="cpu", batches_ahead=bad)


_AFTER_A_WORKER = """
import json, sys, time, torch
from arrayio.robot.torch import FrameDataset, collate

def drop_inherited(worker):
    # What any worker may do: make an fsspec HTTP filesystem of its own (fsspec then forgets the instances
    # inherited from this process) and collect garbage.
    import fsspec, gc
    fsspec.filesystem("http")
    gc.collect()

urls, options = json.loads(sys.argv[1]), {"read_timeout": 5}
frames = FrameDataset(urls, storage_options=options, image_format="uint8")  # built with fsspec, here
frames.shards.file(0)  # a file open here: its fsspec session pools this process's connections
loader = torch.utils.data.DataLoader(frames, batch_size=16, num_workers=1, collate_fn=collate,
                                     worker_init_fn=drop_inherited)
seen = sum(len(batch["index"]) for batch in loader)  # a forked worker reads, then exits
started = time.monotonic()
again = FrameDataset(urls, storage_options=options, image_format="uint8")  # this process's connections again
print(json.dumps([seen, len(again), round(time.monotonic() - started, 1)]))
"""


@pytest.mark.one_client  # the child process chooses its clients itself
def test_a_worker_that_exits_leaves_this_process_http_connections_alone(shard_files, http_server):
    """A DataLoader worker inherits this process's fsspec HTTP session: its pooled sockets and its event loop's
    epoll set are shared with it. When the worker dropped the inherited filesystem, its finalizer closed that
    session, taking the sockets out of the shared epoll set: this process's next read over HTTP waited out its
    read timeout ("cannot read (timed out)"). The child now leaves the parent's sessions alone."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    urls = [http_server.put(f"after-worker/{path.name}", path.read_bytes()) for path in shard_files]
    root = Path(__file__).resolve().parents[2]
    env = {key: value for key, value in os.environ.items() if key != "ARRAYIO_REMOTE_CLIENT"}
    env["PYTHONPATH"] = os.pathsep.join([str(root / "src"), env.get("PYTHONPATH", "")])
    result = subprocess.run([sys.executable, "-c", _AFTER_A_WORKER, json.dumps(urls)], capture_output=True,
                            text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    seen, frames, seconds = json.loads(result.stdout.strip().splitlines()[-1])
    assert seen == frames == SHARDS * EPISODES * FRAMES and seconds < 2


def test_a_process_over_many_remote_shards_keeps_the_cache_budget(shard_files, remote_shards, s3_options):
    # Before: each open shard kept up to 32 MiB of fetched sections, so a worker over hundreds of remote shards
    # could hold 32 MiB of each, whatever the user wanted; now the remote_cache_bytes budget, where set, bounds
    # every shard's cache of the process together.
    from arrayio import limits

    budget = sum(path.stat().st_size for path in shard_files) // 3
    with limits.raised(remote_cache_bytes=budget):
        remote = FrameDataset(remote_shards, storage_options=s3_options, image_format="uint8")
        got = _batches(remote, workers=0)
        held = sum(shard.source.remote._cache.held for shard in remote.shards._files.values())
    want = _batches(FrameDataset(shard_files, image_format="uint8"), workers=0)
    for mine, theirs in zip(got, want, strict=True):
        for key in ("state", "image.front", "index"):
            assert torch.equal(mine[key], theirs[key]), key
    assert 0 < held <= budget
