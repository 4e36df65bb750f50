"""GpuLoader on a GPU (issue 21): frames/s of decoded batches on the device against the nvJPEG ceiling, at
0/4/8/(cores-1) workers, 96 and 224 px, 2 JPEG cameras, batch 256, random frames, with and without a
training stand-in (a fixed bf16 matmul per batch on the consumer's stream), best of 3; decode="cpu" at
the same worker counts (the crossover) and what decode="auto" chooses at each.

    python benchmarks/kdb_gpu.py [--frames 6144] [--batches 12] [--standin 8] [--quick] [--json PATH]
    python benchmarks/kdb_gpu.py --probe                        # where one batch's decode time goes
    python benchmarks/kdb_gpu.py --switch-intervals 0,0.001     # GpuLoader(switch_interval_s=...) at 224 px
    python benchmarks/kdb_gpu.py --handoffs                     # the lanes' thread hand-offs, on any CPU
    python benchmarks/kdb_gpu.py --contention                   # the lanes beside idle and busy processes

On a GPU machine with Python 3.12 and torch/torchvision but no network, carry ``src/`` and the cp312
wheels of blosc 1.11.4 and simplejpeg (see /work/.library/device/README.md), then in one command:

    python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl && \\
        PYTHONPATH=/tmp/site:src python3 benchmarks/kdb_gpu.py --json $OUT/kdb_gpu.json

Without CUDA it measures nothing and says so (``--device cpu`` runs the same code on the CPU, a check
that the script works, not a figure).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import tempfile
import time
import timeit
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))

import _rows  # noqa: E402
from kdb import CAMERAS, POOL, synthetic_pool  # noqa: E402 - benchmarks/kdb.py, beside this file

from arrayio import kdb  # noqa: E402
from arrayio.kdb import EncodedImage, check_jpeg_headers  # noqa: E402

AREA = "kdb-gpu"
SWEEP_DECODERS: dict = {}  # lanes -> a hardware decoder of that many lanes
BATCH = 256


def build(folder: Path, size: int, frames: int, per_episode: int = 128) -> Path:
    """One .kdb of 2 JPEG cameras (frames drawn from a pool of distinct synthetic pictures)."""
    rng = np.random.default_rng(size)
    encoded, _ = synthetic_pool(size, rng)
    path = folder / f"gpu{size}.kdb"
    with kdb.Writer(path) as writer:
        for _ in range(max(1, frames // per_episode)):
            picks = {camera: rng.integers(0, POOL, per_episode) for camera in CAMERAS}
            writer.add_episode(rng.standard_normal((per_episode, 14)).astype(np.float32),
                               rng.standard_normal((per_episode, 7)).astype(np.float32), fps=20.0,
                               images={camera: [EncodedImage(encoded[p], "jpeg", size, size, 3) for p in picks[camera]]
                                       for camera in CAMERAS})
    return path


def synchronize(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def sample_batch(dataset) -> dict:
    """One packed batch of 256 random frames of ``dataset`` (the same frames every call)."""
    from arrayio.robot.torch import collate

    rng = np.random.default_rng(0)
    return collate(dataset.with_decode("none").__getitems__(rng.integers(0, len(dataset), BATCH).tolist()))


def pieces_of(packed: dict, key: str, data=None) -> list:
    """Camera ``key``'s JPEGs as nvJPEG takes them: one view per image of ``data`` (the packed bytes)."""
    import torch

    offsets = packed[key + "_offsets"]
    data = packed[key] if data is None else data
    return list(torch.split(data[:int(offsets[-1])], offsets.diff().tolist()))


def frames_per_second(device, run, prepare=lambda: None, repeat: int = 5) -> float:
    """Frames/s of ``run(prepare())`` on batches of 256, best of 3 x ``repeat`` after a warm-up (``prepare``
    runs outside the timing)."""
    run(prepare())
    best = float("inf")
    for _ in range(3):
        prepared = [prepare() for _ in range(repeat)]
        synchronize(device)
        started = time.perf_counter()
        for item in prepared:
            run(item)
        synchronize(device)
        best = min(best, time.perf_counter() - started)
    return repeat * BATCH / best


def ceiling(dataset, device) -> float:
    """Frames/s of decode alone on the device for one packed batch of 256 random frames, repeated (best of 3 x 5):
    the reading of the earlier runs, kept beside the sustained one."""
    from arrayio.robot.torch import decode_batch

    packed = sample_batch(dataset)
    if device.type != "cuda":
        return frames_per_second(device, lambda _: decode_batch(packed, device))
    from torchvision.io import decode_jpeg  # the pieces as nvJPEG takes them: no host work of ours

    pieces = [pieces_of(packed, key) for key in packed if key + "_offsets" in packed]
    return frames_per_second(device, lambda _: [decode_jpeg(camera, device=device) for camera in pieces])


def packed_batches(dataset, count: int, seed: int) -> list[dict]:
    """``count`` packed batches of 256 random frames each, as the loader's workers make them."""
    from arrayio.robot.torch import collate

    rng = np.random.default_rng(seed)
    packed = dataset.with_decode("none")
    return [collate(packed.__getitems__(rng.integers(0, len(dataset), BATCH).tolist())) for _ in range(count)]


def sustained_ceiling(batches: list[dict], device) -> tuple[float, float | None]:
    """Frames/s of nvJPEG alone decoding ``batches`` back to back from page-locked memory (best of 3), called
    two ways: through torchvision (the better of one call per batch for every camera, as the loader called it
    before, and one call per camera), and directly on the hardware backend into one stack per batch (as the
    loader calls it now; None where the GPU has no hardware decoder). The loader is timed the same way, over
    as many distinct batches, so the two differ only by what the loader adds."""
    from arrayio.robot.torch import decode_batch

    if device.type != "cuda":
        return _back_to_back(device, [lambda batch=batch: decode_batch(batch, device) for batch in batches]), None
    from torchvision.io import decode_jpeg

    cameras = [key for key in batches[0] if key + "_offsets" in batches[0]]
    pinned = [{key: pieces_of(batch, key, batch[key].pin_memory()) for key in cameras} for batch in batches]
    together = [lambda pieces=pieces: decode_jpeg(sum(pieces.values(), []), device=device) for pieces in pinned]
    apart = [lambda pieces=pieces: [decode_jpeg(camera, device=device) for camera in pieces.values()]
             for pieces in pinned]
    through_torchvision = max(_back_to_back(device, together), _back_to_back(device, apart))
    direct = [hardware_decode(batch, device) for batch in batches]
    return through_torchvision, None if None in direct else _back_to_back(device, direct)


def hardware_decode(batch: dict, device, decoder=None):
    """A function decoding the packed JPEGs of every camera of ``batch`` (copied to page-locked memory) with
    nvJPEG's hardware decoder called directly (``decoder``, default the loader's), into one stack; None where
    the GPU has none."""
    from arrayio.robot import _nvjpeg_hardware

    decoder = decoder or _nvjpeg_hardware.hardware_decoder(device)
    if decoder is None:
        return None
    datas, lengths, size = packed_parts(batch)
    datas = [data.pin_memory() for data in datas]
    return lambda: _nvjpeg_hardware.decode_into_stacks(decoder, datas, lengths, [list(range(len(datas)))],
                                                       [size], 3, device, None)


def packed_parts(batch: dict) -> tuple[list, list[list[int]], tuple[int, int]]:
    """Every camera's packed JPEG bytes and lengths in ``batch``, and their (height, width)."""
    cameras = [key for key in batch if key + "_offsets" in batch]
    datas = [batch[key][:int(batch[key + "_offsets"][-1])] for key in cameras]
    lengths = [batch[key + "_offsets"].diff().tolist() for key in cameras]
    height, width = (int(side) for side in batch[cameras[0] + "_sizes"][0, :2])
    return datas, lengths, (height, width)


class decoding_through_torchvision:  # noqa: N801 - used as a with-statement, like contextlib's
    """Within it, the loader decodes through torchvision's operator (the path before the hardware decoder)."""

    def __enter__(self) -> None:
        from arrayio.robot import _nvjpeg_hardware

        os.environ[_nvjpeg_hardware.SWITCH] = "torchvision"

    def __exit__(self, *exc) -> None:
        from arrayio.robot import _nvjpeg_hardware

        os.environ.pop(_nvjpeg_hardware.SWITCH, None)


def _back_to_back(device, decodes: list) -> float:
    """Frames/s of running every one of ``decodes`` (a batch each) in turn, best of 3 after a warm-up."""
    decodes[0]()
    best = float("inf")
    for _ in range(3):
        synchronize(device)
        started = time.perf_counter()
        for decode in decodes:
            decode()
        synchronize(device)
        best = min(best, time.perf_counter() - started)
    return len(decodes) * BATCH / best


def probe(dataset, device) -> None:
    """Where one packed batch's decode time goes: nvJPEG per camera (the ceiling), one call for both cameras,
    from page-locked memory, the loader's whole issue step, and that step beside a thread running Python."""
    import threading

    from torchvision.io import decode_jpeg

    from arrayio.robot import _nvjpeg
    from arrayio.robot.torch import plan_decode

    packed = sample_batch(dataset)
    cameras = [key for key in packed if key + "_offsets" in packed]
    pieces = {key: pieces_of(packed, key) for key in cameras}
    pinned_pieces = [piece for key in cameras for piece in pieces_of(
        packed, key, packed[key].pin_memory() if device.type == "cuda" else packed[key])]

    def plan():
        return plan_decode(packed, device, image_format="float")

    cases = [("decode_jpeg per camera (the ceiling)", lambda _: [decode_jpeg(p, device=device) for p in
                                                                 pieces.values()], lambda: None),
             ("decode_jpeg, one call for both cameras", lambda _: decode_jpeg(sum(pieces.values(), []),
                                                                            device=device), lambda: None),
             ("the same from page-locked memory", lambda _: decode_jpeg(pinned_pieces, device=device), lambda: None),
             ("plan_decode: checks + issue", lambda _: plan()(), lambda: None),
             ("its issue step alone (decode, stack, float, copies)", lambda planned: planned(), plan)]
    direct = hardware_decode(packed, device) if device.type == "cuda" else None
    if direct is not None:
        cases.insert(3, ("hardware decoder called directly, into one stack", lambda _: direct(), lambda: None))
    print(f"\nprobe, one packed batch of {BATCH} frames x {len(cameras)} cameras, best of 3 x 5:")
    if device.type == "cuda":
        check_hardware_decode(packed, device)
    for name, run, prepare in cases:
        print(f"  {name:<55} {frames_per_second(device, run, prepare):>9,.0f} frames/s")
    for name, check in (("one image at a time", check_one_by_one), ("all at once", check_jpeg_headers)):
        seconds = min(timeit.repeat(lambda check=check: [check(packed[key].numpy(), packed[key + "_offsets"].numpy(),
                                                               packed[key + "_sizes"].numpy()[:, 1],
                                                               packed[key + "_sizes"].numpy()[:, 0])
                                                         for key in cameras], number=20, repeat=3)) / 20
        print(f"  {'JPEG header checks of the batch, ' + name:<55} {seconds * 1e3:>9.3f} ms")
    stop = threading.Event()
    together = sum(pieces.values(), [])
    datas, lengths, _ = packed_parts(packed)
    compiled = _nvjpeg._compiled() if device.type == "cuda" else None
    beside = [("nvJPEG from Python", lambda _: decode_jpeg(together, device=device), lambda: None),
              ("the issue step", lambda planned: planned(), plan)]
    if direct is not None:
        beside.append(("the hardware decoder called directly", lambda _: direct(), lambda: None))
    if compiled is not None:
        beside.insert(1, ("nvJPEG + stack compiled", lambda _: compiled(datas, lengths, [[0, 1]], 3, device, None),
                          lambda: None))
        print(f"  {'nvJPEG + stack compiled (TorchScript), alone':<55} "
              f"{frames_per_second(device, beside[1][1]):>9,.0f} frames/s")
    else:
        print("  (TorchScript could not compile the decode here: the loader decodes from Python)")
    for interval in (0.001, 0.0001):
        for name, run, prepare in beside:
            sys.setswitchinterval(interval)
            stop.clear()
            spinner = threading.Thread(target=_spin, args=(stop,))
            spinner.start()
            result: list[float] = []
            issuing = threading.Thread(target=lambda out, run=run, prepare=prepare: out.append(
                frames_per_second(device, run, prepare)), args=(result,))
            issuing.start()
            issuing.join()
            stop.set()
            spinner.join()
            label = f"{name} in a thread beside a Python spin, switch interval {interval * 1e3:g} ms"
            print(f"  {label:<75} {result[0]:>9,.0f} frames/s")
    sys.setswitchinterval(0.005)


def check_hardware_decode(packed: dict, device) -> None:
    """Print where the nvJPEG library was found, and how the hardware decoder's images (called directly,
    RGB and grey) differ from torchvision's decode of the same batch."""
    import torch
    from torchvision.io import ImageReadMode, decode_jpeg

    from arrayio.robot import _nvjpeg_hardware

    with open("/proc/self/maps") as maps:
        print(f"  nvJPEG loaded from {_nvjpeg_hardware.library_path(maps.read())}")
    decoder = _nvjpeg_hardware.hardware_decoder(device)
    if decoder is None:
        print("  no hardware decoder here: the loader decodes through torchvision")
        return
    cameras = [key for key in packed if key + "_offsets" in packed]
    datas, lengths, size = packed_parts(packed)
    for mode, read_mode in ((3, ImageReadMode.RGB), (1, ImageReadMode.GRAY)):
        ours = _nvjpeg_hardware.decode_into_stacks(decoder, datas, lengths, [list(range(len(cameras)))], [size],
                                                   mode, device, None)
        if ours is None:
            print(f"  mode {mode}: the hardware decoder refused the batch")
            continue
        theirs = torch.stack(decode_jpeg([piece for key in cameras for piece in pieces_of(packed, key)],
                                         device=device, mode=read_mode))
        difference = (ours[0].int() - theirs.int()).abs()
        print(f"  mode {mode}: hardware {tuple(ours[0].shape)} vs torchvision {tuple(theirs.shape)}: "
              f"max |difference| {int(difference.max())}, mean {float(difference.float().mean()):.4f}")


def handoffs() -> None:
    """Without a GPU: what thread hand-offs cost the hardware decoder's lanes. nvJPEG's call is stood in for
    by a C call that releases the GIL for 6 ms per run (usleep, through ctypes as nvJPEG is called), the
    CUDA runtime by no-ops; per batch, alone and beside a thread running Python, at several switch intervals."""
    import ctypes
    import threading

    import torch

    from arrayio.robot import _nvjpeg_hardware

    sleep = ctypes.CDLL(None).usleep
    sleep.argtypes = [ctypes.c_uint]

    class Library:
        def nvjpegCreateEx(self, backend, device_allocator, pinned_allocator, flags, handle):  # noqa: N802
            return 0

        def nvjpegJpegStateCreate(self, handle, state):  # noqa: N802
            return 0

        def nvjpegDecodeBatchedInitialize(self, *arguments):  # noqa: N802
            return 0

        def nvjpegDecodeBatched(self, *arguments):  # noqa: N802
            sleep(6000)
            return 0

    class Nothing:
        cuda_stream = 0

        def __getattr__(self, name):
            return lambda *arguments: Nothing()

    images = 2 * BATCH
    tables = (np.zeros(images, np.uint64), np.ones(images, np.uint64), np.zeros((images, 8), np.uint64))
    print("\nthread hand-offs of the hardware decoder's lanes (a 6 ms C call per run stands for nvJPEG):")
    previous = sys.getswitchinterval()
    for lanes in (1, _nvjpeg_hardware.LANES):
        decoder = _nvjpeg_hardware.HardwareDecoder(Library(), torch.device("cpu"), lanes, side=Nothing())
        for interval in (0.005, 0.001, 0.0002, 0.0001):
            sys.setswitchinterval(interval)
            for beside in (False, True):
                stop = threading.Event()
                spinner = threading.Thread(target=_spin, args=(stop,))
                if beside:
                    spinner.start()
                decoder.decode(*tables, 3, None)
                seconds = min(timeit.repeat(lambda decoder=decoder: decoder.decode(*tables, 3, None), number=20,
                                            repeat=3)) / 20
                stop.set()
                if beside:
                    spinner.join()
                what = "beside a thread running Python" if beside else "alone"
                print(f"  {lanes} lane(s), switch interval {interval * 1e3:g} ms, {what:<30} "
                      f"{seconds * 1e3:6.2f} ms per batch")
    sys.setswitchinterval(previous)


def _decode_rate(device, decodes: list) -> tuple[float, float, float]:
    """Frames/s of ``decodes`` run back to back (best of 3), with this process's CPU milliseconds and minor
    page faults per batch over the three runs."""
    import resource

    faults, cpu = resource.getrusage(resource.RUSAGE_SELF).ru_minflt, time.process_time()
    rate = _back_to_back(device, decodes)
    runs = 3 * len(decodes) + 1  # the warm-up too
    return (rate, 1e3 * (time.process_time() - cpu) / runs,
            (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults) / runs)


def _busy_process(stop, kind: str) -> None:
    """A process spinning in Python ("spin") or copying 64 MB arrays ("copy") until ``stop`` is set."""
    source, target = (np.ones(8 << 20), np.empty(8 << 20)) if kind == "copy" else (None, None)
    while not stop.is_set():
        if kind == "copy":
            np.copyto(target, source)


def contention(dataset, device, workers_list: list[int]) -> None:
    """Why the lanes' calls take longer beside DataLoader workers: the hardware decoder alone on the same 12
    batches back to back (frames/s, this process's CPU ms and minor page faults per batch) alone; beside N
    forked workers, idle and then fetching batches (a thread here taking them); beside N processes spinning
    in Python, or copying memory; then the loader itself with fork and with forkserver workers."""
    import multiprocessing
    import threading

    import torch

    from arrayio.robot.torch import collate

    batches = packed_batches(dataset, 12, seed=3)
    decodes = [hardware_decode(batch, device) for batch in batches]
    if None in decodes:
        print("no hardware decoder here: nothing to measure")
        return

    def show(label: str) -> None:
        rate, cpu, faults = _decode_rate(device, decodes)
        print(f"  {label:<58} {rate:>9,.0f} frames/s {cpu:>7.2f} CPU ms {faults:>8.0f} faults a batch", flush=True)

    show("alone")
    packed = dataset.with_decode("none")
    for workers in workers_list:
        loader = torch.utils.data.DataLoader(packed, batch_size=BATCH, shuffle=True, num_workers=workers,
                                             collate_fn=collate, persistent_workers=True)
        iterator = iter(loader)
        next(iterator)
        time.sleep(1.0)  # the workers fill their prefetch and sleep
        show(f"beside {workers} idle forked workers")
        stop = threading.Event()

        def take(stop=stop, loader=loader) -> None:
            taken = iter(loader)
            while not stop.is_set():
                try:
                    next(taken)
                except StopIteration:
                    taken = iter(loader)
        taker = threading.Thread(target=take, daemon=True)
        taker.start()
        show(f"beside {workers} workers fetching (a thread here taking)")
        stop.set()
        taker.join()
        del iterator, loader
        for kind in ("spin", "copy"):
            context = multiprocessing.get_context("fork")
            halt = context.Event()
            others = [context.Process(target=_busy_process, args=(halt, kind), daemon=True) for _ in range(workers)]
            for other in others:
                other.start()
            time.sleep(0.5)
            show(f"beside {workers} processes " + ("spinning in Python" if kind == "spin" else "copying memory"))
            halt.set()
            for other in others:
                other.join()
        show("alone again")
        best: dict[str, tuple[float, float]] = {}
        for _ in range(3):  # interleaved, best of 3
            for context_name in ("fork", "forkserver"):
                try:
                    rate, _, stats = loader_rate(dataset, device, workers, "gpu", 12, standin_step(device, 0),
                                                 multiprocessing_context=context_name)
                except Exception as error:  # noqa: BLE001 - a context the dataset cannot travel through: say so
                    print(f"  GpuLoader, {workers} {context_name} workers: {type(error).__name__}: {error}")
                    continue
                if rate > best.get(context_name, (0.0, 0.0))[0]:
                    best[context_name] = (rate, stats["decode_s"])
        for context_name, (rate, decode_s) in best.items():
            label = f"GpuLoader, {workers} {context_name} workers (best of 3)"
            print(f"  {label:<58} {rate:>9,.0f} frames/s, nvJPEG {1e3 * decode_s:.2f} ms a batch", flush=True)


def _spin(stop) -> None:
    """Python running until ``stop`` is set (a stand-in for the staging thread or a training loop)."""
    count = 0
    while not stop.is_set():
        count += 1


def check_one_by_one(flat, starts, widths, heights) -> None:
    """The JPEG header check as the loader ran it before: one header parse per image."""
    from arrayio.kdb import check_jpeg_header

    for slot, (start, end) in enumerate(zip(starts[:-1].tolist(), starts[1:].tolist())):
        check_jpeg_header(flat[start:end], int(widths[slot]), int(heights[slot]), f"image {slot}", start)


def standin_step(device, size: int):
    """The training stand-in: ``size`` fixed bf16 4096x4096 matmuls per batch on the consumer's stream."""
    import torch

    if not size:
        return lambda batch: None
    side = 4096 if device.type == "cuda" else 256
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    weight = torch.randn(side, side, device=device, dtype=dtype)
    state = torch.randn(side, side, device=device, dtype=dtype)
    for _ in range(size):  # cuBLAS set up before the loader starts: else its first batch gives the loader a lead
        state = torch.tanh(state @ weight)
    synchronize(device)

    def step(batch: dict) -> None:
        nonlocal state
        for _ in range(size):
            state = torch.tanh(state @ weight)
        for key in CAMERAS:  # the step reads the images: it must wait for their decode
            batch[f"image.{key}"].float().mean()
    return step


def loader_rate(dataset, device, workers: int, decode: str, batches: int, step,
                **options) -> tuple[float, str, dict]:
    """Frames/s of GpuLoader after its first batch, the consumer running ``step`` on each; its choice and stats."""
    import torch

    from arrayio.robot.torch_loader import GpuLoader

    loader = GpuLoader(dataset, batch_size=BATCH, num_workers=workers, device=device, decode=decode, shuffle=True,
                       drop_last=True, generator=torch.Generator().manual_seed(workers),
                       prefetch_factor=4 if workers else None, persistent_workers=False, **options)
    iterator = iter(loader)
    step(next(iterator))
    synchronize(device)
    first = dataclasses.replace(loader.stats)  # the timed batches' stats: the first one's startup left out
    started = time.perf_counter()
    count = 0
    for _ in range(batches):
        try:
            batch = next(iterator)
        except StopIteration:
            break
        step(batch)
        count += BATCH
    synchronize(device)
    elapsed = time.perf_counter() - started
    stats = {name: (getattr(loader.stats, name) - getattr(first, name)) / max(loader.stats.batches - first.batches, 1)
             for name in ("host_s", "issue_s", "decode_s", "starved_s")}
    del iterator
    return count / elapsed, str(loader.choice), stats


def measure_size(dataset, device, size: int, args, workers_list: list[int], data: str, rows: list[dict],
                 intervals: list[float | None]) -> None:
    """Add the rows of one image size to ``rows``: at each worker count, decode="gpu" plain and with the
    stand-in at each switch interval (best of ``--best-of``), decode="cpu", auto's choice, against the
    sustained nvJPEG ceiling read just before and just after that worker count's runs (the better of the two:
    the card's and host's state drift within a run)."""
    single = ceiling(dataset, device)
    batches = packed_batches(dataset, args.batches, seed=size)
    if device.type == "cuda" and hardware_decode(batches[0], device) is not None:
        from arrayio.robot import _nvjpeg_hardware

        library = _nvjpeg_hardware.hardware_decoder(device).lanes[0].library
        for lanes in sorted({1, 2, _nvjpeg_hardware.LANES, 8}):
            if lanes not in SWEEP_DECODERS:  # made once: each lane holds hardware decoder resources
                SWEEP_DECODERS[lanes] = _nvjpeg_hardware.HardwareDecoder(library, device, lanes)
            decoder = SWEEP_DECODERS[lanes]
            rate = _back_to_back(device, [hardware_decode(batch, device, decoder) for batch in batches])
            print(f"hardware decoder alone, {lanes} lane(s): {rate:,.0f} frames/s")
    ratios: dict[tuple, list[float]] = {(interval, name): [] for interval in intervals for name in ("plain", "step")}
    print(f"\n{size}x{size}: nvJPEG on one batch repeated (the earlier reading) {single:,.0f} frames/s")
    print(f"{'workers':>8} {'interval':>9} {'ceiling':>9} {'gpu':>9} {'ratio':>6} {'+step':>9} {'ratio':>6} "
          f"{'/single':>7} {'cpu':>9} {'host ms':>8} {'issue ms':>8} {'nvjpeg':>7} {'starved':>7}  auto")
    for workers in workers_list:
        # auto's sample timing first, while no other loader's workers are starting or exiting
        choice = loader_rate(dataset, device, workers, "auto", 1, standin_step(device, 0))[1]
        before = sustained_ceiling(batches, device)
        best = dict.fromkeys(ratios, 0.0)
        stats: dict = {}
        through_torchvision = 0.0
        for _ in range(args.best_of):
            if args.torchvision:
                with decoding_through_torchvision():
                    through_torchvision = max(through_torchvision, loader_rate(
                        dataset, device, workers, "gpu", args.batches, standin_step(device, 0))[0])
            for interval in intervals:
                options = {} if interval is None else {"switch_interval_s": interval or None}
                for name, size_of_step in (("plain", 0), ("step", args.standin)):
                    rate, _, run_stats = loader_rate(dataset, device, workers, "gpu", args.batches,
                                                     standin_step(device, size_of_step), **options)
                    if name == "plain" and rate > best[interval, name]:
                        stats[interval] = run_stats  # the stages of the best plain run, the one the row quotes
                    best[interval, name] = max(best[interval, name], rate)
        after = sustained_ceiling(batches, device)
        old_limit = max(before[0], after[0])  # nvJPEG through torchvision, the ceiling
        direct = [reading for reading in (before[1], after[1]) if reading is not None]
        limit = max([old_limit, *direct])  # the faster way of calling nvJPEG alone
        cpu, _, _ = loader_rate(dataset, device, workers, "cpu", args.batches, standin_step(device, 0))
        print(f"{workers:>8} ceilings: nvJPEG through torchvision {old_limit:,.0f}, hardware decoder called "
              f"directly {max(direct) if direct else float('nan'):,.0f} frames/s"
              + (f"; loader through torchvision {through_torchvision:,.0f} ({through_torchvision / limit:.2f})"
                 if args.torchvision else ""))
        for interval in intervals:
            plain, step, stage = best[interval, "plain"], best[interval, "step"], stats[interval]
            shown = "default" if interval is None else f"{interval * 1e3:g} ms" if interval else "none"
            print(f"{workers:>8} {shown:>9} {limit:>9,.0f} {plain:>9,.0f} {plain / limit:>6.2f} {step:>9,.0f} "
                  f"{step / limit:>6.2f} {plain / single:>7.2f} {cpu:>9,.0f} {1e3 * stage['host_s']:>8.2f} "
                  f"{1e3 * stage['issue_s']:>8.2f} {1e3 * stage['decode_s']:>7.2f} {1e3 * stage['starved_s']:>7.2f}"
                  f"  {choice}")
            suffix = "" if interval is None else f", switch interval {shown}"
            for name, rate in (("plain", plain), ("step", step)):
                ratios[interval, name].append(rate / limit)
                rows.append(_rows.row(AREA, f"{size}px, {workers} workers, GpuLoader decode=gpu{suffix}"
                                      + (", training stand-in" if name == "step" else ""), rate,
                                      limit=limit, limit_name="nvJPEG ceiling (sustained)", unit="frames/s",
                                      higher_is_better=True, target="ours / ceiling >= 0.9",
                                      note=f"one batch repeated: {single:,.0f} frames/s; nvJPEG through "
                                      f"torchvision {old_limit:,.0f} frames/s"))
        if args.torchvision:
            rows.append(_rows.row(AREA, f"{size}px, {workers} workers, GpuLoader decode=gpu through torchvision",
                                  through_torchvision, limit=limit, limit_name="nvJPEG ceiling (sustained)",
                                  unit="frames/s", higher_is_better=True))
        rows.append(_rows.row(AREA, f"{size}px, {workers} workers, GpuLoader decode=cpu", cpu, limit=limit,
                              limit_name="nvJPEG ceiling (sustained)", unit="frames/s", higher_is_better=True,
                              note=choice))
        _rows.write(args.json_path, AREA, data, rows)  # a run cut short by a lease still leaves its rows
    for (interval, name), found in ratios.items():
        shown = "" if interval is None else f" at switch interval {interval * 1e3:g} ms" if interval else " (none)"
        label = "GpuLoader decode=gpu" if name == "plain" else "with the stand-in"
        print(f"{label}{shown} / the sustained ceiling: {min(found):.2f}-{max(found):.2f}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=6144, help="frames per image size")
    parser.add_argument("--batches", type=int, default=12, help="batches timed per run")
    parser.add_argument("--standin", type=int, default=8, help="4096^2 bf16 matmuls per batch in the stand-in")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--best-of", type=int, default=3)
    parser.add_argument("--switch-intervals", default=None, metavar="S,S,...",
                        help="time decode=gpu at each GpuLoader(switch_interval_s=...) (0 stands for None)")
    parser.add_argument("--probe", action="store_true", help="only time the parts of one batch's decode")
    parser.add_argument("--contention", action="store_true",
                        help="only time the hardware decoder beside idle, fetching and busy processes")
    parser.add_argument("--handoffs", action="store_true",
                        help="only time the thread hand-offs of the hardware decoder's lanes (no GPU needed)")
    parser.add_argument("--workers", default=None, metavar="N,N,...", help="worker counts (default 0/4/8/cores-1)")
    parser.add_argument("--sizes", default="96,224", metavar="PX,PX", help="image sizes")
    parser.add_argument("--lanes", type=int, default=None, help="lanes of nvJPEG's hardware decoder (default 4)")
    parser.add_argument("--torchvision", action="store_true",
                        help="also time decode=gpu through torchvision's operator (the path before)")
    _rows.add_arguments(parser)
    args = parser.parse_args(argv)
    if args.handoffs:
        handoffs()
        return
    import torch

    from arrayio.robot import _nvjpeg_hardware

    _nvjpeg_hardware.LANES = args.lanes or _nvjpeg_hardware.LANES

    device = torch.device(args.device)
    cores = len(os.sched_getaffinity(0))
    workers_list = sorted({0, min(4, cores - 1), min(8, cores - 1), cores - 1})
    if args.workers:
        workers_list = [int(text) for text in args.workers.split(",")]
    if args.quick:
        args.frames, args.batches, args.best_of, workers_list = 1024, 2, 1, [0, min(2, cores - 1)]
    data = (f"2 JPEG cameras, batch {BATCH}, random frames, {args.frames} frames per size, {args.batches} batches "
            f"timed, best of {args.best_of}; stand-in {args.standin} bf16 4096^2 matmuls per batch; {cores} cores")
    if device.type == "cuda" and not torch.cuda.is_available():
        print("kdb_gpu: no CUDA GPU on this machine: nothing measured (run it on a GPU machine)")
        _rows.write(args.json_path, AREA, data + " (not measured: no GPU)", [])
        return
    torch.set_num_threads(1)
    print(f"{torch.cuda.get_device_name(device) if device.type == 'cuda' else 'CPU'}; {data}")
    from arrayio.robot.torch import FrameDataset

    intervals: list[float | None] = [None]  # None: the loader's default
    if args.switch_intervals:
        intervals = [float(text) for text in args.switch_intervals.split(",")]
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        if args.probe:
            for size in (96, 224):
                probe(FrameDataset(build(Path(scratch), size, 1024)), device)
            return
        if args.contention:
            for size in [int(text) for text in args.sizes.split(",")]:
                print(f"\n{size}x{size}, the hardware decoder in {_nvjpeg_hardware.LANES} lanes:")
                contention(FrameDataset(build(Path(scratch), size, args.frames)), device, workers_list[1:])
            return
        for size in [int(text) for text in args.sizes.split(",")]:
            dataset = FrameDataset(build(Path(scratch), size, args.frames))
            measure_size(dataset, device, size, args, workers_list, data, rows, intervals)
    _rows.write(args.json_path, AREA, data, rows)


if __name__ == "__main__":
    main()
