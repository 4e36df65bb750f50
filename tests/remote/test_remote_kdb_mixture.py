"""Mixtures of remote shard sets read ahead as one remote set does: while a batch is read, each remote dataset of
the mixture fetches its part of the next batch in the background (moto counts the requests), the batches are
those of the same mixture over the local files, and GpuLoader turns read-ahead on for a remote mixture."""

from __future__ import annotations

import numpy as np
import pytest
from remote_samples import BUCKET

from arrayio import kdb

torch = pytest.importorskip("torch")

from arrayio.robot.torch import FrameDataset, MixtureDataset, ReadAheadBatch, ReadAheadSampler, collate  # noqa: E402
from arrayio.robot.torch_loader import GpuLoader  # noqa: E402

FRAMES, SIZE = 10, 48
# Two robots: two shards of two episodes with a 3-value state, one shard of three with a 5-value state (padded).
ROBOTS = {"arm": (2, 2, 3), "humanoid": (1, 3, 5)}
KEYS = ("state", "state_dim_mask", "image.front", "index", "dataset")


@pytest.fixture(scope="module")
def robot_files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("mixture-shards")
    made: dict[str, list] = {}
    for robot, (shards, episodes, dim) in ROBOTS.items():
        for shard in range(shards):
            path = folder / f"{robot}-{shard}.kdb"
            with kdb.Writer(path, compress="jpeg") as writer:
                for episode in range(episodes):
                    rng = np.random.default_rng([len(robot), shard, episode])
                    writer.add_episode(rng.standard_normal((FRAMES, dim)).astype(np.float32),
                                       np.zeros((FRAMES, 2), np.float32),
                                       images={"front": rng.integers(0, 255, (FRAMES, SIZE, SIZE, 3), np.uint8)})
            made.setdefault(robot, []).append(path)
    return made


@pytest.fixture
def remote_robots(robot_files, s3_put, request):
    prefix = "mix-" + request.node.name.replace("[", "-").replace("]", "")
    for robot, paths in robot_files.items():
        for path in paths:
            s3_put(f"{prefix}/{robot}/{path.name}", path.read_bytes())
    return {robot: f"s3://{BUCKET}/{prefix}/{robot}/*.kdb" for robot in robot_files}


def _mixture(sources: dict, **options) -> MixtureDataset:
    return MixtureDataset([(FrameDataset(source, image_format="uint8", **options), weight)
                           for source, weight in zip(sources.values(), (0.6, 0.4))], seed=3)


def _assert_same(got: dict, want: dict) -> None:
    for key in KEYS:
        assert torch.equal(got[key], want[key]), key


def _next_batch_requests(mixture: MixtureDataset, now: list[int], following: list[int], counts,
                         ahead: bool) -> tuple[int, int, dict, dict]:
    """(requests before the second batch, requests after it, both batches) with ``following`` read ahead or not."""
    remote = [dataset for dataset in mixture.datasets if getattr(dataset, "remote", False)]
    for dataset in remote:
        for shard in range(len(dataset.shards.sources)):
            assert len(dataset.shards.file(shard).index)  # what is counted next is the batches' own
    counts.reset()
    batch = ReadAheadBatch(now)
    batch.ahead = following if ahead else None
    first = collate(mixture.__getitems__(batch))
    for dataset in remote:
        dataset.shards.wait_read_ahead()
    before = counts.total()[0]
    second = collate(mixture.__getitems__(following))
    return before, counts.total()[0], first, second


def test_a_remote_mixture_fetches_the_next_batch_ahead_for_each_of_its_datasets(robot_files, remote_robots,
                                                                                   s3_options, s3_server):
    """Before, a mixture dropped the batch's ``ahead``: the next batch's requests waited for its reads."""
    local = _mixture(robot_files)
    sources, _ = local.plan()
    now = np.flatnonzero(sources == 0)[:4].tolist() + np.flatnonzero(sources == 1)[:2].tolist()
    following = np.flatnonzero(sources == 0)[-6:].tolist() + np.flatnonzero(sources == 1)[-4:].tolist()
    counted = []
    for ahead in (False, True):
        remote = _mixture(remote_robots, storage_options=s3_options)
        before, after, first, second = _next_batch_requests(remote, now, following, s3_server.counts, ahead)
        _assert_same(first, collate(local.__getitems__(now)))
        _assert_same(second, collate(local.__getitems__(following)))
        counted.append((before, after))
    (plain_before, plain_total), (ahead_before, ahead_total) = counted
    assert plain_total > plain_before  # the next batch needed bytes of its own ...
    assert ahead_before == ahead_total == plain_total  # ... read ahead, it had them before it asked: none twice


class _Unbatched(torch.utils.data.Dataset):
    """A dataset a mixture cannot fetch into the same batch as FrameDatasets (no batch_signature)."""

    def __init__(self, dataset: FrameDataset) -> None:
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, item: int) -> dict:
        return self.dataset[item]


@pytest.mark.parametrize("in_this_batch", [False, True], ids=["next-batch-only", "both-batches"])
def test_a_mixture_fetched_dataset_by_dataset_hands_each_remote_one_its_part_ahead(robot_files, remote_robots,
                                                                                   s3_options, s3_server,
                                                                                   in_this_batch):
    """Where the datasets cannot share a batch, each is read with its own __getitems__: the remote one is handed
    its part of the next batch there, or read ahead directly where this batch has none of its items."""
    arm = next(iter(ROBOTS))

    def mixture(source, **options) -> MixtureDataset:
        return MixtureDataset([(FrameDataset(source, image_format="uint8", **options), 0.5),
                               (_Unbatched(FrameDataset(robot_files[arm], image_format="uint8")), 0.5)], seed=3)

    local = mixture(robot_files[arm])
    sources, _ = local.plan()
    now = np.flatnonzero(sources == 1)[:3].tolist() + (np.flatnonzero(sources == 0)[:2].tolist() if in_this_batch
                                                       else [])
    following = np.flatnonzero(sources == 0)[-5:].tolist()
    assert not local.remote and not local._ahead_by_dataset(following)
    counted = []
    for ahead in (False, True):
        remote = mixture(remote_robots[arm], storage_options=s3_options)
        assert remote.remote
        before, after, first, second = _next_batch_requests(remote, now, following, s3_server.counts, ahead)
        for got, items in ((first, now), (second, following)):
            want = collate(local.__getitems__(items))
            assert all(torch.equal(got[key], want[key]) for key in ("state", "image.front", "index", "dataset"))
        counted.append((before, after))
    (plain_before, plain_total), (ahead_before, ahead_total) = counted
    assert plain_total > plain_before and ahead_before == ahead_total == plain_total


def test_an_ahead_outside_the_mixture_reads_nothing_ahead_and_the_batch_as_asked(robot_files, remote_robots,
                                                                                 s3_options, s3_server):
    remote = _mixture(remote_robots, storage_options=s3_options)
    local = _mixture(robot_files)
    batch = ReadAheadBatch([0, 5, 9])
    for ahead in ([len(remote)], [-len(remote) - 1], [], [0.5], [3, 0.5], ["7"]):
        batch.ahead = ahead  # a hint, as for FrameDataset and EpisodeDataset: before, a float here was a TypeError
        assert remote._ahead_by_dataset(ahead) == {}
        _assert_same(collate(remote.__getitems__(batch)), collate(local.__getitems__([0, 5, 9])))
    with pytest.raises(TypeError, match="0.5"):  # the batch that holds it says so
        remote.__getitems__([3, 0.5])


def test_gpu_loader_reads_a_remote_mixture_ahead_with_two_workers_as_the_local_one(robot_files, remote_robots,
                                                                                  s3_options, s3_server):
    """Before, GpuLoader read ahead only for a remote FrameDataset: a remote mixture's batches waited on the
    network. Now its batches (2 workers, shuffled) are those of the local mixture, within the request bounds."""
    local = _mixture(robot_files)
    remote = _mixture(remote_robots, storage_options=s3_options)
    options = {"batch_size": 8, "device": "cpu", "decode": "cpu", "image_format": "uint8", "shuffle": True}
    s3_server.counts.reset()
    loader = GpuLoader(remote, num_workers=2, generator=torch.Generator().manual_seed(5), **options)
    assert isinstance(loader.loader.batch_sampler, ReadAheadSampler)
    got = list(loader)
    requests, sent = s3_server.counts.total()
    want = list(GpuLoader(local, num_workers=0, generator=torch.Generator().manual_seed(5), **options))
    assert not isinstance(GpuLoader(local, **options).loader.batch_sampler, ReadAheadSampler)
    assert len(got) == len(want) == -(-len(local) // 8)
    for mine, theirs in zip(got, want):
        _assert_same(mine, theirs)
    files = [path for paths in robot_files.values() for path in paths]
    episodes = sum(episodes * shards for shards, episodes, _ in ROBOTS.values())
    # Each worker reads a shard's start once (the mixture's listing process too) and each episode's sections
    # once, in one request each, ahead or not.
    assert sent <= 3 * sum(path.stat().st_size for path in files), sent
    assert requests <= 3 * len(files) * 3 + 2 * episodes + 4, requests


def test_the_remote_datasets_of_a_mixture_read_ahead_side_by_side(robot_files, remote_robots, s3_options, s3_server,
                                                                   fetches_meet):
    """Before, one thread per process read ahead, so a mixture of N remote robots waited N round trips for its
    next batch. Each set's fetch now meets the other's at a barrier: one waiting for the other would break it."""
    fetched = fetches_meet("arrayio-kdb-read-ahead")
    remote = _mixture(remote_robots, storage_options=s3_options)
    local = _mixture(robot_files)
    sources, inner = remote.plan()
    # Frames of each set's first episode: one shard a set, fetched on the read-ahead thread itself.
    following = [item for number in (0, 1) for item in np.flatnonzero((sources == number) & (inner < FRAMES))[:3]]
    batch = ReadAheadBatch([int(np.flatnonzero(sources == 0)[0])])
    batch.ahead = following
    remote.__getitems__(batch)
    for dataset in remote.datasets:
        dataset.shards.wait_read_ahead()
    assert sorted(fetched) == [0, 1]  # both sets' read-aheads reached the barrier together
    _assert_same(collate(remote.__getitems__(following)), collate(local.__getitems__(following)))


def test_a_batch_of_two_remote_robots_fetches_both_at_once(robot_files, remote_robots, s3_options, s3_server,
                                                           fetches_meet):
    """Before, a mixture's batch fetched its datasets' sections one dataset after another: a batch of N remote
    robots waited N round trips. Both fetches now meet at a barrier, which one waiting for the other breaks."""
    remote = _mixture(remote_robots, storage_options=s3_options)
    local = _mixture(robot_files)
    sources, inner = remote.plan()
    both = [item for number in (0, 1) for item in np.flatnonzero((sources == number) & (inner < FRAMES))[:3]]
    for dataset in remote.datasets:
        for shard in range(len(dataset.shards.sources)):
            assert len(dataset.shards.file(shard).index)
    fetched = fetches_meet()
    got = collate(remote.__getitems__(both))
    assert sorted(fetched) == [0, 1]
    _assert_same(got, collate(local.__getitems__(both)))


def test_gpu_loader_over_remote_robots_that_cannot_share_a_batch_on_one_rank_of_two(robot_files, remote_robots,
                                                                                    s3_options, s3_put, tmp_path):
    """Everything at once: robots with other cameras (fetched dataset by dataset), batches of one robot each
    dealt to rank 1 of 2, 2 workers reading two batches ahead over moto: the batches the local files give."""
    arm = next(iter(ROBOTS))
    gripper = tmp_path / "gripper.kdb"
    with kdb.Writer(gripper, compress="jpeg") as writer:
        for episode in range(3):
            rng = np.random.default_rng([9, episode])
            writer.add_episode(rng.standard_normal((FRAMES, 3)).astype(np.float32), np.zeros((FRAMES, 2), np.float32),
                               images={"wrist": rng.integers(0, 255, (FRAMES, 32, 32, 3), np.uint8)})
    gripper_url = s3_put(f"{tmp_path.name}/gripper.kdb", gripper.read_bytes())

    def robots(arm_source, gripper_source, **options) -> MixtureDataset:
        return MixtureDataset([(FrameDataset(arm_source, image_format="uint8", **options), 0.5),
                               (FrameDataset(gripper_source, image_format="uint8", **options), 0.5)], seed=4)

    local = robots(robot_files[arm], gripper)
    remote = robots(remote_robots[arm], gripper_url, storage_options=s3_options)
    sampler = remote.batch_sampler(6, num_replicas=2, rank=1)
    loader = GpuLoader(remote, batch_sampler=sampler, num_workers=2, device="cpu", decode="cpu", image_format="uint8")
    assert isinstance(loader.loader.batch_sampler, ReadAheadSampler) and loader.loader.batch_sampler.batches_ahead == 2
    got = list(loader)
    dealt = local.batch_sampler(6, num_replicas=2, rank=1).batches()
    assert len(got) == len(dealt) == len(sampler)
    for batch, items in zip(got, dealt):
        want = collate(local.__getitems__(items))
        assert set(batch) == set(want)
        for key in want:
            assert torch.equal(batch[key], want[key]) if isinstance(want[key], torch.Tensor) else \
                batch[key] == want[key], key
