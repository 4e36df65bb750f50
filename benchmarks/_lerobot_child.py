"""The LeRobot side of benchmarks/lerobot_vs_kdb.py, run by the Python of lerobot's own venv
(lerobot 0.6 needs Python 3.12; arrayio is not imported here).

    python _lerobot_child.py write FOLDER --episodes 20 --frames 150 --size 224 --fps 30 [--lengths 37,60,23]
        [--wrist 48]
    python _lerobot_child.py read FOLDER --backend pyav --samples 300 --batches 12 --batch 32 --workers 2 \
        [--device cuda] [--warmup 1]
    python _lerobot_child.py dump FOLDER --backend pyav --out ITEMS.npz

``write`` builds the dataset with lerobot's own writer (LeRobotDataset.create, add_frame,
save_episode, finalize: AV1 video); ``read`` prints one JSON line: random-frame __getitem__ and
DataLoader frames/s of LeRobotDataset with the given video backend, and a checksum of the
first sampled frame so the parent can check that both libraries return the same pixels; ``dump`` saves
every item of a dataset (an export of ours, see _lerobot_export.py) for the parent to compare.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

CAMERA = "observation.images.front"
WRIST = "observation.images.wrist"
STATE_DIM, ACTION_DIM = 14, 7


def frame_pixels(size: int, episode: int, frame: int) -> np.ndarray:
    """A camera-like frame (smooth colours and a moving disc) that changes a little from frame to frame."""
    y, x = np.mgrid[0:size, 0:size] / size
    phase = (episode * 0.37 + frame / 40.0) * 2 * np.pi
    picture = np.stack([128 + 90 * np.sin(3 * x + phase), 128 + 90 * np.cos(2 * y - phase),
                        128 + 60 * np.sin(4 * (x + y) + 2 * phase)], axis=-1)
    cx, cy = 0.5 + 0.3 * np.cos(phase), 0.5 + 0.3 * np.sin(phase)
    picture[(x - cx) ** 2 + (y - cy) ** 2 < 0.01] = (240, 40, 40)
    return np.clip(picture, 0, 255).astype(np.uint8)


def write(folder: Path, lengths: list[int], size: int, fps: int, wrist: int = 0) -> None:
    """Episodes of ``lengths`` frames with lerobot's own writer; ``wrist``: a second camera of that size."""
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    features = {
        "observation.state": {"dtype": "float32", "shape": (STATE_DIM,), "names": None},
        "action": {"dtype": "float32", "shape": (ACTION_DIM,), "names": None},
        CAMERA: {"dtype": "video", "shape": (size, size, 3), "names": ["height", "width", "channels"]},
    }
    if wrist:
        features[WRIST] = {"dtype": "video", "shape": (wrist, wrist, 3), "names": ["height", "width", "channels"]}
    dataset = LeRobotDataset.create("arrayio/bench", fps=fps, features=features, root=folder, use_videos=True)
    rng = np.random.default_rng(0)
    for episode, frames in enumerate(lengths):
        for frame in range(frames):
            values = {"observation.state": rng.random(STATE_DIM, dtype=np.float32),
                      "action": rng.random(ACTION_DIM, dtype=np.float32),
                      CAMERA: frame_pixels(size, episode, frame), "task": f"task {episode % 3}"}
            if wrist:
                values[WRIST] = frame_pixels(wrist, episode + 7, frame)
            dataset.add_frame(values)
        dataset.save_episode()
    dataset.finalize()


def read(folder: Path, backend: str, samples: int, batches: int, batch: int, workers: int,
         device: str = "cpu", warmup: int = 1) -> dict:
    import torch
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    dataset = LeRobotDataset("arrayio/bench", root=folder, video_backend=backend)
    rng = np.random.default_rng(1)
    items = rng.integers(0, len(dataset), samples).tolist()
    first = dataset[items[0]]  # opens the decoders once, as a training run would
    started, cpu = time.perf_counter(), time.process_time()
    for item in items:
        dataset[item]
    elapsed = time.perf_counter() - started
    random_rate, random_cores = samples / elapsed, (time.process_time() - cpu) / elapsed
    # torchcodec's decoders, which lerobot caches per file, do not survive a fork: DataLoader workers forked
    # with the random reads' decoders in the cache fail ("Could not push packet to decoder"). A clear cache
    # lets each worker open its own, as a careful user would.
    from lerobot.datasets import video_utils

    cache = getattr(video_utils, "_default_decoder_cache", None)
    if cache is not None:
        cache.clear()
    on_device = device != "cpu"  # the camera's float batch copied there from pinned memory, as training does
    loader = torch.utils.data.DataLoader(dataset, batch_size=batch, shuffle=True, num_workers=workers,
                                         generator=torch.Generator().manual_seed(2), pin_memory=on_device)
    iterator = iter(loader)
    for _ in range(warmup):  # workers started and warm, and as many batches ahead as they keep in steady state
        next(iterator)
    started = time.perf_counter()
    count = 0
    for _ in range(batches):
        found = next(iterator)
        if on_device:
            found[CAMERA].to(device, non_blocking=True)
        count += len(found["index"])
    if on_device:
        torch.cuda.synchronize()
    loader_rate = count / (time.perf_counter() - started)
    image = first[CAMERA]
    return {"backend": backend, "random": random_rate, "random_cores": random_cores, "loader": loader_rate,
            "item": int(items[0]), "image_dtype": str(image.dtype), "image_shape": list(image.shape),
            "image_sum": float(image.double().sum())}


def dump(folder: Path, backend: str, out: Path) -> None:
    """Every item of the dataset in ``folder`` as LeRobotDataset gives it (``backend``: its video backend,
    "(images)" for a dataset without videos), saved to ``out`` (.npz; each camera's images as uint8
    H x W x C in ``images_<camera>``)."""
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    options = {} if backend == "(images)" else {"video_backend": backend}
    dataset = LeRobotDataset("arrayio/export", root=folder, **options)
    names = [name for name in ("observation.state", "action", "timestamp", "episode_index", "frame_index",
                               "index", "next.reward") if name in dataset.meta.features]
    cameras = [key for key in dataset.meta.features if key.startswith("observation.images.")]
    columns: dict[str, list] = {name: [] for name in names}
    images: dict[str, list] = {key: [] for key in cameras}
    tasks = []
    for item in range(len(dataset)):
        found = dataset[item]
        for name in names:
            columns[name].append(np.asarray(found[name]))
        for key in cameras:
            images[key].append(np.round(np.asarray(found[key]).transpose(1, 2, 0) * 255).astype(np.uint8))
        tasks.append(found["task"])
    np.savez(out, tasks=np.array(tasks), **{f"images_{key.rsplit('.', 1)[-1]}": np.stack(value)
                                           for key, value in images.items()},
             **{name.replace(".", "_"): np.stack(values) for name, values in columns.items()})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["write", "read", "dump"])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--frames", type=int, default=150)
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--fps", type=int, default=30)
    parser.add_argument("--backend", default="pyav")
    parser.add_argument("--samples", type=int, default=300)
    parser.add_argument("--batches", type=int, default=12)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--out", type=Path, help="dump: the .npz written")
    parser.add_argument("--lengths", default="", help="write: frames of each episode (L1,L2,...) instead of "
                        "--episodes x --frames")
    parser.add_argument("--wrist", type=int, default=0, help="write: add a WRIST x WRIST second camera")
    args = parser.parse_args()
    if args.command == "write":
        lengths = [int(length) for length in args.lengths.split(",")] if args.lengths else \
            [args.frames] * args.episodes
        write(args.folder, lengths, args.size, args.fps, args.wrist)
    elif args.command == "dump":
        dump(args.folder, args.backend, args.out)
    else:
        print(json.dumps(read(args.folder, args.backend, args.samples, args.batches, args.batch, args.workers,
                              args.device, args.warmup)))


if __name__ == "__main__":
    main()
