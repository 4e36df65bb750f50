"""Training from object storage (issue 21): FrameDataset over ``s3://bucket/shards/*.kdb`` on the loopback
S3 server (moto) against the same loader over the local files, 2 DataLoader workers, random frames across
every shard; requests and bytes per batch as the server counted them.

    python benchmarks/kdb_remote_training.py [--shards 4] [--episodes 8] [--frames 100] [--epochs 2]
                                             [--http-delay-ms MS] [--quick] [--json PATH]

The first epoch reads each episode once per worker (one request each, then the block cache answers); the
second is what later epochs cost. Goal: remote >= 0.8 of local frames/s. Each epoch is the best of
``--repeat`` runs with fresh workers, local and remote interleaved; CPU seconds of the workers and of this
process (where moto's server threads run) are printed beside them: on a 2-core machine moto's share is
what the cold epoch waits for. Each remote epoch runs twice: plain, and with each worker's next
``--batches-ahead`` batches (default: GpuLoader's, 2) read ahead (``ReadAheadSampler``). ``--http-delay-ms``
serves the shards over HTTP instead, each GET answered that late: what read-ahead is for. ``--mixture`` reads
the shards as a MixtureDataset of two robots (the first half of the shards and the second, weights 0.5
each) instead of one FrameDataset. ``--step-ms`` makes the consumer wait that long after each batch, as a
training step on a GPU would (the CPU free meanwhile): the time read-ahead has to hide a round trip in.
Each epoch is also timed past its first ``FIRST_BATCHES`` batches: a cold epoch's first batches each touch
most of the shards, so they wait while the server sends most of the set; what follows runs from the caches.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:] = [str(HERE.parent / "src"), str(HERE.parent / "tests" / "remote")] + [
    entry for entry in sys.path if Path(entry or ".").resolve() != HERE]
sys.path.append(str(HERE))

import _rows  # noqa: E402
from kdb import CAMERAS, POOL, synthetic_pool  # noqa: E402 - benchmarks/kdb.py, beside this file

from arrayio import kdb  # noqa: E402
from arrayio.kdb import EncodedImage  # noqa: E402
from arrayio.robot.torch_loader import BATCHES_AHEAD  # noqa: E402

AREA = "kdb-remote-training"
BUCKET = "arrayio-bench"
FIRST_BATCHES = 6  # three a worker: what a cold epoch's start waits on the server for (see the docstring)
Rates = tuple[float, float, float, float, float, float]


def write_shards(folder: Path, shards: int, episodes: int, frames: int, size: int) -> list[Path]:
    rng = np.random.default_rng(0)
    encoded, _ = synthetic_pool(size, rng)
    paths = []
    for shard in range(shards):
        path = folder / f"part-{shard:03d}.kdb"
        with kdb.Writer(path) as writer:
            for _ in range(episodes):
                picks = {camera: rng.integers(0, POOL, frames) for camera in CAMERAS}
                writer.add_episode(rng.standard_normal((frames, 14)).astype(np.float32),
                                   rng.standard_normal((frames, 7)).astype(np.float32), fps=20.0,
                                   images={camera: [EncodedImage(encoded[p], "jpeg", size, size, 3)
                                                    for p in picks[camera]] for camera in CAMERAS})
        paths.append(path)
    return paths


def epoch_rates(dataset, epochs: int, batch: int, counts=None, batches_ahead: int = 0,
                step_s: float = 0.0) -> list[Rates]:
    """(frames/s, requests per batch, bytes per batch, CPU seconds of this process (the moto server's
    threads live here), CPU seconds of the workers, frames/s past the first FIRST_BATCHES batches (NaN for an
    epoch of fewer than four times as many)) of each epoch of a shuffled 2-worker DataLoader
    whose workers live across epochs; ``batches_ahead`` > 0: its batches from a ReadAheadSampler reading that
    many ahead;
    ``step_s``: the consumer waits that long after each batch, as a training step on a GPU does."""
    import torch

    from arrayio.robot.torch import ReadAheadSampler, collate

    generator = torch.Generator().manual_seed(1)
    if batches_ahead:
        batches = torch.utils.data.BatchSampler(torch.utils.data.RandomSampler(dataset, generator=generator), batch,
                                                drop_last=True)
        loader = torch.utils.data.DataLoader(dataset, batch_sampler=ReadAheadSampler(batches, 2, batches_ahead),
                                             num_workers=2, collate_fn=collate, persistent_workers=True)
    else:
        loader = torch.utils.data.DataLoader(dataset, batch_size=batch, shuffle=True, num_workers=2,
                                             collate_fn=collate, persistent_workers=True, drop_last=True,
                                             generator=generator)
    results = []
    workers: list[int] = []
    for _ in range(epochs):
        if counts is not None:
            counts.reset()
        started = time.perf_counter()
        main_cpu = _rows.cpu_seconds(os.getpid())
        worker_cpu = sum(_rows.cpu_seconds(pid) for pid in workers)  # 0 before the workers start
        batches = frames = 0
        first_part = (started, 0)
        for got in loader:
            batches += 1
            # A batch of frames names each; a batch of whole episodes (one, collated) holds (1, frames, ...) steps.
            frames += len(got["index"]) if "index" in got else int(np.prod(got["states"].shape[:2]))
            if batches == FIRST_BATCHES:
                first_part = (time.perf_counter(), frames)
            if step_s:
                time.sleep(step_s)  # the CPU is free meanwhile, as while a GPU runs the step
            if not workers:
                workers = [worker.pid for worker in loader._iterator._workers]  # persistent: the same next epoch
        ended = time.perf_counter()
        elapsed = ended - started
        requests, sent = counts.total() if counts is not None else (0, 0)
        results.append((frames / elapsed, requests / batches, sent / batches,
                        _rows.cpu_seconds(os.getpid()) - main_cpu,
                        sum(_rows.cpu_seconds(pid) for pid in workers) - worker_cpu,
                        (frames - first_part[1]) / (ended - first_part[0]) if batches >= 4 * FIRST_BATCHES
                        else float("nan")))
    return results


def training_set(shards: Any, options: dict | None, mixture: bool, whole_episodes: bool = False) -> Any:
    """A FrameDataset over ``shards`` (a glob or a list), or with ``mixture`` a MixtureDataset of two halves, or
    with ``whole_episodes`` an EpisodeDataset."""
    from arrayio.robot.torch import EpisodeDataset, FrameDataset, MixtureDataset

    if whole_episodes:
        return EpisodeDataset(shards, storage_options=options, image_format="uint8")
    if not mixture:
        return FrameDataset(shards, storage_options=options, image_format="uint8")
    half = len(shards) // 2
    return MixtureDataset([(FrameDataset(part, storage_options=options, image_format="uint8"), 0.5)
                           for part in (shards[:half], shards[half:])], seed=0)


def best_epochs(kept: list, measured: list) -> list:
    """Epoch by epoch, the faster of two runs' figures."""
    return [max(pair, key=lambda figures: figures[0]) for pair in zip(kept, measured)] if kept else measured


SERVE_DELAYED = """
import sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from remote_servers import RangeServer
server = RangeServer()
server.delay = float(sys.argv[2])
for path in sys.argv[3:]:
    server.put(f"shards/{Path(path).name}", Path(path).read_bytes())
server.start()
print(server.url, flush=True)
sys.stdin.read()
server.stop()
"""


class DelayedHttp:
    """The tests' HTTP range server in another process, each GET answered ``delay_ms`` late (as an object store
    a round trip away), serving ``paths``; its counts stay in its own process."""

    counts = None
    options = None

    def __init__(self, delay_ms: float, paths: list[Path]) -> None:
        self.process = subprocess.Popen([sys.executable, "-c", SERVE_DELAYED, str(HERE.parent / "tests" / "remote"),
                                         str(delay_ms / 1e3), *map(str, paths)], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True)
        base = self.process.stdout.readline().strip()
        self.urls = self.shard_urls = [f"{base}/shards/{path.name}" for path in paths]

    def stop(self) -> None:
        self.process.stdin.close()
        self.process.wait(timeout=60)


class Moto:
    """moto on loopback in this process, holding ``paths`` in a bucket; its counts are the server's own."""

    def __init__(self, paths: list[Path]) -> None:
        for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                           "AWS_DEFAULT_REGION": "us-east-1"}.items():
            os.environ.setdefault(key, value)
        import boto3
        from remote_servers import CountingMotoServer

        self.server = CountingMotoServer()
        self.server.start()
        self.counts = self.server.counts
        client = boto3.client("s3", endpoint_url=self.server.endpoint, region_name="us-east-1")
        client.create_bucket(Bucket=BUCKET)
        for path in paths:
            client.put_object(Bucket=BUCKET, Key=f"shards/{path.name}", Body=path.read_bytes())
        self.urls = f"s3://{BUCKET}/shards/*.kdb"  # listed through fsspec, as users name their shards
        self.shard_urls = [f"s3://{BUCKET}/shards/{path.name}" for path in paths]
        self.options = {"key": "testing", "secret": "testing",
                        "client_kwargs": {"endpoint_url": self.server.endpoint, "region_name": "us-east-1"}}

    def stop(self) -> None:
        self.server.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--episodes", type=int, default=8, help="episodes per shard")
    parser.add_argument("--frames", type=int, default=100, help="frames per episode")
    parser.add_argument("--size", type=int, default=96)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3, help="runs of every epoch, each with fresh workers; "
                        "the best kept")
    parser.add_argument("--http-delay-ms", type=float, default=None, metavar="MS",
                        help="serve the shards over HTTP (the tests' range server, in another process), each GET "
                             "answered after MS milliseconds, as an object store a round trip away; default: moto")
    parser.add_argument("--mixture", action="store_true", help="a MixtureDataset of two halves of the shards")
    parser.add_argument("--whole-episodes", action="store_true",
                        help="an EpisodeDataset, one whole episode a batch (frames/s counts its frames)")
    parser.add_argument("--step-ms", type=float, default=0.0, metavar="MS",
                        help="a training step stand-in: the consumer sleeps MS ms after each batch (default 0)")
    parser.add_argument("--batches-ahead", type=int, default=BATCHES_AHEAD, metavar="N",
                        help="batches each worker reads ahead in the read-ahead runs (default: GpuLoader's)")
    _rows.add_arguments(parser)
    args = parser.parse_args(argv)
    if args.quick:
        args.shards, args.episodes, args.frames, args.repeat = 2, 4, 64, 1
    if not 0 <= args.step_ms < 10_000:
        parser.error(f"--step-ms must be in 0..10000, got {args.step_ms:g}")
    if args.batches_ahead < 1:
        parser.error(f"--batches-ahead must be at least 1, got {args.batches_ahead}")
    if args.whole_episodes and args.mixture:
        parser.error("--whole-episodes reads one set of shards, not a mixture")
    if args.whole_episodes:
        args.batch = 1
    if args.mixture and args.shards < 2:
        parser.error("--mixture needs at least 2 shards (one for each robot)")

    served = "moto on loopback (in this process)" if args.http_delay_ms is None else \
        f"HTTP on loopback (another process), each GET answered after {args.http_delay_ms:g} ms"
    data = (f"{args.shards} shards x {args.episodes} episodes x {args.frames} frames, 2 JPEG cameras "
            f"{args.size}x{args.size}, batch {args.batch}, 2 workers, {args.epochs} epochs, best of {args.repeat}, "
            f"{served}{', a mixture of two halves' if args.mixture else ''}"
            f"{', whole episodes (EpisodeDataset)' if args.whole_episodes else ''}"
            f"{f', a {args.step_ms:g} ms step stand-in per batch' if args.step_ms else ''}; "
            f"load average {os.getloadavg()[0]:.1f} at the start")
    with tempfile.TemporaryDirectory() as scratch:
        paths = write_shards(Path(scratch), args.shards, args.episodes, args.frames, args.size)
        total = sum(path.stat().st_size for path in paths)
        server = Moto(paths) if args.http_delay_ms is None else DelayedHttp(args.http_delay_ms, paths)
        try:
            local: list[Rates] = []
            remote: dict[int, list[Rates]] = {0: [], args.batches_ahead: []}
            for _ in range(args.repeat):  # interleaved, each with fresh workers (a cold first epoch); best kept
                local = best_epochs(local, epoch_rates(training_set(paths, None, args.mixture, args.whole_episodes),
                                                       args.epochs,
                                                       args.batch, step_s=args.step_ms / 1e3))
                for batches_ahead in (0, args.batches_ahead):
                    remote_dataset = training_set(server.shard_urls if args.mixture else server.urls, server.options,
                                                  args.mixture, args.whole_episodes)
                    remote[batches_ahead] = best_epochs(remote[batches_ahead], epoch_rates(
                        remote_dataset, args.epochs, args.batch, server.counts, batches_ahead=batches_ahead,
                        step_s=args.step_ms / 1e3))
        finally:
            server.stop()
    print(data)
    rows = []
    cores = len(os.sched_getaffinity(0))
    epoch_frames = args.shards * args.episodes * args.frames // args.batch * args.batch  # drop_last
    where = ("s3" if args.http_delay_ms is None else f"http ({args.http_delay_ms:g} ms a GET)") + \
        (", a mixture of two halves" if args.mixture else "") + \
        (f", {args.step_ms:g} ms step" if args.step_ms else "") + \
        (", whole episodes" if args.whole_episodes else "")
    for batches_ahead, label in ((0, ""), (args.batches_ahead, f", next {args.batches_ahead} batch(es) read ahead")):
        for epoch, (mine, theirs) in enumerate(zip(remote[batches_ahead], local)):
            remote_rate, requests, sent, server_cpu, worker_cpu, remote_later = mine
            local_rate, _, _, main_cpu, local_worker_cpu, local_later = theirs
            counted = "requests not counted (the server's own process)" if server.counts is None else \
                f"per batch {requests:.1f} requests, {sent / 1e6:.2f} MB"
            later = "" if local_later != local_later else (  # NaN: too short an epoch to split
                f"\n  past its first {FIRST_BATCHES} batches: local {local_later:,.0f}, remote {remote_later:,.0f} "
                f"frames/s ({remote_later / local_later:.2f})")
            print(f"epoch {epoch + 1}{label}: local {local_rate:,.0f} frames/s, remote {remote_rate:,.0f} frames/s "
                  f"({remote_rate / local_rate:.2f} of local; goal >= 0.8); {counted} (shards {total / 1e6:.1f} MB "
                  f"in all){later}\n  CPU seconds: workers {local_worker_cpu:.2f} local, {worker_cpu:.2f} remote; "
                  f"main process {main_cpu:.2f} local, {server_cpu:.2f} remote (with moto, its threads run there)")
            # The physical limit on this machine: both epochs keep every core busy, so the remote one can go no
            # faster than its CPU-seconds allow; moto's share (the main process's excess) is what S3 would spend
            # on other machines.
            local_cpu, remote_cpu = main_cpu + local_worker_cpu, server_cpu + worker_cpu
            moto_cpu = max(0.0, server_cpu - main_cpu) if server.counts is not None else 0.0
            ceiling = epoch_frames * cores / remote_cpu if remote_cpu else None
            if ceiling:
                print(f"  CPU-bound on {cores} cores: the remote epoch's {remote_cpu:.2f} CPU-s allow at most "
                      f"{ceiling:,.0f} frames/s ({remote_rate / ceiling:.2f} of it reached); local CPU / remote CPU "
                      f"= {local_cpu / remote_cpu:.2f}" + (f", {local_cpu / (remote_cpu - moto_cpu):.2f} without "
                                                           f"moto's {moto_cpu:.2f} (S3 serves from other machines)"
                                                           if moto_cpu else ""))
            rows.append(_rows.row(AREA, f"epoch {epoch + 1}, 2 workers, {where} vs local files{label}", remote_rate,
                                  reference=local_rate, reference_name="same loader on local files",
                                  limit=ceiling, limit_name=f"CPU-bound: the epoch's CPU-s on {cores} cores",
                                  unit="frames/s", higher_is_better=True, target="s3 / local >= 0.8",
                                  note=counted))
    _rows.write(args.json_path, AREA, data, rows)


if __name__ == "__main__":
    main()
