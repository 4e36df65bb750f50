"""What handing batches from DataLoader workers to the main process costs (issue 21): the CPU of a shared
storage passed through torch's multiprocessing queue, and a 2-worker FrameDataset DataLoader with the main
process taking each batch's indices only ("plain") or also reading its images ("touch"), as a training
step does; reuse_shared_memory on (kept blocks, passed as tokens) and off (a fresh block a batch).

    python benchmarks/kdb_handoff.py [--size 224] [--episodes 8] [--frames 100] [--batches 60] [--repeat 3]
                                     [--file PATH.kdb] [--quick] [--json PATH]

For a before/after figure, run it twice, with ``PYTHONPATH=<an older checkout>/src`` the second time.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:] = [str(HERE.parent / "src")] + [entry for entry in sys.path if Path(entry or ".").resolve() != HERE]
sys.path.append(str(HERE))

import _rows  # noqa: E402
from kdb import CAMERAS, POOL, synthetic_pool  # noqa: E402 - benchmarks/kdb.py, beside this file

AREA = "kdb-handoff"


def _send(queue, done, storages: int, messages: int) -> None:
    import torch

    blocks = [torch.empty(1000, dtype=torch.float32).share_memory_() for _ in range(storages)]
    for number in range(messages):
        queue.put((number, blocks))
    queue.put(None)
    done.wait()  # the resource sharer answers until the main process has every descriptor


def descriptor_cost(storages: int, messages: int) -> tuple[float, float]:
    """(main, worker) CPU seconds per message carrying ``storages`` shared storages."""
    import torch.multiprocessing as multiprocessing

    context = multiprocessing.get_context("fork")
    queue, done = context.Queue(), context.Event()
    process = context.Process(target=_send, args=(queue, done, storages, messages))
    before = _rows.cpu_seconds(os.getpid())
    process.start()
    while queue.get() is not None:
        pass
    main, worker = _rows.cpu_seconds(os.getpid()) - before, _rows.cpu_seconds(process.pid)
    done.set()
    process.join()
    return main / messages, worker / messages


def loader_rate(path: Path, batches: int, touch: bool, reuse: bool) -> float:
    """Frames/s of a 2-worker DataLoader over ``path`` (batch 32, shuffled); ``touch``: the main process sums
    every image of each batch."""
    import torch

    from arrayio.robot.torch import FrameDataset

    dataset = FrameDataset(path, reuse_shared_memory=reuse)
    loader = torch.utils.data.DataLoader(dataset, batch_size=32, shuffle=True, num_workers=2,
                                         generator=torch.Generator().manual_seed(2))
    iterator = iter(loader)
    next(iterator)
    started, count = time.perf_counter(), 0
    for _ in range(min(batches, len(loader) - 1)):
        batch = next(iterator)
        count += len(batch["index"])
        if touch:
            for key, value in batch.items():
                if key.startswith("image."):
                    value.sum()
    return count / (time.perf_counter() - started)


def write_file(folder: Path, episodes: int, frames: int, size: int) -> Path:
    """Episodes of JPEG frames (2 cameras) at ``size`` px."""
    from arrayio import kdb

    rng = np.random.default_rng(0)
    encoded, _ = synthetic_pool(size, rng)
    path = folder / f"handoff-{size}.kdb"
    with kdb.Writer(path) as writer:
        for _ in range(episodes):
            writer.add_episode(rng.standard_normal((frames, 14)).astype(np.float32),
                               rng.standard_normal((frames, 7)).astype(np.float32), fps=20.0,
                               images={camera: [kdb.EncodedImage(encoded[pick], "jpeg", size, size, 3)
                                                for pick in rng.integers(0, POOL, frames)] for camera in CAMERAS})
    return path


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--episodes", type=int, default=8)
    parser.add_argument("--frames", type=int, default=100)
    parser.add_argument("--batches", type=int, default=60)
    parser.add_argument("--repeat", type=int, default=3, help="runs of each DataLoader case, interleaved; best kept")
    parser.add_argument("--file", type=Path, default=None, help="a .kdb file to read instead of a synthetic one")
    _rows.add_arguments(parser)
    args = parser.parse_args(argv)
    if args.quick:
        args.size, args.episodes, args.frames, args.batches, args.repeat = 96, 4, 40, 8, 1
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    rows = []
    costs = {storages: descriptor_cost(storages, 50 if args.quick else 400) for storages in (0, 1, 2)}
    print("torch multiprocessing queue, CPU per message (main / worker):")
    for storages, (main, worker) in costs.items():
        print(f"  {storages} shared storages: {main * 1e6:6.0f} / {worker * 1e6:6.0f} us")
    per_descriptor = (sum(costs[2]) - sum(costs[0])) / 2
    rows.append(_rows.row(AREA, "CPU of one shared storage in a queued message, both processes", per_descriptor,
                          note=f"main {costs[1][0] * 1e6:.0f} us, worker {costs[1][1] * 1e6:.0f} us"))
    with tempfile.TemporaryDirectory() as folder:
        path = args.file or write_file(Path(folder), args.episodes, args.frames, args.size)
        rates: dict[tuple[bool, bool], float] = {}
        for _ in range(args.repeat):
            for touch in (False, True):
                for reuse in (True, False):
                    rate = loader_rate(path, args.batches, touch, reuse)
                    rates[touch, reuse] = max(rates.get((touch, reuse), 0.0), rate)
    data = (f"{path.name if args.file else f'{args.episodes} x {args.frames} frames, 2 JPEG cameras {args.size} px'}; "
            f"DataLoader batch 32, 2 workers, {args.batches} batches, best of {args.repeat}")
    print(data)
    for touch in (False, True):
        mode = "touch" if touch else "plain"
        kept, fresh = rates[touch, True], rates[touch, False]
        print(f"  {mode}: kept blocks {kept:8,.0f} frames/s   a fresh block a batch {fresh:8,.0f}")
        rows.append(_rows.row(AREA, f"DataLoader, {mode}", kept, reference=fresh,
                              reference_name="reuse_shared_memory=False", unit="frames/s", higher_is_better=True))
    _rows.write(args.json_path, AREA, data, rows)


if __name__ == "__main__":
    main()
