"""GpuLoader without a GPU: the device="cpu" path, the overlap scheduling against a fake device that
logs what the loader asks of it, and the rule decode="auto" chooses by."""

from __future__ import annotations

import contextlib
import logging
import threading
import time

import numpy as np
import pytest
from kdb_cases import write_sample
from test_kdb_training import _cuda_and_torchvision, first_batch_of_each_epoch, write_camera, write_shard

torch = pytest.importorskip("torch")

from arrayio.robot.torch import FrameDataset, MixtureDataset, collate, plan_decode  # noqa: E402
from arrayio.robot.torch_loader import GpuLoader, choose_decode, nvjpeg_images_per_second  # noqa: E402


@pytest.fixture
def shards(tmp_path):
    return [write_shard(tmp_path / f"part-{n}.kdb", episodes=2, frames=6 + n, shift=100 * n) for n in range(3)]


def reference(dataset, items, image_format="float"):
    """The batch of ``items`` as the dataset decodes it on the CPU."""
    return collate(dataset.with_decode("cpu", image_format).__getitems__(items))


class FakeEvent:
    def __init__(self, log, number):
        self.log, self.number = log, number

    def synchronize(self):
        self.log.append(("synchronize", self.number))


class FakeDevice:
    """A device with a side stream, events and page-locked memory as the loader sees them: every call is
    logged with the thread it came from; decode runs the CPU decoder."""

    def __init__(self, images_per_second=None):
        self.device = torch.device("cpu")
        self.copies = True
        self.log = []
        self.rate = images_per_second
        self.allocations = 0
        self.local = threading.local()
        self.recorded = 0
        self.decoded = threading.Condition()
        self.decodes = 0

    @contextlib.contextmanager
    def side_stream(self):
        self.local.side = True
        try:
            yield
        finally:
            self.local.side = False

    def record(self):
        event = FakeEvent(self.log, self.recorded)
        self.log.append(("record", self.recorded, getattr(self.local, "side", False)))
        self.recorded += 1
        return event

    def wait(self, event):
        self.log.append(("wait", event.number, threading.current_thread().name))

    def pinned(self, nbytes):
        self.allocations += 1
        return torch.empty(nbytes, dtype=torch.uint8)

    def plan(self, batch, image_format):
        self.log.append(("plan", len(batch["index"]), threading.current_thread().name))
        checked = plan_decode(batch, "cpu", image_format=image_format)

        def decode():
            assert getattr(self.local, "side", False)  # decode is issued on the side stream
            out = checked()
            with self.decoded:
                self.decodes += 1
                self.log.append(("decode", self.decodes - 1, threading.current_thread().name))
                self.decoded.notify_all()
            return out
        return decode

    def hand_over(self, batch):
        self.log.append(("hand_over", len(batch["index"])))

    def images_per_second(self, batch, image_format):
        self.log.append(("timed", len(batch["index"])))
        return self.rate

    def wait_for_decode(self, count, timeout=10.0):
        with self.decoded:
            return self.decoded.wait_for(lambda: self.decodes >= count, timeout)


def test_device_cpu_path_matches_the_dataset(shards):
    dataset = FrameDataset(shards)
    for decode in ("cpu", "gpu", "auto"):
        loader = GpuLoader(dataset, batch_size=5, device="cpu", decode=decode)
        assert loader.decode == ("gpu" if decode == "gpu" else "cpu")  # auto: no device decode on the CPU
        batches = list(loader)
        assert len(batches) == len(loader) == -(-len(dataset) // 5)
        for number, batch in enumerate(batches):
            want = reference(dataset, list(range(number * 5, min(len(dataset), number * 5 + 5))))
            assert torch.equal(batch["image.front"], want["image.front"]), decode
            assert torch.equal(batch["state"], want["state"])
        assert loader.stats.batches == len(batches) and loader.stats.frames == len(dataset)
    workers = GpuLoader(dataset, batch_size=7, num_workers=2, device="cpu", decode="gpu", image_format="uint8")
    got = torch.cat([batch["image.front"] for batch in workers])
    assert torch.equal(got, reference(dataset, list(range(len(dataset))), "uint8")["image.front"])


def test_the_next_batch_is_decoded_on_the_side_stream_while_the_consumer_holds_this_one(shards):
    device = FakeDevice(images_per_second=1e9)
    dataset = FrameDataset(shards)
    loader = GpuLoader(dataset, batch_size=3, device=device, decode="gpu", prefetch=1)
    assert loader.dataset.packs_images and loader.decode == "gpu"
    count = len(loader)
    seen = []
    for number, batch in enumerate(loader):
        # Batch n is in the consumer's hands: batch n + 1 gets decoded meanwhile (a serial loader never would).
        if number + 1 < count:
            assert device.wait_for_decode(number + 2), f"batch {number + 1} was not decoded during batch {number}"
        waits = [entry for entry in device.log if entry[0] == "wait"]
        assert waits[-1][1] == number and waits[-1][2] == threading.current_thread().name
        items = list(range(number * 3, min(len(dataset), number * 3 + 3)))
        assert torch.equal(batch["image.front"], reference(dataset, items)["image.front"])
        seen.append(number)
        time.sleep(0.01)  # the consumer's "training step"
    assert seen == list(range(count))
    records = [entry for entry in device.log if entry[0] == "record"]
    assert len(records) == count and all(side for _, _, side in records)  # recorded on the side stream
    decoders = {entry[2] for entry in device.log if entry[0] == "decode"}
    assert decoders == {"arrayio-gpu-loader"}  # decode issued from the issuing thread, not the consumer's
    planners = {entry[2] for entry in device.log if entry[0] == "plan"}
    assert planners == {"arrayio-gpu-loader-stage"}  # the checks of the next batch run beside the decode
    assert len([entry for entry in device.log if entry[0] == "hand_over"]) == count
    # Page-locked buffers: one set per slot (3), reused; a slot waits for its last copies first.
    keys = len(loader.dataset.__getitems__([0]).batch)
    assert device.allocations <= 3 * keys and count > 3
    assert ("synchronize", 0) in device.log
    stats = loader.stats
    assert stats.batches == count and stats.host_s > 0 and stats.pinned_bytes > 0
    assert set(stats.per_batch()) == {"fetch_s", "host_s", "issue_s", "decode_s", "starved_s", "wait_s"}
    assert stats.issue_s > 0 and stats.starved_s > 0


def test_workers_decode_uint8_and_the_device_makes_floats(shards):
    device = FakeDevice()
    dataset = FrameDataset(shards)
    loader = GpuLoader(dataset, batch_size=4, device=device, decode="cpu")
    assert loader.dataset.image_format == "uint8" and not loader.dataset.packs_images
    batch = next(iter(loader))
    want = reference(dataset, [0, 1, 2, 3])["image.front"]
    assert batch["image.front"].dtype == torch.float32 and torch.equal(batch["image.front"], want)


def test_a_copying_device_lets_workers_reuse_the_blocks_of_batches_it_has_copied(shards):
    # No host batch leaves a loader that copies into page-locked buffers, so its workers decode into the shared
    # blocks of batches already copied; every batch stays equal to the CPU decode. On the CPU device batches
    # are handed to the consumer as they are: the dataset's own choice stands.
    assert FrameDataset(shards).reuse_shared_memory  # the default: a block another process reads never goes back
    dataset = FrameDataset(shards, reuse_shared_memory=False)
    loader = GpuLoader(dataset, batch_size=3, num_workers=2, device=FakeDevice(), decode="cpu", prefetch=1)
    assert loader.dataset.reuse_shared_memory and not dataset.reuse_shared_memory
    for number, batch in enumerate(loader):
        items = list(range(number * 3, min(len(dataset), number * 3 + 3)))
        assert torch.equal(batch["image.front"], reference(dataset, items)["image.front"]), number
    assert not GpuLoader(dataset, batch_size=3, device="cpu", decode="cpu").dataset.reuse_shared_memory


def test_stopping_early_ends_the_staging_thread(shards):
    loader = GpuLoader(FrameDataset(shards), batch_size=2, device=FakeDevice(1e9), decode="gpu", prefetch=1)
    for _ in loader:
        break
    time.sleep(0.1)
    assert not [thread for thread in threading.enumerate() if thread.name.startswith("arrayio-gpu-loader")]


def test_errors_of_the_staging_thread_reach_the_consumer(tmp_path):
    path = write_shard(tmp_path / "one.kdb", episodes=1, frames=4)
    dataset = FrameDataset(path, cameras=["side"])  # no such camera: the fetch fails in the staging thread
    loader = GpuLoader(dataset, batch_size=2, device="cpu", decode="cpu")
    with pytest.raises(Exception, match="camera 'side'"):
        list(loader)


def test_auto_rule_follows_the_issue_table():
    """16 cores, batch 256, 2 cameras: 15 workers decode 96 px faster than nvJPEG; at 224 px the GPU wins,
    even where one core decodes fast: the workers' pixels reach the main process at about 3 GB/s."""
    one_core = {96: 1 / 10_000, 224: 1 / 2_500}  # frames/s of one core of this machine (benchmarks/kdb.py)
    for pixels, want in ((96, "cpu"), (224, "gpu")):
        choice = choose_decode(cpu_frame_s=one_core[pixels], packed_frame_s=1 / 20_000,
                               gpu_images_per_s=nvjpeg_images_per_second(pixels * pixels), cameras=2,
                               workers=15, cores=16, frame_bytes=2 * pixels * pixels * 3)
        assert choice.mode == want, choice
    per_worker = {96: 1 / 1_550, 224: 1 / 350}  # frames/s per worker from the table (23,300 and 5,300 / 15)
    assert choose_decode(cpu_frame_s=per_worker[224], packed_frame_s=1 / 20_000,
                         gpu_images_per_s=nvjpeg_images_per_second(224 * 224), cameras=2, workers=15,
                         cores=16).mode == "gpu"
    few = choose_decode(cpu_frame_s=per_worker[96], packed_frame_s=1 / 20_000,
                        gpu_images_per_s=nvjpeg_images_per_second(96 * 96), cameras=2, workers=4, cores=16)
    assert few.mode == "gpu"  # 4 workers make 6,200 frames/s; the device 18,700
    none = choose_decode(cpu_frame_s=1e-3, packed_frame_s=1e-4, gpu_images_per_s=None, cameras=2, workers=0, cores=2)
    assert none.mode == "cpu" and none.gpu_frames_per_s is None
    assert nvjpeg_images_per_second(96 * 96) == 37_400 and nvjpeg_images_per_second(10) == 37_400


def test_auto_measures_the_dataset_and_says_what_it_chose(shards, caplog):
    dataset = FrameDataset(shards)
    with caplog.at_level(logging.INFO, logger="arrayio.robot"):
        fast = GpuLoader(dataset, batch_size=4, device=FakeDevice(images_per_second=1e9), num_workers=1, cores=2)
        slow = GpuLoader(dataset, batch_size=4, device=FakeDevice(images_per_second=1.0), num_workers=1, cores=2)
    assert fast.decode == "gpu" and slow.decode == "cpu"
    assert "decode='gpu'" in repr(fast) and "gpu decode" in repr(fast) and "cpu decode" in repr(slow)
    assert fast.choice.cpu_frames_per_s > 0 and fast.choice.gpu_frames_per_s > fast.choice.cpu_frames_per_s
    assert [record for record in caplog.records if "gpu decode" in record.getMessage()]
    no_rate = FakeDevice()
    no_rate.device = torch.device("meta")  # a device that cannot time itself: the issue's nvJPEG figures
    assert GpuLoader(dataset, batch_size=4, device=no_rate, num_workers=0, cores=2).choice.gpu_frames_per_s
    assert np.isfinite(slow.choice.cpu_frames_per_s)
    timed = FakeDevice(images_per_second=1e9)
    for batch_size in (100, 7):
        GpuLoader(dataset, batch_size=batch_size, device=timed, num_workers=0, cores=2)
    assert timed.log == [("timed", len(dataset)), ("timed", 7)]  # the loader's batch, or the whole dataset
    with pytest.raises(ValueError, match="decode must be one of"):
        GpuLoader(dataset, device="cpu", decode="cuda")


@pytest.mark.skipif(_cuda_and_torchvision() is not None, reason=str(_cuda_and_torchvision()))
def test_on_cuda_the_loader_matches_the_cpu_decode(shards):
    dataset = FrameDataset(shards)
    for decode in ("gpu", "cpu", "auto"):
        loader = GpuLoader(dataset, batch_size=8, num_workers=1, device="cuda", decode=decode)
        for number, batch in enumerate(loader):
            assert batch["image.front"].device.type == "cuda" and batch["state"].device.type == "cuda"
            items = list(range(number * 8, min(len(dataset), number * 8 + 8)))
            want = reference(dataset, items)["image.front"]
            assert float((batch["image.front"].cpu() - want).abs().mean()) < 2 / 255  # nvJPEG rounds otherwise
        assert loader.stats.batches == len(loader) and loader.stats.pinned_bytes > 0


def test_every_camera_of_a_batch_decodes_in_one_call_and_keeps_its_shape(tmp_path):
    # Two cameras, one of them windowed by delta_timestamps: one nvJPEG call serves both on CUDA, and each
    # camera gets its own images back in its own shape, equal to the CPU decode.
    path = write_sample(tmp_path / "two.kdb")
    deltas = {"image.wrist": [-0.2, 0.0]}
    items = [0, 3, 5, 7, 12]
    packed = collate(FrameDataset(path, decode="none", delta_timestamps=deltas).__getitems__(items))
    want = collate(FrameDataset(path, delta_timestamps=deltas, image_format="float").__getitems__(items))
    devices = ["cpu"] + (["cuda"] if _cuda_and_torchvision() is None else [])
    for device in devices:
        got = plan_decode(packed, device, image_format="float")()
        for camera, shape in (("image.front", (5, 3, 16, 20)), ("image.wrist", (5, 2, 3, 16, 20))):
            assert tuple(got[camera].shape) == shape and got[camera].device.type == device
            difference = float((got[camera].cpu() - want[camera]).abs().mean())
            assert difference < (2 / 255 if device == "cuda" else 1e-7), (device, camera, difference)
    if "cuda" in devices:  # no image became a Python object: nvJPEG's hardware decoder ran, or the compiled call
        from arrayio.robot import _nvjpeg, _nvjpeg_hardware

        assert _nvjpeg_hardware.hardware_decoder(torch.device("cuda")) is not None or \
            _nvjpeg._COMPILED.get("function") is not None


def test_the_switch_interval_is_short_while_batches_are_issued_and_restored_after(shards):
    import sys

    before = sys.getswitchinterval()
    loader = GpuLoader(FrameDataset(shards), batch_size=4, device=FakeDevice(1e9), decode="gpu")
    during = [sys.getswitchinterval() for _ in loader]
    assert during and all(abs(value - loader.switch_interval_s) < 1e-6 for value in during)
    assert sys.getswitchinterval() == before
    for _ in loader:  # stopped early: restored as well
        break
    assert sys.getswitchinterval() == before
    kept = GpuLoader(FrameDataset(shards), batch_size=4, device="cpu", decode="cpu", switch_interval_s=None)
    assert all(sys.getswitchinterval() == before for _ in kept)


COMPILED_DECODE = """
import numpy as np, simplejpeg, torch
from arrayio.kdb._images import encode
from arrayio.robot import _nvjpeg

# torchvision's operator, by its schema, decoding on the CPU: what the compiled function is checked around
library = torch.library.Library("image", "DEF")
library.define("decode_jpegs_cuda(Tensor[] encoded_jpegs, int mode, Device device) -> Tensor[]")
library.impl("decode_jpegs_cuda", lambda pieces, mode, device: [torch.from_numpy(simplejpeg.decode_jpeg(
    piece.numpy().tobytes(), colorspace="GRAY" if mode == 1 else "RGB")).permute(2, 0, 1) for piece in pieces], "CPU")
compiled = _nvjpeg._compiled()
print("compiled", compiled is not None)
rng = np.random.default_rng(0)
pixels = [rng.integers(0, 255, (count, height, width, 3), np.uint8) for count, height, width in
          ((3, 8, 12), (4, 4, 4), (2, 8, 12), (0, 8, 12))]
encoded = [[encode(image, "jpeg", 95) for image in camera] for camera in pixels]
datas = [torch.from_numpy(np.frombuffer(b"".join(camera) or b"", np.uint8).copy()) for camera in encoded]
lengths = [[len(image) for image in camera] for camera in encoded]
stacks = compiled(datas, lengths, [[0, 2], [1], [3]], 3, torch.device("cpu"), None)
print("shapes", [tuple(stack.shape) for stack in stacks])
for stack, want in zip(stacks, (np.concatenate([pixels[0], pixels[2]]), pixels[1])):
    print("error", float(np.abs(stack.permute(0, 2, 3, 1).numpy().astype(float) - want).mean()))
scale = torch.tensor(np.float32(1 / 255))
floats = compiled(datas, lengths, [[0, 2], [1], [3]], 3, torch.device("cpu"), scale)
print("floats", [str(stack.dtype) for stack in floats],
      all(torch.equal(stack * scale, made) for stack, made in zip(stacks, floats)))
"""


def test_the_compiled_decode_cuts_decodes_and_stacks_each_group_of_cameras(tmp_path):
    """The TorchScript function the GPU decode runs (its logic, around a CPU stand-in for torchvision's
    operator, in a process that never imports torchvision: the real one runs in the CUDA tests): every
    camera's bytes cut at its lengths, one decode call, and each group of cameras stacked in order, an
    empty group as an empty tensor; with a scale, the same stacks made float32 by the CPU decode's factor."""
    import subprocess
    import sys

    pytest.importorskip("simplejpeg")
    script = tmp_path / "compiled.py"
    script.write_text(COMPILED_DECODE)
    outcome = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert outcome.returncode == 0, outcome.stderr
    lines = outcome.stdout.splitlines()
    assert lines[:2] == ["compiled True", "shapes [(5, 3, 8, 12), (4, 3, 4, 4), (0,)]"]
    assert all(float(line.split()[1]) < 8 for line in lines[2:4]) and len(lines) == 5  # JPEG at quality 95
    assert lines[4] == "floats ['torch.float32', 'torch.float32', 'torch.float32'] True"


@pytest.mark.parametrize("decode", ["cpu", "gpu"])
def test_a_mixture_under_the_loader_follows_set_epoch_and_batches_per_dataset(tmp_path, decode):
    # Before: GpuLoader loaded a copy of the mixture, so set_epoch on the user's mixture drew nothing new
    # (every epoch the same items); and a batch_sampler could not be given (batch_size went along with it).
    datasets = [FrameDataset(write_camera(tmp_path / "a.kdb", "front", 16, 24)),
                FrameDataset(write_camera(tmp_path / "b.kdb", "front", 32, 32))]
    mixture = MixtureDataset([(datasets[0], 1.0), (datasets[1], 1.0)], seed=0, num_samples=12)
    loader = GpuLoader(mixture, device="cpu", decode=decode, batch_sampler=mixture.batch_sampler(4), num_workers=1)
    assert loader.batch_size == 4 and "batch_size=4" in repr(loader)
    epochs = []
    for epoch in range(2):
        mixture.set_epoch(epoch)
        batches = list(loader)
        assert len(batches) == len(loader)
        sources, inner = mixture.plan()
        for batch, items in zip(batches, mixture.batch_sampler(4).batches()):
            number = int(batch["dataset"][0])
            assert batch["image.front"].shape[2:] == ((16, 24), (32, 32))[number]
            assert batch["state"].tolist() == [datasets[number][int(inner[item])]["state"].tolist() for item in items]
        epochs.append([batch["state"].tolist() for batch in batches])
    assert epochs[0] != epochs[1]


def test_set_epoch_on_the_mixture_reaches_the_loader(shards):
    # Before: every epoch of a GpuLoader over a mixture gave the first epoch's items.
    mixture = MixtureDataset([(FrameDataset(shards[:1]), 1.0), (FrameDataset(shards[1:]), 1.0)], num_samples=12)
    loader = GpuLoader(mixture, batch_size=12, device="cpu", decode="cpu")
    first, second = first_batch_of_each_epoch(mixture, loader, 2)
    assert first != second
