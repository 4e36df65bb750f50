"""Whole episodes from object storage: EpisodeDataset over shards on moto fetches a batch's episodes together
and reads the next batches' episodes ahead (ReadAheadSampler), as FrameDataset does for frames; moto counts
the requests, and the episodes are those of the local files."""

from __future__ import annotations

import numpy as np
import pytest
from remote_samples import put_shards, write_jpeg_shards

torch = pytest.importorskip("torch")

from arrayio.robot.torch import EpisodeDataset, ReadAheadBatch, ReadAheadSampler  # noqa: E402

SHARDS, EPISODES, FRAMES, SIZE = 3, 3, 8, 64  # noise JPEGs of ~10 KB: an episode lies past the 64 KiB read on open
KEYS = ("states", "actions", "image.front", "shard")


def _episode(shard: int, number: int) -> tuple[np.ndarray, np.ndarray, dict]:
    rng = np.random.default_rng([shard, number])
    return (rng.standard_normal((FRAMES, 4)).astype(np.float32), rng.standard_normal((FRAMES, 2)).astype(np.float32),
            {"task": f"task {number}", "images": {"front": rng.integers(0, 255, (FRAMES, SIZE, SIZE, 3), np.uint8)}})


@pytest.fixture(scope="module")
def episode_files(tmp_path_factory):
    return write_jpeg_shards(tmp_path_factory.mktemp("episode-shards"), SHARDS, EPISODES, _episode)


@pytest.fixture
def remote_episodes(episode_files, s3_put, request):
    return put_shards(episode_files, s3_put, request, "episodes")


def _opened(dataset: EpisodeDataset) -> EpisodeDataset:
    for shard in range(len(dataset.shards.sources)):
        assert len(dataset.shards.file(shard).index)  # what is counted next is the episodes' own
    return dataset


def _assert_same(got: dict, want: dict) -> None:
    for key in KEYS:
        assert torch.equal(torch.as_tensor(got[key]), torch.as_tensor(want[key])), key
    assert got["task"] == want["task"]


def test_whole_episodes_are_read_ahead_and_never_asked_for_twice(episode_files, remote_episodes, s3_options,
                                                                 s3_server):
    """Before, EpisodeDataset read each episode when asked: a ReadAheadBatch's ``ahead`` was dropped, so each
    episode of a worker waited its own round trip. Now the next batch's episodes (metadata included) are in
    before it asks, and in all there are as many requests as without read-ahead."""
    local = EpisodeDataset(episode_files, image_format="uint8")
    now, following = [0, 4], [4, 7, 8]  # one episode shared between the two batches
    counted = []
    for ahead in (False, True):
        dataset = _opened(EpisodeDataset(remote_episodes, storage_options=s3_options, image_format="uint8"))
        s3_server.counts.reset()
        batch = ReadAheadBatch(now)
        batch.ahead = following if ahead else None
        first = dataset.__getitems__(batch)
        dataset.shards.wait_read_ahead()
        before = s3_server.counts.total()[0]
        second = dataset.__getitems__(following)
        counted.append((before, s3_server.counts.total()[0]))
        for got, items in ((first, now), (second, following)):
            for episode, number in zip(got, items):
                _assert_same(episode, local[number])
    (plain_before, plain_total), (ahead_before, ahead_total) = counted
    assert plain_total > plain_before and ahead_before == ahead_total == plain_total


def test_a_batch_of_episodes_in_two_shards_fetches_both_at_once(episode_files, remote_episodes, s3_options,
                                                                 s3_server, fetches_meet):
    """Before, a batch of episodes was read one episode after another: a round trip each. Both shards' fetches
    now meet at a barrier, which one waiting for the other would break."""
    dataset = _opened(EpisodeDataset(remote_episodes, storage_options=s3_options, image_format="uint8"))
    fetched = fetches_meet()
    s3_server.counts.reset()
    got = dataset.__getitems__([2, EPISODES + 2])  # shards 0 and 1
    assert sorted(fetched) == [0, 1]
    assert s3_server.counts.total()[0] == 2  # an episode's metadata, steps and images in one request each
    local = EpisodeDataset(episode_files, image_format="uint8")
    for episode, number in zip(got, [2, EPISODES + 2]):
        _assert_same(episode, local[number])


def test_two_workers_read_episodes_ahead_as_the_local_files_give_them(episode_files, remote_episodes, s3_options,
                                                                      s3_server):
    local = EpisodeDataset(episode_files, image_format="uint8")
    remote = EpisodeDataset(remote_episodes, storage_options=s3_options, image_format="uint8")
    batches = torch.utils.data.BatchSampler(torch.utils.data.SequentialSampler(remote), 1, drop_last=False)
    s3_server.counts.reset()
    loader = torch.utils.data.DataLoader(remote, batch_sampler=ReadAheadSampler(batches, 2, batches_ahead=2),
                                         num_workers=2, collate_fn=lambda episodes: episodes)
    got = [episode for batch in loader for episode in batch]
    requests, sent = s3_server.counts.total()
    assert len(got) == len(local) == SHARDS * EPISODES
    for number, episode in enumerate(got):
        _assert_same(episode, local[number])
    # Each worker opens each shard once (its start and index) and fetches each episode it or its read-ahead
    # wants once: never a whole shard per episode, never an episode twice in one process.
    shard_bytes = sum(path.stat().st_size for path in episode_files)
    assert sent <= 2 * shard_bytes + 2 * SHARDS * (64 << 10), (sent, shard_bytes)
    assert requests <= 3 * SHARDS * 3 + 2 * SHARDS * EPISODES, requests


def test_a_bad_item_of_a_later_batch_fails_that_batch_not_this_one(episode_files, remote_episodes, s3_options):
    """Before, a batch whose read-ahead named an item outside the dataset (or not an integer) raised for an
    item it does not hold; the batch that holds it raises, naming it."""
    from arrayio.robot.torch import FrameDataset, collate

    episodes = EpisodeDataset(remote_episodes, storage_options=s3_options, image_format="uint8")
    frames = FrameDataset(remote_episodes, storage_options=s3_options, image_format="uint8")
    local_episodes = EpisodeDataset(episode_files, image_format="uint8")
    local_frames = FrameDataset(episode_files, image_format="uint8")
    for later in ([10**6], [0.5], [-10**6]):
        batch = ReadAheadBatch([1, 2])
        batch.ahead = later
        for got, number in zip(episodes.__getitems__(batch), [1, 2]):
            _assert_same(got, local_episodes[number])
        got = collate(frames.__getitems__(batch))
        assert torch.equal(got["image.front"], collate(local_frames.__getitems__([1, 2]))["image.front"])
        for dataset in (episodes, frames):
            dataset.shards.wait_read_ahead()
            with pytest.raises((IndexError, TypeError), match="outside|whole number|integer"):
                dataset.__getitems__(later)
