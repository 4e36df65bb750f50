"""Training at scale: shards as one dataset, delta_timestamps windows, batch fetching, packed bytes
and decode_batch, mixtures under workers and rank sharding."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest
from kdb_cases import gradient_frames

torch = pytest.importorskip("torch")

from arrayio import kdb
from arrayio.robot.torch import (
    EpisodeDataset,
    FrameDataset,
    MixtureDataset,
    collate,
    decode_batch,
)


def write_shard(path, episodes, frames, fps=10.0, shift=0, compress="jpeg"):
    """A one-camera shard whose states encode (shard shift, episode, frame) so items can be recognised."""
    with kdb.Writer(path, compress=compress) as writer:
        for episode in range(episodes):
            count = frames + episode
            marks = np.stack([np.full(count, shift), np.full(count, episode), np.arange(count)], 1)
            writer.add_episode(marks.astype(np.float32), -marks[:, :2].astype(np.float32),
                               images={"front": gradient_frames(count, 16, 24, shift=shift + 9 * episode)},
                               task=f"task {shift}", fps=fps)
    return path


@pytest.fixture
def shards(tmp_path):
    folder = tmp_path / "shards"
    folder.mkdir()
    return [write_shard(folder / f"part-{n}.kdb", episodes=2, frames=4 + n, shift=100 * n) for n in range(3)]


def test_glob_list_and_folder_are_one_dataset(shards, tmp_path):
    by_glob = FrameDataset(str(shards[0].parent / "part-*.kdb"), image_format="uint8")
    by_list = FrameDataset([str(path) for path in reversed(shards)])
    by_folder = FrameDataset(shards[0].parent)
    lengths = [sum(4 + n + e for e in range(2)) for n in range(3)]
    assert len(by_glob) == len(by_folder) == len(by_list) == sum(lengths)
    with kdb.open(shards[1]) as f:
        item = by_glob[lengths[0] + 5]  # shard 1: episode 0 has 5 frames, so episode 1 frame 0
        assert (int(item["shard"]), int(item["episode"]), int(item["frame"])) == (1, 1, 0)
        np.testing.assert_array_equal(item["state"].numpy(), f.read_episode(1).states[0])
        np.testing.assert_array_equal(item["image.front"].numpy(), f.read_frame(1, 0).images["front"].transpose(2, 0, 1))
    assert by_list[0]["state"].tolist() == [200, 0, 0]  # the list order is kept
    assert int(by_glob[-1]["index"]) == len(by_glob) - 1
    with pytest.raises(IndexError, match="outside"):
        by_glob[len(by_glob)]
    with pytest.raises(FileNotFoundError, match="no file matches"):
        FrameDataset(str(tmp_path / "nothing-*.kdb"))
    episodes = EpisodeDataset(str(shards[0].parent / "*.kdb"), image_format="uint8")
    assert len(episodes) == 6 and episodes[3]["shard"] == 1 and episodes[3]["states"].shape == (6, 3)


def test_shards_open_lazily_per_worker(shards):
    dataset = FrameDataset(shards, horizon=2)
    clone = pickle.loads(pickle.dumps(dataset))
    assert clone.shards._files == {}
    clone[len(clone) - 1]
    assert list(clone.shards._files) == [2]  # only the shard touched is opened
    loader = torch.utils.data.DataLoader(dataset, batch_size=5, num_workers=2, shuffle=True,
                                         generator=torch.Generator().manual_seed(1))
    seen = [int(index) for batch in loader for index in batch["index"]]
    assert sorted(seen) == list(range(len(dataset)))


def test_delta_timestamps_windows_and_pads(shards):
    deltas = {"state": [-0.2, -0.1, 0.0], "action": [0.0, 0.1, 0.2, 0.3], "image.front": [-0.1, 0.0]}
    dataset = FrameDataset(shards[0], delta_timestamps=deltas, image_format="uint8")
    item = dataset[1]  # episode 0 (4 frames), frame 1
    assert item["state"][:, 2].tolist() == [0, 0, 1] and item["state_is_pad"].tolist() == [True, False, False]
    assert item["action_is_pad"].tolist() == [False, False, False, True]
    assert item["action"][:, 1].tolist() == [0, 0, 0, 0] and item["action"].shape == (4, 2)
    assert item["image.front"].shape == (2, 3, 16, 24) and item["image.front_is_pad"].tolist() == [False, False]
    with kdb.open(shards[0]) as f:
        np.testing.assert_array_equal(item["image.front"][0].numpy(), f.read_frame(0, 0).images["front"].transpose(2, 0, 1))
    assert item["reward"].shape == () and "reward_is_pad" not in item
    last = dataset[3]
    assert last["action_is_pad"].tolist() == [False, True, True, True]
    np.testing.assert_array_equal(last["state"][:, 2].numpy(), [1, 2, 3])


def test_delta_timestamps_use_each_episodes_fps_and_check_the_grid(tmp_path):
    slow = write_shard(tmp_path / "slow.kdb", 1, 6, fps=5.0)
    fast = write_shard(tmp_path / "fast.kdb", 1, 6, fps=10.0, shift=1)
    dataset = FrameDataset([slow, fast], delta_timestamps={"state": [-0.2, 0.0]}, cameras=[])
    assert dataset[3]["state"][:, 2].tolist() == [2, 3]  # 5 fps: 0.2 s is one frame
    assert dataset[6 + 3]["state"][:, 2].tolist() == [1, 3]  # 10 fps: two frames
    with pytest.raises(ValueError, match=r"0.15 s is not a multiple of 1/fps = 0.2 s"):
        FrameDataset([slow, fast], delta_timestamps={"action": [0.0, 0.15]})
    assert FrameDataset(fast, delta_timestamps={"action": [0.0, 0.10004]}, cameras=[])[0]["action"].shape == (2, 2)
    with pytest.raises(ValueError, match="not item keys"):
        FrameDataset(fast, delta_timestamps={"observation.velocity": [0.0]})
    with pytest.raises(ValueError, match="not both"):
        FrameDataset(fast, delta_timestamps={"action": [0.0]}, horizon=4)


def test_getitems_matches_getitem_and_groups_by_episode(shards):
    dataset = FrameDataset(shards, history=1, horizon=3, image_format="uint8")
    items = [7, 0, 8, 7, 20, 3]
    batch = collate(dataset.__getitems__(items))
    for row, item in enumerate(items):
        single = dataset[item]
        for key, value in single.items():
            assert torch.equal(batch[key][row], value), key
    loader = torch.utils.data.DataLoader(dataset, batch_size=4, collate_fn=collate)
    first = next(iter(loader))
    assert first["image.front"].shape == (4, 3, 16, 24) and first["action"].shape == (4, 3, 2)


def test_packed_bytes_and_decode_batch_on_cpu(shards):
    decoded = FrameDataset(shards, image_format="uint8", delta_timestamps={"image.front": [-0.1, 0.0]})
    packed = FrameDataset(shards, decode="none", delta_timestamps={"image.front": [-0.1, 0.0]})
    items = [0, 5, 9, 2, 17]
    batch = collate(packed.__getitems__(items))
    data, offsets, sizes = batch["image.front"], batch["image.front_offsets"], batch["image.front_sizes"]
    assert data.dtype == torch.uint8 and data.dim() == 1  # one tensor for the whole batch
    assert offsets.tolist()[0] == 0 and len(offsets) == 2 * len(items) + 1 and offsets[-1] == len(data)
    assert sizes.shape == (5, 2, 4) and sizes[0, 0].tolist() == [16, 24, 3, 1]
    first = data[offsets[0]:offsets[1]].numpy().tobytes()
    with kdb.open(shards[0]) as f:
        assert first == bytes(f.read_episode(0).images.raw(0, "front"))
    reference = collate(decoded.__getitems__(items))
    out = decode_batch(batch, device="cpu")
    assert set(out) == set(reference)
    assert torch.equal(out["image.front"], reference["image.front"]) and out["image.front"].shape == (5, 2, 3, 16, 24)
    assert torch.equal(out["state"], reference["state"])
    floats = decode_batch(batch, image_format="float")
    assert floats["image.front"].dtype == torch.float32 and float(floats["image.front"].max()) <= 1.0
    single = packed[5]
    assert isinstance(single["image.front"], list) and single["image.front"][1].startswith(b"\xff\xd8\xff")


def test_packed_bytes_through_dataloader_workers(shards):
    dataset = FrameDataset(shards, decode="none")
    loader = torch.utils.data.DataLoader(dataset, batch_size=6, num_workers=2, collate_fn=collate)
    reference = FrameDataset(shards, image_format="uint8")
    for number, batch in enumerate(loader):
        out = decode_batch(batch)
        want = collate(reference.__getitems__(list(range(number * 6, min(len(dataset), number * 6 + 6)))))
        assert torch.equal(out["image.front"], want["image.front"])
    with pytest.raises(ValueError, match="collate_fn"):  # default collation gives lists of bytes
        decode_batch(next(iter(torch.utils.data.DataLoader(dataset, batch_size=2))))


def test_decode_batch_png_raw_and_cuda_errors(tmp_path):
    png = write_shard(tmp_path / "png.kdb", 1, 3, compress="png")
    raw = write_shard(tmp_path / "raw.kdb", 1, 3, compress=None)
    for path in (png, raw):
        batch = collate(FrameDataset(path, decode="none").__getitems__([0, 1, 2]))
        want = collate(FrameDataset(path, image_format="uint8").__getitems__([0, 1, 2]))
        assert torch.equal(decode_batch(batch)["image.front"], want["image.front"])
        if not torch.cuda.is_available():
            with pytest.raises(ValueError, match="CUDA is not available.*fallback=True"):
                decode_batch(batch, device="cuda")
        else:
            with pytest.raises(ValueError, match="not a JPEG"):
                decode_batch(batch, device="cuda")
    batch = collate(FrameDataset(png, decode="none").__getitems__([0]))
    if not torch.cuda.is_available():
        out = decode_batch(batch, device="cuda", fallback=True)  # no CUDA here: the CPU path
        assert out["image.front"].shape == (1, 3, 16, 24) and out["image.front"].device.type == "cpu"


def _cuda_and_torchvision() -> str | None:
    if not torch.cuda.is_available():
        return "needs a CUDA GPU"
    try:
        import torchvision.io  # noqa: F401
    except Exception as error:  # noqa: BLE001
        return f"needs torchvision built for this torch ({error})"
    return None


@pytest.mark.skipif(_cuda_and_torchvision() is not None, reason=str(_cuda_and_torchvision()))
def test_decode_batch_on_cuda_matches_cpu(shards):
    batch = collate(FrameDataset(shards, decode="cuda").__getitems__(list(range(12))))
    gpu = decode_batch(batch, device="cuda")
    cpu = decode_batch(batch, device="cpu")
    assert gpu["image.front"].device.type == "cuda" and gpu["image.front"].shape == cpu["image.front"].shape
    difference = (gpu["image.front"].cpu().int() - cpu["image.front"].int()).abs()
    assert float(difference.float().mean()) < 2.0  # nvJPEG and libjpeg-turbo round differently
    assert gpu["state"].device.type == "cuda"


def test_mixture_is_deterministic_and_proportional(shards):
    datasets = [(FrameDataset(path, cameras=[]), weight) for path, weight in zip(shards, (0.5, 0.3, 0.2))]
    mixture = MixtureDataset(datasets, seed=3, num_samples=10_000)
    sources, inner = mixture.plan()
    assert np.bincount(sources).tolist() == [5000, 3000, 2000]
    again = MixtureDataset(datasets, seed=3, num_samples=10_000)
    assert np.array_equal(again.plan()[0], sources) and np.array_equal(again.plan()[1], inner)
    assert not np.array_equal(MixtureDataset(datasets, seed=4, num_samples=10_000).plan()[0], sources)
    mixture.set_epoch(1)
    assert not np.array_equal(mixture.plan()[0], sources)
    mixture.set_epoch(0)
    item = mixture[17]
    number, within = int(sources[17]), int(inner[17])
    assert int(item["dataset"]) == number and item["state"][0] == 100 * number
    assert torch.equal(item["state"], datasets[number][0][within]["state"])
    batch = collate(mixture.__getitems__(list(range(40))))
    assert batch["dataset"].tolist() == sources[:40].tolist()
    assert batch["state"][:, 0].tolist() == (100 * sources[:40]).tolist()


def test_mixture_under_workers_and_rank_sharding(shards):
    datasets = [(FrameDataset(path, horizon=2, image_format="uint8"), weight)
                for path, weight in zip(shards, (0.5, 0.3, 0.2))]
    mixture = MixtureDataset(datasets, seed=11, num_samples=200)
    sources = mixture.plan()[0]
    seen = {}
    for rank in range(2):
        sampler = torch.utils.data.DistributedSampler(mixture, num_replicas=2, rank=rank, shuffle=True, seed=5)
        loader = torch.utils.data.DataLoader(mixture, batch_size=16, sampler=sampler, num_workers=2, collate_fn=collate)
        order = list(sampler)
        got = torch.cat([batch["dataset"] for batch in loader]).tolist()
        assert got == sources[order].tolist()  # every worker and rank agrees on the mixture
        for batch in loader:
            assert batch["image.front"].shape[1:] == (3, 16, 24)
            assert (batch["state"][:, 0] == 100 * batch["dataset"]).all()
            break
        seen[rank] = set(order)
    assert not seen[0] & seen[1] and len(seen[0] | seen[1]) == 200


def test_mixture_of_packed_datasets_keeps_items_in_place(shards):
    datasets = [(FrameDataset(path, decode="none"), 1.0) for path in shards]
    mixture = MixtureDataset(datasets, seed=2, num_samples=30)
    batch = collate(mixture.__getitems__(list(range(30))))
    assert mixture._one_kind is True  # same options: fetched straight into one batch
    out = decode_batch(batch)
    for row in (0, 7, 29):
        item = mixture[row]
        single = decode_batch(collate(datasets[int(item["dataset"])][0].__getitems__([int(item["index"])])))
        assert torch.equal(out["image.front"][row], single["image.front"][0])
    with pytest.raises(ValueError, match="weights"):
        MixtureDataset([(datasets[0][0], -1.0)])


def test_image_tables_are_parsed_once_and_bounded(shards, monkeypatch):
    from arrayio.kdb import _batch_reads
    from arrayio.robot import _shards

    parsed = []
    walk = _batch_reads._section_records

    def counted(section, frames, base, names):
        parsed.extend((id(names), base, frame) for frame in range(frames))  # every frame of the episode walked
        return walk(section, frames, base, names)

    monkeypatch.setattr(_batch_reads, "_section_records", counted)
    dataset = FrameDataset(shards, image_format="uint8")
    parsed.clear()
    reference = [dataset[item]["image.front"] for item in range(len(dataset))]
    assert len(parsed) == len(dataset) == len(set(parsed))  # every frame's records walked once
    assert (dataset.shards._images.start >= 0).sum() == 6  # one row block per episode touched
    dataset[1]
    assert len(parsed) == len(dataset)  # not parsed again
    monkeypatch.setattr(_shards, "IMAGE_TABLE_BUDGET", 12)
    monkeypatch.setattr(_shards, "STEP_ROWS_BUDGET", 12)
    small = FrameDataset(shards, image_format="uint8")
    for item in range(len(small) - 1, -1, -1):
        assert torch.equal(small[item]["image.front"], reference[item])
        assert small.shards._images.used <= 12 and small.shards._steps.used <= 12
    batch = collate(small.__getitems__(list(range(len(small)))[::-1]))  # one batch may pass the budget
    for item, image in enumerate(reference):
        assert torch.equal(batch["image.front"][len(small) - 1 - item], image)


class _Plain(torch.utils.data.Dataset):
    """A dataset of someone else's: items only, no batch fetching."""

    def __init__(self, inner):
        self.inner = inner

    def __len__(self):
        return len(self.inner)

    def __getitem__(self, item):
        return self.inner[item]


@pytest.mark.parametrize("decode", ["cpu", "none"])
def test_mixture_of_different_datasets_merges_in_item_order(shards, decode):
    kind = {"decode": decode, "image_format": "uint8"}
    first = FrameDataset(shards[0], **kind)
    second = FrameDataset(shards[1], **kind)
    other = _Plain(FrameDataset(shards[2], **kind)) if decode == "cpu" else FrameDataset(shards[2], decode="none")
    mixture = MixtureDataset([(first, 1.0), (second, 1.0), (other, 1.0)], seed=5, num_samples=24)
    assert mixture._one_kind is None
    batch = collate(mixture.__getitems__(list(range(24))))
    assert mixture._one_kind is False  # the generic path: per-dataset batches merged back
    images = decode_batch(batch)["image.front"] if decode == "none" else batch["image.front"]
    sources, inner = mixture.plan()
    children = [first, second, other]
    for row in range(24):
        child = children[int(sources[row])]
        item = child[int(inner[row])]
        assert int(batch["dataset"][row]) == int(sources[row])
        assert torch.equal(batch["state"][row], item["state"])
        want = item["image.front"] if decode == "cpu" else decode_batch(
            collate(children[int(sources[row])].__getitems__([int(inner[row])])))["image.front"][0]
        assert torch.equal(images[row], want)


def test_batch_arrays_are_reused_only_when_no_tensor_of_their_batch_is_left(shards):
    dataset = FrameDataset(shards, image_format="uint8")
    items = list(range(len(dataset)))
    expected = collate(dataset.__getitems__(items))["image.front"].clone()
    kept = collate(dataset.__getitems__(items))["image.front"]
    view = kept[3:5]  # a view keeps its batch's array too
    del kept
    other = collate(dataset.__getitems__(items[::-1]))["image.front"]
    assert view.untyped_storage().data_ptr() != other.untyped_storage().data_ptr()
    assert torch.equal(view, expected[3:5])  # not overwritten by the later batch
    assert torch.equal(other, expected.flip(0))
    address = other.untyped_storage().data_ptr()
    del other
    again = collate(dataset.__getitems__(items))["image.front"]
    assert again.untyped_storage().data_ptr() == address  # let go, so handed out again, warm
    assert torch.equal(again, expected) and torch.equal(view, expected[3:5])


def write_embodiment(path, state_dim, action_dim, episodes=2, frames=5):
    """A shard of one embodiment: states hold (state_dim marker, frame) then ones, actions likewise."""
    with kdb.Writer(path) as writer:
        for episode in range(episodes):
            states = np.ones((frames, state_dim), np.float32)
            states[:, 0], states[:, 1] = state_dim, np.arange(frames)
            actions = np.full((frames, action_dim), -1, np.float32)
            actions[:, 0] = action_dim
            writer.add_episode(states, actions, images={"front": gradient_frames(frames, 16, 24, shift=episode)},
                               embodiment=f"arm{state_dim}", fps=10)
    return path


@pytest.mark.parametrize("decode", ["cpu", "none"])
def test_mixture_across_embodiments_pads_to_the_largest_with_dim_masks(tmp_path, decode):
    small = FrameDataset(write_embodiment(tmp_path / "small.kdb", 3, 2), history=1, horizon=2, decode=decode)
    large = FrameDataset(write_embodiment(tmp_path / "large.kdb", 7, 4), history=1, horizon=2, decode=decode)
    mixture = MixtureDataset([(small, 1.0), (large, 1.0)], seed=1, num_samples=16)
    batch = collate(mixture.__getitems__(list(range(16))))
    sources, inner = mixture.plan()
    assert batch["state"].shape == (16, 7) and batch["action"].shape == (16, 2, 4)
    assert batch["state_history"].shape == (16, 1, 7)
    for row in range(16):
        state_dim, action_dim = (3, 2) if sources[row] == 0 else (7, 4)
        assert batch["state_dim_mask"][row].tolist() == [True] * state_dim + [False] * (7 - state_dim)
        assert batch["action_dim_mask"][row].tolist() == [True] * action_dim + [False] * (4 - action_dim)
        assert batch["state_history_dim_mask"][row].sum() == state_dim
        item = (small, large)[sources[row]][int(inner[row])]
        assert torch.equal(batch["state"][row, :state_dim], item["state"])
        assert not batch["state"][row, state_dim:].any() and not batch["action"][row, :, action_dim:].any()
        assert torch.equal(batch["action"][row, :, :action_dim], item["action"])
    images = decode_batch(batch)["image.front"] if decode == "none" else batch["image.front"]
    assert images.shape[:2] == (16, 3)
    one = collate(mixture.__getitems__([int(np.flatnonzero(sources == 0)[0])]))  # one embodiment: same keys
    assert one["state"].shape == (1, 7) and "state_dim_mask" in one
    same = MixtureDataset([(small, 1.0), (small, 1.0)], num_samples=4)
    assert "state_dim_mask" not in collate(same.__getitems__([0, 1]))
    unpadded = MixtureDataset([(small, 1.0), (large, 1.0)], seed=1, num_samples=16, pad_dims=False)
    with pytest.raises(ValueError, match="one batch needs one shape"):
        unpadded.__getitems__(list(range(16)))


def write_camera(path, camera, height, width, episodes=2, frames=5):
    """Episodes of one camera at its own image size, states marking (episode, frame)."""
    with kdb.Writer(path) as writer:
        for episode in range(episodes):
            marks = np.stack([np.full(frames, episode), np.arange(frames)], 1).astype(np.float32)
            writer.add_episode(marks, marks[:, :1], images={camera: gradient_frames(frames, height, width,
                                                                                   shift=episode)})
    return path


@pytest.mark.parametrize("workers", [0, 2])
def test_a_batch_per_dataset_mixes_cameras_and_image_sizes_that_cannot_share_a_batch(tmp_path, workers):
    # Padding evens out state and action sizes, not images: robots with other cameras or image sizes could
    # not be mixed at all ("a batch needs one image size per camera").
    datasets = [FrameDataset(write_camera(tmp_path / "a.kdb", "front", 16, 24)),
                FrameDataset(write_camera(tmp_path / "b.kdb", "front", 32, 32, frames=7)),
                FrameDataset(write_camera(tmp_path / "c.kdb", "wrist", 8, 8))]
    mixture = MixtureDataset([(datasets[0], 0.5), (datasets[1], 0.3), (datasets[2], 0.2)], seed=3, num_samples=40)
    with pytest.raises(ValueError, match="one image size per camera|different keys"):
        mixture.__getitems__(list(range(40)))
    sampler = mixture.batch_sampler(6)
    loader = torch.utils.data.DataLoader(mixture, batch_sampler=sampler, num_workers=workers, collate_fn=collate)
    sources, inner = mixture.plan()
    seen, per_dataset = [], np.zeros(3, int)
    batches = list(loader)
    assert len(batches) == len(sampler) == sum(-(-count // 6) for count in mixture.counts().tolist())
    for batch, items in zip(batches, sampler.batches()):
        number = int(batch["dataset"][0])
        assert (batch["dataset"] == number).all() and (sources[items] == number).all()
        camera = "wrist" if number == 2 else "front"
        assert batch[f"image.{camera}"].shape[2:] == ((16, 24), (32, 32), (8, 8))[number]
        for row, item in enumerate(items):
            alone = datasets[number][int(inner[item])]
            assert torch.equal(batch["state"][row], alone["state"])
            assert torch.equal(batch[f"image.{camera}"][row], alone[f"image.{camera}"])
        seen.extend(items)
        per_dataset[number] += len(items)
    assert sorted(seen) == list(range(40)) and per_dataset.tolist() == mixture.counts().tolist()
    assert [int(b["dataset"][0]) for b in batches] != sorted(int(b["dataset"][0]) for b in batches)  # mixed order
    dropped = mixture.batch_sampler(6, drop_last=True)
    assert all(len(items) == 6 for items in dropped) and len(list(dropped)) == len(dropped)
    first_epoch = sampler.batches()
    mixture.set_epoch(1)  # a new draw, which the same sampler follows
    assert sampler.batches() != first_epoch and sorted(sum(sampler.batches(), [])) == list(range(40))
    with pytest.raises(ValueError, match="batch_size must be >= 1"):
        mixture.batch_sampler(0)


def _camera_files(folder) -> list:
    return [write_camera(folder / "a.kdb", "front", 16, 24), write_camera(folder / "c.kdb", "wrist", 8, 8, frames=7)]


def _camera_mixture(files) -> MixtureDataset:
    """Two robots whose items cannot share a batch (the _RANK script builds the same)."""
    return MixtureDataset([(FrameDataset(files[0]), 0.6), (FrameDataset(files[1]), 0.4)], seed=3, num_samples=39)


@pytest.mark.parametrize("drop_last", [False, True])
def test_a_batch_per_dataset_deals_its_batches_across_ranks(tmp_path, drop_last):
    # Before: BatchPerDataset gave every rank every batch, so DDP trained each rank on the same items.
    mixture = _camera_mixture(_camera_files(tmp_path))
    whole = mixture.batch_sampler(4, drop_last=drop_last).batches()
    ranks = [mixture.batch_sampler(4, drop_last=drop_last, num_replicas=3, rank=rank) for rank in range(3)]
    dealt = [sampler.batches() for sampler in ranks]
    assert len({len(batches) for batches in dealt}) == 1  # DDP needs as many steps on every rank
    assert [len(sampler) for sampler in ranks] == [len(batches) for batches in dealt]
    in_turn = (whole * 2)[:3 * len(dealt[0])]  # one order dealt in turn, its first batches again at its end
    assert all(rank_batches == in_turn[rank::3] for rank, rank_batches in enumerate(dealt))
    flat = [item for batches in dealt for batch in batches for item in batch]
    if drop_last:  # the last len(whole) % 3 batches left out, nothing dealt twice
        assert len(dealt[0]) == len(whole) // 3 and len(set(flat)) == len(flat)
    else:  # every item, and the first batches again to even the count
        assert len(dealt[0]) == -(-len(whole) // 3) and set(flat) == set(range(39))
        assert len(flat) - len(set(flat)) == sum(map(len, whole[:3 * len(dealt[0]) - len(whole)]))
    loader = torch.utils.data.DataLoader(mixture, batch_sampler=ranks[1], collate_fn=collate)
    assert [batch["index"].tolist() for batch in loader] == [
        mixture.__getitems__(items).batch["index"].tolist() for items in dealt[1]]
    ranks[1].set_epoch(2)  # as DistributedSampler.set_epoch: a new draw for the mixture and its samplers
    assert mixture.epoch == 2 and ranks[0].batches() != dealt[0]
    for bad, error in (({"num_replicas": 0}, ValueError), ({"num_replicas": 2, "rank": 2}, ValueError),
                       ({"rank": -1}, ValueError), ({"num_replicas": 2.0}, TypeError)):
        with pytest.raises(error, match="num_replicas|rank"):
            mixture.batch_sampler(4, **bad)


_RANK = """
import json, sys
import torch.distributed as dist
from arrayio.robot.torch import FrameDataset, MixtureDataset
dist.init_process_group("gloo", store=dist.FileStore(sys.argv[1], 2), rank=int(sys.argv[2]), world_size=2)
try:
    mixture = MixtureDataset([(FrameDataset(sys.argv[3]), 0.6), (FrameDataset(sys.argv[4]), 0.4)], seed=3,
                             num_samples=39)
    print(json.dumps(mixture.batch_sampler(4).batches()))
finally:
    dist.destroy_process_group()
"""


def test_a_batch_per_dataset_takes_its_rank_from_the_process_group(tmp_path):
    import subprocess
    import sys

    files = _camera_files(tmp_path)
    ranks = [subprocess.Popen([sys.executable, "-c", _RANK, str(tmp_path / "store"), str(rank), *map(str, files)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for rank in range(2)]
    answers = [process.communicate(timeout=120) for process in ranks]
    assert all(process.returncode == 0 for process in ranks), [err[-2000:] for _, err in answers]
    mixture = _camera_mixture(files)
    assert [json.loads(out) for out, _ in answers] == [
        mixture.batch_sampler(4, num_replicas=2, rank=rank).batches() for rank in range(2)]
    assert mixture.batch_sampler(4).batches()[0::2] == json.loads(answers[0][0])  # 0 and 2 and ... of one order


def test_mixture_items_must_be_integers_in_range(shards):
    # Before: a float item was truncated, and an empty batch ended in IndexError from the mixture's own code.
    mixture = MixtureDataset([(FrameDataset(shards), 1.0)], num_samples=8)
    with pytest.raises(TypeError, match="a mixture item index must be an integer, got 1.5"):
        mixture.__getitems__([0, 1.5])
    with pytest.raises(ValueError, match=r"at least one index \(a mixture item\)"):
        mixture.__getitems__([])
    with pytest.raises(IndexError, match="outside 0..7"):
        mixture.__getitems__([8])
    assert int(mixture[-1]["index"]) == int(mixture[7]["index"])


def first_batch_of_each_epoch(mixture, loader, epochs: int) -> list[list[int]]:
    """The global frame numbers of ``loader``'s first batch after ``mixture.set_epoch(e)``, e = 0, 1, ...,
    each checked to be the mixture's plan for that epoch (the loader's batch holds all its items)."""
    drawn = []
    for epoch in range(epochs):
        mixture.set_epoch(epoch)
        drawn.append(next(iter(loader))["index"].tolist())
        sources, inner = mixture.plan()
        assert drawn[-1] == [int(mixture.datasets[source][int(item)]["index"]) for source, item in zip(sources, inner)]
    return drawn


def test_set_epoch_reaches_workers_kept_across_epochs(shards):
    # Before: with persistent_workers=True the workers kept the mixture they were started with, so every
    # epoch gave the first epoch's items while mixture.plan() in the main process said otherwise.
    mixture = MixtureDataset([(FrameDataset(shards[:1]), 1.0), (FrameDataset(shards[1:]), 1.0)], num_samples=12)
    loader = torch.utils.data.DataLoader(mixture, batch_size=12, num_workers=2, persistent_workers=True,
                                         collate_fn=collate)
    assert len({tuple(items) for items in first_batch_of_each_epoch(mixture, loader, 3)}) == 3
    assert pickle.loads(pickle.dumps(mixture)).plan()[1].tolist() == mixture.plan()[1].tolist()


def test_a_damaged_shard_among_many_is_named(shards, tmp_path):
    # Before: "kdb: episode index (2 entries of 64 bytes) at byte ...: expected 128 bytes ...", naming no file.
    from arrayio import FormatError
    from arrayio.robot import tools

    damaged = tmp_path / "damaged.kdb"
    damaged.write_bytes(shards[1].read_bytes()[:-200])
    for call in (lambda: FrameDataset([shards[0], damaged, shards[2]]), lambda: tools.stats([shards[0], damaged]),
                 lambda: tools.merge([shards[0], damaged], tmp_path / "merged.kdb")):
        with pytest.raises(FormatError, match=r"damaged\.kdb: kdb: "):
            call()
    assert not (tmp_path / "merged.kdb").exists()
    # And an image that no longer decodes, met mid-epoch: "image data at byte ..." named no file either.
    with kdb.open(shards[1]) as f:
        record = f.image_records(1, 2)[0]
    spoiled = bytearray(shards[1].read_bytes())
    spoiled[record.offset + 20:record.offset + record.length - 2] = bytes(record.length - 22)
    broken = tmp_path / "broken.kdb"
    broken.write_bytes(spoiled)
    dataset = FrameDataset([shards[0], broken])
    with pytest.raises(FormatError, match=r"broken\.kdb: kdb: image data at byte"):
        dataset.__getitems__(list(range(len(dataset))))
    with pytest.raises(FormatError, match=r"broken\.kdb: kdb: episode 1 frame 2 camera 'front' image data"):
        EpisodeDataset([shards[0], broken])[3]  # shard 0 holds 2 episodes: this is the damaged one
    # An image record whose length runs past the file, met as its episode's records are first parsed.
    spoiled = bytearray(shards[1].read_bytes())
    spoiled[record.offset - 4:record.offset] = (2**31 - 1).to_bytes(4, "little")
    overlong = tmp_path / "overlong.kdb"
    overlong.write_bytes(spoiled)
    dataset = FrameDataset([shards[0], overlong])
    with pytest.raises(FormatError, match=r"overlong\.kdb: kdb: episode 1 frame 2 .* image data at byte"):
        dataset.__getitems__(list(range(len(dataset))))
