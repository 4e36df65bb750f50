"""A loader that keeps an accelerator fed: decoded batches on the device, the decode of the next
batch overlapping the consumer's work on this one, and CPU or GPU decode chosen for the machine.

``GpuLoader(dataset, batch_size=256, num_workers=8, device="cuda")`` wraps a
DataLoader over the dataset (a FrameDataset, or a MixtureDataset of them) and
yields dicts of tensors on ``device``. A staging thread takes each batch the
DataLoader gives, copies it into page-locked host buffers that are reused
(never allocated per batch) and checks its images; an issuing thread then
decodes the packed JPEGs of every camera on a CUDA stream of its own (one
nvJPEG call), so the checks of batch n+1 overlap the decode of batch n. The
consumer's stream waits on an event of that batch only: while the training
step of batch n runs, batch n+1 is already being copied and decoded.

``decode="auto"`` picks where images are decoded: in the DataLoader workers
on the CPU (pixels cross to the device) or on the device from the packed bytes.
It times both on a sample of the dataset (the GPU side from the issue's nvJPEG
figures when the device cannot be timed) and models the rate of each for the
worker count and cores; ``repr(loader)`` and a log line of the ``arrayio.robot``
logger say which it chose and why.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import queue
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

try:
    import torch
    from torch.utils.data import DataLoader
except ModuleNotFoundError as error:  # say which extra installs it
    from .._optional import missing

    raise missing("torch", "arrayio.robot.torch_loader") from error

from ._arguments import finite_number, whole_number
from .torch import plan_decode
from .torch_batch import SCALE, ReadAheadSampler, as_device, check_image_format, collate, packed_cameras

__all__ = ["DecodeChoice", "GpuLoader", "choose_decode"]

LOG = logging.getLogger("arrayio.robot")
DECODE_CHOICES = ("auto", "cpu", "gpu")
# nvJPEG (torchvision.io.decode_jpeg, batch 256) measured on an H200 machine (issue 21): images per second
# at two image sizes, used when the device itself cannot be timed; linear in pixels between them.
NVJPEG_IMAGES_PER_S = ((96 * 96, 37_400.0), (224 * 224, 41_400.0))
SAMPLE_FRAMES = 64
# Decoded pixels a main process takes in from its DataLoader workers per second, whatever the decode costs:
# decode="cpu" with 8 and 15 workers at 224 px delivered 3.1-4.2 GB/s on an H100 machine (16 cores,
# benchmarks/kdb_gpu.py); the issue's older loader, copying fresh blocks, 1.3-1.6 GB/s.
DELIVERY_BYTES_PER_S = 3.1e9


class Event(Protocol):
    """A point on a device stream (torch.cuda.Event, or a finished marker on the CPU)."""

    def synchronize(self) -> None:
        """Block the host until the work before the event is done."""


class DeviceOps(Protocol):
    """What the loader asks of a device: a side stream, events, page-locked buffers, decode, hand-over."""

    device: torch.device
    copies: bool  # whether batches are copied through page-locked buffers to reach the device

    def side_stream(self) -> contextlib.AbstractContextManager:
        """A context in which work is issued on the loader's own stream."""

    def record(self) -> Event:
        """An event after the work issued on the side stream so far."""

    def wait(self, event: Event) -> None:
        """Make the consumer's stream wait for ``event``."""

    def pinned(self, nbytes: int) -> torch.Tensor:
        """``nbytes`` of host memory that copies to the device start from."""

    def plan(self, batch: Mapping[str, Any], image_format: str) -> Callable[[], dict[str, Any]]:
        """Check and slice the batch on the host and start the copies of its other tensors now (on the current
        stream); the returned function decodes its packed images on the device."""

    def hand_over(self, batch: Mapping[str, Any]) -> None:
        """Mark the batch's device memory as used by the consumer's stream."""

    def images_per_second(self, batch: Mapping[str, Any], image_format: str) -> float | None:
        """The device's decode rate on this packed batch (None: it does not decode)."""


class _Done:
    """The event of work that is finished when it is recorded (the CPU has no streams)."""

    def synchronize(self) -> None:
        """Nothing to wait for."""


class CpuOps:
    """The CPU as a device: no streams, plain host memory, packed bytes decoded by the CPU decoder."""

    def __init__(self) -> None:
        self.device = torch.device("cpu")
        self.copies = False

    def side_stream(self) -> contextlib.AbstractContextManager:
        """No stream to switch to."""
        return contextlib.nullcontext()

    def record(self) -> Event:
        """Work on the CPU is done when it returns."""
        return _Done()

    def wait(self, event: Event) -> None:
        """Nothing runs asynchronously on the CPU."""

    def pinned(self, nbytes: int) -> torch.Tensor:
        """Plain host memory: nothing is copied to a device."""
        return torch.empty(nbytes, dtype=torch.uint8)

    def plan(self, batch: Mapping[str, Any], image_format: str) -> Callable[[], dict[str, Any]]:
        """Packed images decoded on the CPU when called; other tensors as they are."""
        return plan_decode(batch, self.device, image_format=image_format, copies_now=True)

    def hand_over(self, batch: Mapping[str, Any]) -> None:
        """Host tensors need no stream bookkeeping."""

    def images_per_second(self, batch: Mapping[str, Any], image_format: str) -> float | None:
        """None: decoding "on the device" is the CPU decode the workers already do."""
        return None


class CudaOps:
    """A CUDA device: one side stream for copies and nvJPEG decode, events, page-locked host memory."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.copies = True
        self.stream = torch.cuda.Stream(device)

    def side_stream(self) -> contextlib.AbstractContextManager:
        """Work issued inside runs on the loader's own stream."""
        return torch.cuda.stream(self.stream)

    def record(self) -> Event:
        """An event after everything issued on the side stream so far."""
        event = torch.cuda.Event()
        event.record(self.stream)
        return event

    def wait(self, event: Event) -> None:
        """The consumer's current stream waits for ``event`` (the host does not)."""
        torch.cuda.current_stream(self.device).wait_event(event)  # type: ignore[arg-type]

    def pinned(self, nbytes: int) -> torch.Tensor:
        """Page-locked host memory: copies from it to the device run asynchronously."""
        return torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)

    def plan(self, batch: Mapping[str, Any], image_format: str) -> Callable[[], dict[str, Any]]:
        """Packed JPEGs decoded by nvJPEG on the current (side) stream when called; other tensors copied."""
        return plan_decode(batch, self.device, image_format=image_format, non_blocking=True, copies_now=True)

    def hand_over(self, batch: Mapping[str, Any]) -> None:
        """Tell the caching allocator that the consumer's stream uses the batch's memory now."""
        stream = torch.cuda.current_stream(self.device)
        for value in batch.values():
            if isinstance(value, torch.Tensor) and value.device.type == "cuda":
                value.record_stream(stream)

    def images_per_second(self, batch: Mapping[str, Any], image_format: str) -> float | None:
        """nvJPEG images per second on this batch (best of 5 after a warm-up), None when it cannot decode it."""
        try:
            self.plan(batch, image_format)()
        except ValueError:
            return None
        images = sum(int(np.prod(batch[key + "_sizes"].shape[:-1])) for key in packed_cameras(batch))
        best = float("inf")
        for _ in range(5):
            torch.cuda.synchronize(self.device)
            started = time.perf_counter()
            self.plan(batch, image_format)()
            torch.cuda.synchronize(self.device)
            best = min(best, time.perf_counter() - started)
        return images / best


def device_ops(device: Any) -> DeviceOps:
    """The DeviceOps of ``device``: "cpu", "cuda[:n]", a torch.device, or an object that already is one."""
    if hasattr(device, "side_stream") and hasattr(device, "plan"):
        return device
    target = as_device(device)
    if target.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"kdb: cannot load onto {target}: CUDA is not available")
        return CudaOps(target)
    if target.type != "cpu":
        raise ValueError(f"kdb: GpuLoader supports cpu and cuda devices, got {target}")
    return CpuOps()


# -- choosing where to decode -----------------------------------------------------------------------


@dataclass(frozen=True)
class DecodeChoice:
    """Where images are decoded, and the frames/s that each side was modelled at."""

    mode: str  # "cpu": in the DataLoader workers; "gpu": packed bytes decoded on the device
    cpu_frames_per_s: float
    gpu_frames_per_s: float | None
    reason: str

    def __str__(self) -> str:
        if not self.cpu_frames_per_s:
            return f"{self.mode} decode ({self.reason})"
        gpu = "n/a" if self.gpu_frames_per_s is None else f"{self.gpu_frames_per_s:,.0f}"
        return (f"{self.mode} decode (modelled frames/s: cpu {self.cpu_frames_per_s:,.0f}, gpu {gpu}; "
                f"{self.reason})")


def nvjpeg_images_per_second(pixels: int) -> float:
    """The issue's nvJPEG figure for images of ``pixels`` pixels, linear between the two sizes measured."""
    (low, low_rate), (high, high_rate) = NVJPEG_IMAGES_PER_S
    share = min(max((pixels - low) / (high - low), 0.0), 1.0)
    return low_rate + share * (high_rate - low_rate)


def choose_decode(*, cpu_frame_s: float, packed_frame_s: float, gpu_images_per_s: float | None, cameras: int,
                  workers: int, cores: int, frame_bytes: int = 0) -> DecodeChoice:
    """The faster of CPU-worker decode and device decode for these per-frame costs and this machine.

    ``cpu_frame_s``: seconds one process takes to fetch and decode a frame; ``packed_frame_s``: to fetch
    it as packed bytes; ``gpu_images_per_s``: the device's decode rate (None: no device decode here);
    ``frame_bytes``: a frame's decoded uint8 pixels. Decoding processes are the workers (the main
    process when there are none), at most cores - 1 of them running at once, and what they decode
    reaches the main process at DELIVERY_BYTES_PER_S at most. Device decode runs beside the fetching
    (the loader's issuing thread), so the slower of the two sets its rate.
    """
    processes = max(1, min(workers, max(cores - 1, 1)))
    cpu = processes / cpu_frame_s
    if workers and frame_bytes:
        cpu = min(cpu, DELIVERY_BYTES_PER_S / frame_bytes)
    if gpu_images_per_s is None:
        return DecodeChoice("cpu", cpu, None, "no device decode on this device")
    gpu = min(processes / packed_frame_s, gpu_images_per_s / max(cameras, 1))
    if gpu > cpu:
        return DecodeChoice("gpu", cpu, gpu, f"{workers} worker(s) on {cores} cores decode slower than the device")
    return DecodeChoice("cpu", cpu, gpu, f"{workers} worker(s) on {cores} cores decode faster than the device")


def _sample_items(dataset: Any, count: int) -> list[int]:
    rng = np.random.default_rng(0)
    return sorted(rng.choice(len(dataset), size=min(count, len(dataset)), replace=False).tolist())


def _seconds_per_frame(dataset: Any, items: list[int]) -> tuple[float, dict[str, Any]]:
    """Seconds per frame of fetching ``items`` (the second of two fetches: the first parses the tables)."""
    collate(dataset.__getitems__(items))
    started = time.perf_counter()
    batch = collate(dataset.__getitems__(items))
    return (time.perf_counter() - started) / len(items), batch


def measure_choice(dataset: Any, ops: DeviceOps, *, workers: int, cores: int, image_format: str,
                   batch_size: int = SAMPLE_FRAMES) -> DecodeChoice:
    """Time CPU decode and packed fetching on a sample of ``dataset`` and the device's decode on a batch of
    ``batch_size`` frames, then choose."""
    items = _sample_items(dataset, SAMPLE_FRAMES)
    if not items:
        return DecodeChoice("cpu", 0.0, None, "an empty dataset")
    cpu_frame_s, _ = _seconds_per_frame(dataset.with_decode("cpu"), items)
    packed_frame_s, packed = _seconds_per_frame(dataset.with_decode("none"), items)
    cameras = packed_cameras(packed)
    if not cameras:
        return DecodeChoice("cpu", 1 / cpu_frame_s, None, "no camera images to decode")
    # The device is timed at the loader's batch size: a device call's fixed cost weighs more in a smaller batch
    # (at 96 px a 64-frame sample put nvJPEG 3-44 % below what batches of 256 then got from it).
    whole = _sample_items(dataset, batch_size)
    timed = packed if whole == items else collate(dataset.with_decode("none").__getitems__(whole))
    rate = ops.images_per_second(timed, image_format)
    if rate is None and ops.device.type == "cuda":
        return DecodeChoice("cpu", 1 / cpu_frame_s, None, "the device cannot decode these images")
    if rate is None and ops.device.type != "cpu":  # a device that cannot time itself: the issue's figures
        pixels = int(np.prod(packed[cameras[0] + "_sizes"].reshape(-1, 4)[0, :2].tolist()))
        rate = nvjpeg_images_per_second(pixels)
    per_frame = sum(int(np.prod(packed[key + "_sizes"].shape[1:-1])) for key in cameras)
    frame_bytes = sum(int(np.prod(packed[key + "_sizes"].reshape(-1, 4)[0, :3].tolist())) * int(
        np.prod(packed[key + "_sizes"].shape[1:-1])) for key in cameras)
    return choose_decode(cpu_frame_s=cpu_frame_s, packed_frame_s=packed_frame_s, gpu_images_per_s=rate,
                         cameras=per_frame, workers=workers, cores=cores, frame_bytes=frame_bytes)


# -- the loader -------------------------------------------------------------------------------------


@dataclass
class LoaderStats:
    """Where a loader's time went, summed over its batches so far."""

    batches: int = 0
    frames: int = 0
    fetch_s: float = 0.0  # the staging thread waiting for the DataLoader's next batch
    host_s: float = 0.0  # the staging thread copying into page-locked buffers, checking and slicing images
    issue_s: float = 0.0  # the issuing thread starting copies and decode (nvJPEG's host stage included)
    decode_s: float = 0.0  # of issue_s, in the decode call (nvJPEG and the stacking, and the GIL back after)
    starved_s: float = 0.0  # the issuing thread waiting for a staged batch (0 when staging keeps ahead)
    wait_s: float = 0.0  # the consumer waiting for a decoded batch (0 when the loader keeps ahead)
    pinned_bytes: int = 0  # page-locked memory held (the buffers are reused)

    def per_batch(self) -> dict[str, float]:
        """Mean seconds per batch of each stage."""
        count = max(self.batches, 1)
        return {name: getattr(self, name) / count
                for name in ("fetch_s", "host_s", "issue_s", "decode_s", "starved_s", "wait_s")}


class _PinnedSlot:
    """Reused page-locked buffers for one batch between staging and its copies, and the event after those."""

    def __init__(self, ops: DeviceOps) -> None:
        self.ops = ops
        self.buffers: dict[str, torch.Tensor] = {}
        self.event: Event | None = None
        self.issued = threading.Event()  # the batch last staged here has had its copies issued
        self.issued.set()

    def stage(self, batch: Mapping[str, Any]) -> tuple[dict[str, Any], int]:
        """``batch`` with each tensor copied into this slot's buffers (grown, never shrunk); bytes added."""
        if self.event is not None:
            self.event.synchronize()  # the copies out of these buffers of the batch before have finished
        grown = 0
        staged: dict[str, Any] = {}
        for key, value in batch.items():
            if not isinstance(value, torch.Tensor):
                staged[key] = value
                continue
            nbytes = value.numel() * value.element_size()
            buffer = self.buffers.get(key)
            if buffer is None or buffer.numel() < nbytes:
                size = max(nbytes + nbytes // 4, 4096)
                grown += size - (0 if buffer is None else buffer.numel())
                buffer = self.buffers[key] = self.ops.pinned(size)
            staged[key] = _copy_in_memory_order(value, buffer[:nbytes].view(value.dtype))
        return staged, grown


def _copy_in_memory_order(value: torch.Tensor, flat: torch.Tensor) -> torch.Tensor:
    """``value`` copied into ``flat`` with its strides kept: a channels-last image batch is copied as it lies
    in memory, not transposed."""
    strides = value.stride()
    order = sorted(range(value.dim()), key=lambda dim: -strides[dim])
    dense = value.permute(order)
    if not dense.is_contiguous():
        order, dense = list(range(value.dim())), value
    copy = flat.view(dense.shape)
    copy.copy_(dense)
    return copy.permute([order.index(dim) for dim in range(value.dim())])


_END = object()
# A slot being staged, one staged batch waiting, one whose copies and decode are being issued.
SLOTS = 3
SWITCH_INTERVAL_S = 0.001
# Batches each process reads ahead over remote shards: at 50 ms a request two gave 12-22 % more frames/s in a cold
# epoch than one, and at loopback speed as many as one (docs/benchmarks.md).
BATCHES_AHEAD = 2


class GpuLoader:
    """Decoded batches on ``device`` from a DataLoader over ``dataset``, the next ones staged meanwhile.

    ``dataset`` is a FrameDataset or a MixtureDataset of them; ``batch_size``,
    ``num_workers``, ``shuffle``, ``sampler``, ``drop_last``, ``batch_sampler`` (such as
    ``mixture.batch_sampler(B)``, whose batch size is then the one) and any other
    keyword go to the DataLoader (its ``collate_fn`` is :func:`collate`).
    ``decode``: "auto" (measure and model, see :func:`choose_decode`), "cpu"
    (the workers decode) or "gpu" (the device decodes packed bytes).
    ``image_format`` "float" gives float32 in [0, 1], "uint8" the pixels.
    ``prefetch`` decoded batches wait ahead of the one the consumer holds.
    ``device`` may be "cpu", "cuda[:n]", a torch.device, or a :class:`DeviceOps`.
    ``stats`` says where the time went (:class:`LoaderStats`).
    ``switch_interval_s``: while the loader iterates, the interpreter's thread
    switch interval is lowered to this (and restored after); None leaves it.
    Over remote shards each process reads its next ``batches_ahead`` batches ahead
    (:class:`ReadAheadSampler`; 0 turns it off), so their round trips overlap this batch's decode.

    Two threads feed the consumer: one fetches each batch, copies it into
    page-locked buffers and checks its images; the other issues its copies
    and decode on the device's side stream. The decode runs with the GIL
    released (nvJPEG's hardware decoder called directly in lanes, see
    :mod:`arrayio.robot._nvjpeg_hardware`, or torchvision's operator
    compiled, see :mod:`arrayio.robot._nvjpeg`), so the checks of
    batch n + 1 run while batch n decodes. Each call the issuing thread makes
    hands the GIL back, and taking it again waits up to one switch interval
    (5 ms by default) behind a thread running Python: hence the shorter
    interval while batches are issued.
    """

    def __init__(self, dataset: Any, batch_size: int = 256, *, num_workers: int = 0, device: Any = "cuda",
                 decode: str = "auto", image_format: str = "float", prefetch: int = 2,
                 cores: int | None = None, switch_interval_s: float | None = SWITCH_INTERVAL_S,
                 batches_ahead: int = BATCHES_AHEAD, **loader_options: Any) -> None:
        if decode not in DECODE_CHOICES:
            raise ValueError(f"kdb: decode must be one of {DECODE_CHOICES}, got {decode!r}")
        check_image_format(image_format)
        batch_sampler = loader_options.pop("batch_sampler", None)  # its batch size, if it has one, is the one
        self.batch_size = whole_number("batch_size", getattr(batch_sampler, "batch_size", batch_size), 1)
        self.prefetch = whole_number("prefetch", prefetch, 1)
        self.switch_interval_s = None if switch_interval_s is None else \
            finite_number("switch_interval_s", switch_interval_s, positive=True)
        self.num_workers = whole_number("num_workers", num_workers, 0)
        self.batches_ahead = whole_number("batches_ahead", batches_ahead, 0)
        self.cores = len(os.sched_getaffinity(0)) if cores is None else whole_number("cores", cores, 1)
        self.ops = device_ops(device)
        self.device = self.ops.device
        self.image_format = image_format
        if decode == "auto":
            self.choice = measure_choice(dataset, self.ops, workers=self.num_workers, cores=self.cores,
                                         image_format=image_format, batch_size=self.batch_size)
        else:
            self.choice = DecodeChoice(decode, 0.0, None, "asked for")
        self.decode = self.choice.mode
        # Pixels cross to a device as uint8 (a quarter of float32's bytes) and become floats there.
        worker_format = "uint8" if self.ops.copies else image_format
        # Where batches are copied into page-locked buffers, no host batch leaves the loader: the workers may
        # decode into the shared blocks of batches already copied (FrameDataset's reuse_shared_memory).
        self.dataset = dataset.with_decode("none" if self.decode == "gpu" else "cpu", image_format=worker_format,
                                           reuse_shared_memory=True if self.ops.copies else None)
        LOG.info("GpuLoader on %s with %d worker(s): %s", self.device, self.num_workers, self.choice)
        batching = {"batch_size": self.batch_size} if batch_sampler is None else {"batch_sampler": batch_sampler}
        self.loader = DataLoader(self.dataset, num_workers=num_workers, collate_fn=collate, **batching,
                                 **loader_options)
        if self.batches_ahead and getattr(dataset, "remote", False):  # each process reads its next batches ahead
            options = {key: value for key, value in loader_options.items()
                       if key not in ("shuffle", "sampler", "drop_last")}  # they made the batch sampler wrapped
            self.loader = DataLoader(self.dataset, batch_sampler=ReadAheadSampler(self.loader.batch_sampler,
                                                                                  num_workers, self.batches_ahead),
                                     num_workers=num_workers, collate_fn=collate, **options)
        self.stats = LoaderStats()
        self._slots = [_PinnedSlot(self.ops) for _ in range(SLOTS)]

    def __repr__(self) -> str:
        return (f"GpuLoader(device={str(self.device)!r}, batch_size={self.batch_size}, "
                f"num_workers={self.num_workers}, decode={self.decode!r}: {self.choice})")

    def __len__(self) -> int:
        return len(self.loader)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        planned: queue.Queue = queue.Queue(maxsize=1)
        decoded: queue.Queue = queue.Queue(maxsize=self.prefetch)
        stop = threading.Event()
        threads = [threading.Thread(target=self._stage_all, args=(planned, stop), name="arrayio-gpu-loader-stage",
                                    daemon=True),
                   threading.Thread(target=self._issue_all, args=(planned, decoded, stop), name="arrayio-gpu-loader",
                                    daemon=True)]
        previous = sys.getswitchinterval()
        lowered = self.switch_interval_s if self.switch_interval_s is not None and \
            self.switch_interval_s < previous else None
        if lowered is not None:
            sys.setswitchinterval(lowered)
        for thread in threads:
            thread.start()
        try:
            while True:
                started = time.perf_counter()
                item = decoded.get()
                self.stats.wait_s += time.perf_counter() - started
                if item is _END:
                    return
                if isinstance(item, BaseException):
                    raise item
                batch, event = item
                self.ops.wait(event)  # the consumer's stream, not the host, waits for the copies and decode
                self.ops.hand_over(batch)
                yield batch
        finally:
            stop.set()
            for thread in threads:
                while thread.is_alive():  # unblock a thread waiting to put
                    for waiting in (planned, decoded):
                        with contextlib.suppress(queue.Empty):
                            waiting.get_nowait()
                    thread.join(timeout=0.05)
            if lowered is not None and abs(sys.getswitchinterval() - lowered) < 1e-6:  # unless changed since
                sys.setswitchinterval(previous)

    def _plan(self, host: Mapping[str, Any]) -> Callable[[], dict[str, Any]]:
        """What puts the batch on the device: packed images decoded there, pixels of the workers made floats."""
        if packed_cameras(host):
            return self.ops.plan(host, self.image_format)

        def move() -> dict[str, Any]:
            out = {key: value.to(self.device, non_blocking=True) if isinstance(value, torch.Tensor) else value
                   for key, value in host.items()}
            if self.image_format == "float" and self.ops.copies:  # the workers sent uint8: a quarter of the bytes
                for key in [key for key in out if key.startswith("image.") and out[key].dtype == torch.uint8]:
                    out[key] = out[key].float().mul_(float(SCALE))  # the CPU decode's factor: equal floats
            return out
        return move

    def _stage_all(self, planned: queue.Queue, stop: threading.Event) -> None:
        """The staging thread: fetch, copy into the next slot's page-locked buffers, check and slice."""
        try:
            iterator = iter(self.loader)
            for number in itertools.count():
                started = time.perf_counter()
                batch: Any = next(iterator, _END)
                fetched = time.perf_counter()
                self.stats.fetch_s += fetched - started
                if batch is _END or stop.is_set():
                    break
                slot = self._slots[number % len(self._slots)]
                while not slot.issued.wait(0.05):  # the issuing thread still reads this slot's last batch
                    if stop.is_set():
                        return
                slot.issued.clear()
                host, grown = slot.stage(batch) if self.ops.copies else (batch, 0)
                with self.ops.side_stream():  # the small tensors' copies start here, leaving the decode alone
                    plan = self._plan(host)
                self.stats.host_s += time.perf_counter() - fetched
                self.stats.pinned_bytes += grown
                self.stats.frames += len(batch["index"]) if "index" in batch else 0
                if not _put(planned, (plan, slot), stop):
                    return
            _put(planned, _END, stop)
        except BaseException as error:  # noqa: BLE001 - handed to the consumer, raised there
            _put(planned, error, stop)

    def _issue_all(self, planned: queue.Queue, decoded: queue.Queue, stop: threading.Event) -> None:
        """The issuing thread: copies and decode of each staged batch on the side stream, then its event."""
        while not stop.is_set():
            waiting = time.perf_counter()
            try:
                item = planned.get(timeout=0.05)
            except queue.Empty:
                continue
            finally:
                self.stats.starved_s += time.perf_counter() - waiting
            if item is _END or isinstance(item, BaseException):
                _put(decoded, item, stop)
                return
            plan, slot = item
            started = time.perf_counter()
            try:
                with self.ops.side_stream():
                    batch = plan()
                    slot.event = self.ops.record()
            except BaseException as error:  # noqa: BLE001 - handed to the consumer, raised there
                _put(decoded, error, stop)
                return
            finally:
                slot.issued.set()
            self.stats.issue_s += time.perf_counter() - started
            self.stats.decode_s += getattr(plan, "decode_s", 0.0)
            self.stats.batches += 1
            if not _put(decoded, (batch, slot.event), stop):
                return


def _put(staged: queue.Queue, item: Any, stop: threading.Event) -> bool:
    """Put ``item`` unless the consumer has stopped; False when it has."""
    while not stop.is_set():
        try:
            staged.put(item, timeout=0.05)
            return True
        except queue.Full:
            continue
    return False
