"""FrameDataset / EpisodeDataset: windows and pad masks at episode edges, and DataLoader workers."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from arrayio import kdb  # noqa: E402
from arrayio.robot.torch import EpisodeDataset, FrameDataset  # noqa: E402


def test_frame_dataset_windows_and_pads(sample):
    dataset = FrameDataset(sample, history=2, horizon=3)
    assert len(dataset) == 21 and dataset.cameras == ["front", "wrist"]
    with kdb.open(sample) as f:
        episode = f.read_episode(0)
        first = dataset[0]
        np.testing.assert_array_equal(first["state"].numpy(), episode.states[0])
        np.testing.assert_array_equal(first["action"].numpy(), episode.actions[0:3])
        assert first["state_history_is_pad"].tolist() == [True, True]
        np.testing.assert_array_equal(first["state_history"].numpy(), episode.states[[0, 0]])
        last = dataset[5]  # episode 0 has 6 frames
        assert last["action_is_pad"].tolist() == [False, True, True]
        np.testing.assert_array_equal(last["action"].numpy(), episode.actions[[5, 5, 5]])
        assert last["state_history_is_pad"].tolist() == [False, False]
        assert bool(last["terminal"]) and last["episode"] == 0 and last["frame"] == 5
        assert dataset[6]["episode"] == 1 and dataset[-1]["frame"] == 7
        image = first["image.front"]
        assert image.shape == (3, 16, 20) and image.dtype == torch.float32 and float(image.min()) >= 0
        reference = f.read_frame(0, 0).images["front"]
        np.testing.assert_allclose(image.numpy(), reference.transpose(2, 0, 1) / 255.0, atol=1e-6)


def test_frame_dataset_without_images_and_uint8(sample):
    assert "image.front" not in FrameDataset(sample, cameras=[])[3]
    assert FrameDataset(sample, cameras=["wrist"], image_format="uint8")[3]["image.wrist"].dtype == torch.uint8
    with pytest.raises(ValueError):
        FrameDataset(sample, horizon=0)


def test_pickles_by_path(sample):
    dataset = FrameDataset(sample)
    dataset[0]
    clone = pickle.loads(pickle.dumps(dataset))
    assert clone.shards._files == {}
    assert clone[4]["frame"] == 4


def test_dataloader_with_two_workers(sample):
    loader = torch.utils.data.DataLoader(FrameDataset(sample, horizon=2), batch_size=4, num_workers=2,
                                         shuffle=True, generator=torch.Generator().manual_seed(0))
    seen = []
    for batch in loader:
        assert batch["action"].shape[1:] == (2, 2) and batch["image.wrist"].shape[1:] == (3, 16, 20)
        assert batch["terminal"].dtype == torch.bool and batch["reward"].dtype == torch.float32
        seen.extend((batch["episode"] * 100 + batch["frame"]).tolist())
    assert sorted(seen) == sorted(e * 100 + t for e, n in enumerate([6, 7, 8]) for t in range(n))


def test_episode_dataset(sample):
    dataset = EpisodeDataset(sample, image_format="uint8")
    assert len(dataset) == 3
    item = dataset[2]
    assert item["states"].shape == (8, 3) and item["image.front"].shape == (8, 3, 16, 20)
    assert item["terminals"].tolist()[-1] is True and item["task"] == "task 2"
    loader = torch.utils.data.DataLoader(dataset, batch_size=1, num_workers=2)
    assert [batch["actions"].shape[1] for batch in loader] == [6, 7, 8]


def test_default_collation_hands_a_fetched_batch_over_without_restacking(sample):
    dataset = FrameDataset(sample)
    loader = torch.utils.data.DataLoader(dataset, batch_size=4)  # default_collate
    batch = next(iter(loader))
    from arrayio.robot.torch import collate

    want = collate(dataset.__getitems__([0, 1, 2, 3]))
    assert set(batch) == set(want)
    for key in want:
        assert torch.equal(batch[key], want[key]), key
    image = batch["image.front"]
    assert image.shape == (4, 3, 16, 20) and image.stride()[1] == 1  # channels-last as fetched: not re-stacked
    packed = next(iter(torch.utils.data.DataLoader(FrameDataset(sample, decode="none"), batch_size=2)))
    assert isinstance(packed["image.front"], list) and packed["image.front"][0].startswith(b"\xff\xd8")


@pytest.mark.parametrize("compress", ["jpeg", "png", None])
def test_float_images_are_the_uint8_pixels_scaled_in_items_batches_and_workers(tmp_path, compress):
    """Float images are converted one image at a time into the batch (raw records without a decode):
    the same values as uint8 / 255, with repeated frames of a window copied, and in DataLoader workers
    made in shared memory (nothing copied again on the way to the main process)."""
    from kdb_cases import shared_block_of, write_sample

    path = write_sample(tmp_path / "images.kdb", compress=compress)
    windows = {"image.front": [-0.4, -0.2, 0.0], "image.wrist": [0.0]}
    floats = FrameDataset(path, delta_timestamps=windows)
    uint8 = FrameDataset(path, delta_timestamps=windows, image_format="uint8")
    from arrayio.robot.torch import collate

    def scaled(tensor):
        return tensor.numpy().astype(np.float32) * np.float32(1 / 255)

    for item in (0, 1, 7, len(floats) - 1):
        for camera in ("image.front", "image.wrist"):
            got, want = floats[item][camera], uint8[item][camera]
            assert got.dtype == torch.float32 and got.shape == want.shape
            np.testing.assert_array_equal(got.numpy(), scaled(want))
    items = [0, 0, 1, 8, 20]  # windows at the episode start repeat frame 0
    batch, want = collate(floats.__getitems__(items)), collate(uint8.__getitems__(items))
    assert batch["image.front_is_pad"][0].tolist() == [True, True, False]
    np.testing.assert_array_equal(batch["image.front"].numpy(), scaled(want["image.front"]))
    loader = torch.utils.data.DataLoader(floats, batch_size=5, num_workers=2)
    for number, fetched in enumerate(loader):
        assert shared_block_of(fetched["image.front"]) is not None
        expected = collate(uint8.__getitems__(list(range(5 * number, min(5 * number + 5, len(floats))))))
        np.testing.assert_array_equal(fetched["image.wrist"].numpy(), scaled(expected["image.wrist"]))


def test_to_float_gives_every_pixel_value_times_the_scale_bit_for_bit():
    """The two-pass conversion (cast, then scale in place) makes the floats of the one mixed-type pass."""
    from arrayio.robot.torch_batch import SCALE, to_float

    pixels = np.arange(256, dtype=np.uint8).repeat(3).reshape(16, 16, 3)
    out = np.full(pixels.shape, np.nan, np.float32)
    to_float(pixels, out)
    want = np.multiply(pixels, SCALE, dtype=np.float32)
    assert out.view(np.uint32).tolist() == want.view(np.uint32).tolist()
    assert out[0, 0, 0] == 0 and out[-1, -1, -1] == 1


@pytest.mark.parametrize("reuse", [True, False])
def test_workers_reuse_the_shared_memory_of_released_batches_and_never_of_held_ones(tmp_path, reuse):
    """reuse_shared_memory=True: a worker decodes into the shared block of a batch the main process has let go
    of (the same block comes back: its inode repeats), while every batch still held, as a tensor, an array
    or a detached view, keeps its own frames."""
    from kdb_cases import shared_block_of, write_sample

    from arrayio.robot.torch import collate

    path = write_sample(tmp_path / "long.kdb", episodes=3, frames=20)
    reference = FrameDataset(path)
    loader = torch.utils.data.DataLoader(FrameDataset(path, reuse_shared_memory=reuse), batch_size=4, num_workers=2)
    held, blocks = [], []
    for number, batch in enumerate(loader):
        image = batch["image.front"]
        assert type(image) is torch.Tensor
        blocks.append(shared_block_of(image))
        assert blocks[-1] is not None
        if number % 4 == 1:
            held.append((number, image.numpy(), image.detach()[1], batch["image.wrist"]))
    for number, array, second, wrist in held:
        want = collate(reference.__getitems__(list(range(4 * number, min(4 * number + 4, len(reference))))))
        np.testing.assert_array_equal(array, want["image.front"].numpy())
        assert torch.equal(second, want["image.front"][1]) and torch.equal(wrist, want["image.wrist"])
    assert (len(set(blocks)) < len(blocks)) == reuse, blocks


def _sum_when_told(received, told, answers) -> None:
    """(A child process) take a tensor from ``received`` (or ``told`` as it was inherited), say so, wait,
    then answer the sum of its bytes."""
    image = received.get() if hasattr(received, "get") else received
    answers.put("got")
    told.wait(20)
    answers.put(int(image.to(torch.int64).sum()))


@pytest.mark.parametrize("how", ["queue", "fork"])
def test_a_batch_another_process_reads_is_never_reused(tmp_path, how):
    """With reuse_shared_memory, a batch sent to another process through a multiprocessing queue, or held
    while a process forks, maps the same shared block in that process: the worker must never decode into it
    once this process lets go (it did: the other process then read later frames)."""
    import multiprocessing

    from kdb_cases import write_sample

    path = write_sample(tmp_path / "long.kdb", episodes=3, frames=20)
    context = multiprocessing.get_context("fork")
    told, answers, queue = context.Event(), context.Queue(), context.Queue()
    dataset = FrameDataset(path, image_format="uint8", reuse_shared_memory=True)
    loader = torch.utils.data.DataLoader(dataset, batch_size=4, num_workers=2, persistent_workers=True)
    iterator = iter(loader)
    child = None
    if how == "queue":  # started before any batch exists: only the queue can hand it the block
        child = context.Process(target=_sum_when_told, args=(queue, told, answers))
        child.start()
    next(iterator)
    image = next(iterator)["image.front"]
    want = int(image.to(torch.int64).sum())
    if how == "queue":
        queue.put(image)
    else:
        child = context.Process(target=_sum_when_told, args=(image, told, answers))
        child.start()
    assert answers.get(timeout=20) == "got"
    del image
    for _ in iterator:  # the workers decode the remaining batches, into released blocks where they can
        pass
    told.set()
    try:
        assert answers.get(timeout=20) == want
    finally:
        child.join(10)


def test_a_worker_sends_the_small_tensors_inside_the_pickle_and_the_images_in_shared_memory(sample):
    """torch would give every small tensor of a batch (state, action, masks, indices) its own shared-memory
    block and file descriptor, about 3 ms of the main process per batch; they travel by value instead."""
    from kdb_cases import shared_block_of

    from arrayio.robot.torch import collate

    dataset = FrameDataset(sample, horizon=2)
    for collate_fn in (None, collate):  # default collation and ours
        loader = torch.utils.data.DataLoader(dataset, batch_size=4, num_workers=2, collate_fn=collate_fn)
        for number, batch in enumerate(loader):
            want = collate(dataset.__getitems__(list(range(4 * number, min(4 * number + 4, len(dataset))))))
            assert type(batch) is dict and list(batch) == list(want)
            assert shared_block_of(batch["image.front"]) is not None
            assert not any(shared_block_of(batch[key]) or batch[key].is_shared()
                           for key in ("state", "action", "action_is_pad", "terminal", "index"))
            for key, value in want.items():
                assert batch[key].dtype == value.dtype and torch.equal(batch[key], value), key


def test_a_reused_block_travels_without_a_file_descriptor(tmp_path, monkeypatch):
    """Each shared storage in a batch cost a file descriptor passed through the worker's resource sharer,
    about 0.35 ms of CPU in each process, and a batch sent two (its block and the block's flag): now a
    block's descriptor travels once, the first time, and the main process keeps its map."""
    from multiprocessing import resource_sharer

    from kdb_cases import shared_block_of, write_sample

    path = write_sample(tmp_path / "long.kdb", episodes=3, frames=20)
    detach, passed = resource_sharer.DupFd.detach, []
    monkeypatch.setattr(resource_sharer.DupFd, "detach", lambda self: passed.append(1) or detach(self))
    reference = FrameDataset(path)
    loader = torch.utils.data.DataLoader(FrameDataset(path), batch_size=4, num_workers=2, persistent_workers=True)
    blocks = []
    for _epoch in range(2):
        for number, batch in enumerate(loader):
            blocks += [shared_block_of(batch["image.front"]), shared_block_of(batch["image.wrist"])]
            want = reference.__getitems__(list(range(4 * number, min(4 * number + 4, len(reference)))))
            assert torch.equal(batch["image.front"], torch.stack([item["image.front"] for item in want]))
            del batch
    # Before: 2 descriptors for each of the 64 images (block and flag); now one for each of 14 blocks.
    assert len(blocks) == 4 * len(loader) and len(passed) == len(set(blocks)) <= 32, (len(passed), blocks)


def test_a_batch_in_a_block_this_process_never_mapped_is_refused_by_name():
    """A worker's batch read by a process other than the one its block's map went to cannot be rebuilt."""
    from arrayio.errors import UnsupportedError
    from arrayio.robot.torch_blocks import _watched

    with pytest.raises(UnsupportedError, match="never mapped"):
        _watched(12345, 1, None, 64, "uint8", (4,), (1,), 0)


def test_the_maps_of_blocks_of_ended_workers_are_dropped(tmp_path):
    """The main process keeps a map of each kept block (the memory its worker holds anyway) while that worker
    runs; once the worker has ended, the next worker's first block drops them."""
    from kdb_cases import write_sample

    from arrayio.robot import torch_blocks

    path = write_sample(tmp_path / "long.kdb", episodes=3, frames=20)
    first = torch.utils.data.DataLoader(FrameDataset(path), batch_size=4, num_workers=2)
    for _ in first:
        pass
    ended = {pid for pid, _map in torch_blocks._maps.values()}
    assert ended
    for _ in torch.utils.data.DataLoader(FrameDataset(path), batch_size=4, num_workers=2):
        pass
    pids = {pid for pid, _map in torch_blocks._maps.values()}
    assert pids and not pids & ended
