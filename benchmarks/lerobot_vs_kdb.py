"""LeRobotDataset against FrameDataset on the same episodes (issue 21): random-frame __getitem__ and
a 2-worker DataLoader, the same float (C, H, W) output in [0, 1] on both sides.

    python benchmarks/lerobot_vs_kdb.py [--episodes 20] [--frames 150] [--size 224] [--samples 600]
                                        [--batches 80] [--batch 32] [--workers 2] [--warmup 5] [--quick]
                                        [--device cuda] [--lerobot-python PY] [--storages jpeg] [--no-export-check]
                                        [--json PATH]

The episodes are written by ``lerobot`` itself (LeRobotDataset.create / add_frame / save_episode:
a v3.0 dataset with AV1 video) in its own virtual environment, which this script makes the
first time (Python 3.12 for lerobot 0.6: ``--python``; ``pip install "lerobot[dataset]==0.6.1"``
downloads torch with its CUDA libraries, about 5 GB, once; ``--venv`` says where, default
``~/.cache/arrayio-bench/lerobot-venv``). The same folder is ingested with ``ingest-lerobot``
into one .kdb file (JPEG quality 90, the headline) and, as the storage choice ``--compress none``,
into one with raw pixels (file sizes printed). LeRobotDataset is timed with its default video
backend, with ``pyav``, and with ``torchcodec`` where it loads; FrameDataset in this process. Each side
runs twice, interleaved (ours, theirs, ours, theirs), and keeps its better run. Then episodes of different
lengths cut from the .kdb file are exported with ``export-lerobot`` (AV1, H.264, PNG) and loaded by
LeRobotDataset with each backend; every item is compared with its source (exit status 1 on a mismatch).
``--quick``: 2 episodes of 60 frames at 96 px, and only when the venv already exists.

On a GPU machine (``--device cuda``) the DataLoader case puts both sides' batches on the device:
FrameDataset through ``GpuLoader`` (``--decode``, "auto" by default), LeRobotDataset's batches copied
there from pinned memory; ``--lerobot-python`` names a Python that imports lerobot and av (wheels
installed beside the machine's own torch) where no venv can be made, ``--storages jpeg`` skips the
raw-pixel file. Where the system has no FFmpeg for torchcodec (a bare GPU image), symbolic links to the
FFmpeg libraries PyAV's wheel bundles (``av.libs/libavutil-*.so.59`` as ``libavutil.so.59``, and so on
for avcodec, avformat, avdevice, avfilter, swscale, swresample) in a folder on ``LD_LIBRARY_PATH`` let
it load.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))

import _rows  # noqa: E402

AREA = "lerobot"
CAMERA = "observation.images.front"
LEROBOT = "lerobot[dataset]==0.6.1"
DEFAULT_VENV = Path.home() / ".cache" / "arrayio-bench" / "lerobot-venv"
DEFAULT_PYTHON = "/root/.pyenv/versions/3.12.1/bin/python"


def venv_python(venv: Path, python: str, create: bool) -> Path | None:
    """The Python of the lerobot venv, made (and lerobot installed) when missing and ``create``."""
    binary = venv / "bin" / "python"
    check = [str(binary), "-c", "import lerobot.datasets.lerobot_dataset, av"]
    if binary.exists() and subprocess.run(check, capture_output=True).returncode == 0:
        return binary
    if not create:
        return None
    print(f"making {venv} and installing {LEROBOT} (downloads torch: minutes, about 5 GB once)", flush=True)
    subprocess.run([python, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(binary), "-m", "pip", "install", "-q", LEROBOT], check=True)
    return binary


def child(python: Path, *args: str) -> str:
    """Run benchmarks/_lerobot_child.py in the lerobot venv; its stdout (stderr only on failure)."""
    result = subprocess.run([str(python), str(HERE / "_lerobot_child.py"), *args], capture_output=True, text=True,
                            env={**os.environ, "HF_HUB_OFFLINE": "1"})
    if result.returncode:
        raise RuntimeError(result.stderr.strip().splitlines()[-1] if result.stderr.strip() else "failed")
    return result.stdout


def build(python: Path, folder: Path, args: argparse.Namespace) -> tuple[Path, dict[str, Path], float]:
    """The lerobot dataset (written once per size) and its .kdb files by image storage ("jpeg": JPEG q90,
    the default; "raw": ``--compress none``); seconds the JPEG ingest took."""
    from arrayio.robot.lerobot import ingest_lerobot

    name = f"lerobot-e{args.episodes}-f{args.frames}-s{args.size}"
    dataset = folder / name
    if not (dataset / "meta" / "info.json").exists():
        started = time.perf_counter()
        child(python, "write", str(dataset), "--episodes", str(args.episodes), "--frames", str(args.frames),
              "--size", str(args.size))
        print(f"lerobot wrote {args.episodes} x {args.frames} frames in {time.perf_counter() - started:.0f} s")
    targets = {"jpeg": folder / f"{name}.kdb", "raw": folder / f"{name}-raw.kdb"}
    started = time.perf_counter()
    if not targets["jpeg"].exists():
        ingest_lerobot(dataset, targets["jpeg"])
    took = time.perf_counter() - started
    if "raw" in args.storages and not targets["raw"].exists():
        ingest_lerobot(dataset, targets["raw"], compress=None)
    return dataset, targets, took


def folder_bytes(path: Path) -> int:
    """Bytes of a file, or of every file under a folder."""
    return path.stat().st_size if path.is_file() else sum(item.stat().st_size for item in path.rglob("*")
                                                          if item.is_file())


def lerobot_rates(python: Path, dataset: Path, backend: str, args: argparse.Namespace) -> dict:
    """LeRobotDataset's rates with ``backend`` (or {"error": why})."""
    try:
        out = child(python, "read", str(dataset), "--backend", backend, "--samples", str(args.samples),
                    "--batches", str(args.batches), "--batch", str(args.batch), "--workers", str(args.workers),
                    "--device", args.device, "--warmup", str(args.warmup))
    except RuntimeError as error:
        return {"backend": backend, "error": str(error)}
    return json.loads(out.strip().splitlines()[-1])


def keep_better(rates: dict, again: dict) -> None:
    """Keep in ``rates`` the higher of its and ``again``'s random and DataLoader frames/s (a run that failed
    keeps what the other found)."""
    if "error" in rates:
        rates.clear()
        rates.update(again)
        return
    for key in ("random", "loader"):
        if "error" not in again and rates.get(key) is not None and again.get(key) is not None \
                and again[key] > rates[key]:
            rates[key] = again[key]
            if key == "random":  # the cores that run kept
                rates["random_cores"] = again.get("random_cores")


def default_backend(python: Path) -> str:
    """The backend LeRobotDataset picks when none is given."""
    code = ("from lerobot.datasets.video_utils import get_safe_default_video_backend as f; print(f())")
    result = subprocess.run([str(python), "-c", code], capture_output=True, text=True)
    return result.stdout.strip() or "pyav"


def gpu_loader_rate(dataset, args: argparse.Namespace) -> tuple[float, str]:
    """Frames/s of GpuLoader's float batches on ``args.device`` after ``args.warmup`` batches; its decode choice."""
    import torch

    from arrayio.robot.torch_loader import GpuLoader

    loader = GpuLoader(dataset, batch_size=args.batch, num_workers=args.workers, device=args.device,
                       decode=args.decode, shuffle=True, drop_last=True, generator=torch.Generator().manual_seed(2))
    iterator = iter(loader)
    for _ in range(args.warmup):
        next(iterator)
    torch.cuda.synchronize()
    started = time.perf_counter()
    count = sum(len(next(iterator)["index"]) for _ in range(args.batches))
    torch.cuda.synchronize()
    rate = count / (time.perf_counter() - started)
    del iterator
    return rate, str(loader.choice)


def frame_rates(path: Path, args: argparse.Namespace, reuse: bool = True) -> dict:
    """FrameDataset's rates, float output, the same sampling as the lerobot child (``reuse``: its
    ``reuse_shared_memory`` option, on by default; on a GPU the DataLoader case runs through GpuLoader)."""
    import torch

    from arrayio.robot.torch import FrameDataset

    dataset = FrameDataset(path, reuse_shared_memory=reuse)
    rng = np.random.default_rng(1)
    items = rng.integers(0, len(dataset), args.samples).tolist()
    first = dataset[items[0]]
    random_rate = random_cores = None  # the option changes nothing for random reads: the DataLoader only
    if reuse:
        started, cpu = time.perf_counter(), time.process_time()
        for item in items:
            dataset[item]
        elapsed = time.perf_counter() - started
        random_rate, random_cores = args.samples / elapsed, (time.process_time() - cpu) / elapsed
    image = first[f"image.{CAMERA.rsplit('.', 1)[-1]}"]
    found = {"item": int(items[0]), "image_dtype": str(image.dtype), "image_shape": list(image.shape),
             "image_sum": float(image.double().sum()), "random": random_rate, "random_cores": random_cores}
    if args.device != "cpu":
        found["loader"], found["choice"] = gpu_loader_rate(dataset, args)
        return found
    loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch, shuffle=True, num_workers=args.workers,
                                         generator=torch.Generator().manual_seed(2))
    iterator = iter(loader)
    for _ in range(args.warmup):
        next(iterator)
    started = time.perf_counter()
    count = sum(len(next(iterator)["index"]) for _ in range(args.batches))
    found["loader"] = count / (time.perf_counter() - started)
    return found


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--frames", type=int, default=150)
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--samples", type=int, default=600, help="random frames read one by one")
    parser.add_argument("--batches", type=int, default=80, help="DataLoader batches timed (with --warmup, at "
                        "most an epoch's)")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=None, help="DataLoader batches taken before the timing "
                        "(default 2 x workers + 1: only steady-state batches are timed)")
    parser.add_argument("--venv", type=Path, default=Path(os.environ.get("ARRAYIO_LEROBOT_VENV", DEFAULT_VENV)))
    parser.add_argument("--python", default=DEFAULT_PYTHON, help="the Python 3.12 that makes the venv")
    parser.add_argument("--folder", type=Path, default=None, help="where the datasets are kept (default: beside "
                        "the venv)")
    parser.add_argument("--lerobot-python", type=Path, default=None,
                        help="a Python that imports lerobot and av, used instead of the venv")
    parser.add_argument("--device", default="cpu", help="cuda: both DataLoaders' batches on the GPU")
    parser.add_argument("--decode", default="auto", choices=["auto", "cpu", "gpu"],
                        help="GpuLoader's decode with --device cuda")
    parser.add_argument("--storages", default="jpeg,raw", help="the kdb files timed: jpeg, raw or both")
    parser.add_argument("--no-export-check", dest="export_check", action="store_false",
                        help="skip reading export-lerobot's output back with LeRobotDataset (exit 1 on a mismatch)")
    _rows.add_arguments(parser)
    args = parser.parse_args(argv)
    if args.quick:
        args.episodes, args.frames, args.size, args.samples, args.batches, args.batch = 2, 60, 96, 60, 4, 16
    if args.warmup is None:
        args.warmup = 1 if args.quick else 2 * args.workers + 1
    epoch = args.episodes * args.frames // args.batch
    if args.warmup + args.batches > epoch:
        parser.error(f"--warmup {args.warmup} + --batches {args.batches} is more than the {epoch} batches of "
                     f"{args.batch} in one epoch of {args.episodes} x {args.frames} frames")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    data = (f"{args.episodes} episodes x {args.frames} frames, {args.size}x{args.size}, 1 camera, AV1 by lerobot; "
            f"{args.samples} random frames; DataLoader batch {args.batch}, {args.workers} workers, "
            f"{args.batches} batches timed after {args.warmup}")
    storages = [name for name in args.storages.split(",") if name]
    if not storages or set(storages) - {"jpeg", "raw"}:
        parser.error(f"--storages: jpeg, raw or both, got {args.storages!r}")
    args.storages = storages
    if args.device != "cpu":
        data += f"; both DataLoaders' float batches on {args.device} (FrameDataset through GpuLoader)"
    python = args.lerobot_python or venv_python(args.venv, args.python, create=not args.quick)
    if python is None:
        print(f"skipped: no lerobot venv at {args.venv} (run once without --quick to make it)")
        _rows.write(args.json_path, AREA, data + " (skipped: no lerobot venv)", [])
        return
    folder = args.folder or args.venv.parent / "datasets"
    folder.mkdir(parents=True, exist_ok=True)
    dataset, kdb_paths, ingest_s = build(python, folder, args)
    print(f"{data}\ningest-lerobot: {ingest_s:.1f} s; load average at the start {os.getloadavg()[0]:.1f}")
    backends = list(dict.fromkeys([default_backend(python), "pyav", "torchcodec"]))
    cases = {}
    for storage in args.storages:  # GpuLoader chooses reuse_shared_memory itself: one case per file on a GPU
        cases[storage] = (kdb_paths[storage], True)
        if args.device == "cpu":
            cases[f"{storage}-reuse"] = (kdb_paths[storage], False)
    # Both sides twice, interleaved (ours, theirs, ours, theirs), the better of each kept: the machine's load
    # moves during the run, and a side measured once would meet the other's best.
    ours = {case: frame_rates(path, args, reuse) for case, (path, reuse) in cases.items()}
    theirs = {backend: lerobot_rates(python, dataset, backend, args) for backend in backends}
    for case, (path, reuse) in cases.items():
        keep_better(ours[case], frame_rates(path, args, reuse))
    for backend in backends:
        keep_better(theirs[backend], lerobot_rates(python, dataset, backend, args))
    names = {"jpeg": "FrameDataset (kdb, JPEG q90)", "jpeg-reuse": "  same, reuse_shared_memory=False",
             "raw": "FrameDataset (kdb, raw pixels)", "raw-reuse": "  same, reuse_shared_memory=False"}
    sizes = {case: folder_bytes(path) for case, (path, _) in cases.items()}
    sizes["lerobot"] = folder_bytes(dataset)
    rows = []
    print(f"load average at the end {os.getloadavg()[0]:.1f}\n")
    # "cores busy": the process's CPU seconds (all its threads) per second of the random reads.
    print(f"{'':34}{'random frames/s':>16}{'cores busy':>11}{'DataLoader frames/s':>21}{'dataset bytes':>15}")
    for storage, rates in ours.items():
        random = "-" if rates["random"] is None else f"{rates['random']:,.0f}"
        cores = "-" if rates["random_cores"] is None else f"{rates['random_cores']:.2f}"
        chosen = f"  GpuLoader: {rates['choice']}" if "choice" in rates else ""
        print(f"{names[storage]:34}{random:>16}{cores:>11}{rates['loader']:>21,.0f}{sizes[storage]:>15,}{chosen}")
    for backend, rates in theirs.items():
        name = f"LeRobotDataset ({backend})"
        if "error" in rates:
            print(f"{name:34}  does not run here: {rates['error']}")
            continue
        print(f"{name:34}{rates['random']:>16,.0f}{rates['random_cores']:>11.2f}{rates['loader']:>21,.0f}"
              f"{sizes['lerobot']:>15,}")
    print(f"\ngoal: FrameDataset >= 10x LeRobotDataset in both modes, same float (3, {args.size}, {args.size}) output "
          "in [0, 1]; JPEG with the defaults is the headline (raw pixels: a storage choice, --compress none, "
          "larger files; reuse_shared_memory=False: every batch in a fresh shared block, as before it was the default)")
    for backend, rates in theirs.items():
        if "error" in rates:
            continue
        for storage, mine in ours.items():
            same = abs(rates["image_sum"] - mine["image_sum"]) / max(rates["image_sum"], 1e-9)
            random = "  -  " if mine["random"] is None else f"{mine['random'] / rates['random']:5.1f}x"
            per_cpu = "" if mine["random"] is None else (  # frames per CPU-second, theirs on all their threads
                f" ({mine['random'] / mine['random_cores'] / (rates['random'] / rates['random_cores']):4.1f}x a CPU-s)")
            print(f"  vs {backend:10} {names[storage]:33} random {random}{per_cpu:17}   "
                  f"DataLoader {mine['loader'] / rates['loader']:5.1f}x   (same item's pixel sum within {same:.2%})")
            for mode in ("random", "loader") if mine["random"] is not None else ("loader",):
                case = "random __getitem__" if mode == "random" else f"DataLoader {args.workers} workers" + (
                    f", batches on {args.device}" if args.device != "cpu" else "")
                label = {"jpeg": "", "jpeg-reuse": ", reuse_shared_memory=False", "raw": ", kdb raw pixels",
                         "raw-reuse": ", kdb raw pixels, reuse_shared_memory=False"}[storage]
                rows.append(_rows.row(AREA, f"{case} vs {backend}{label}", mine[mode], reference=rates[mode],
                                      reference_name=f"LeRobotDataset {backend}", unit="frames/s",
                                      higher_is_better=True, target=">= 10x",
                                      note=f"kdb {sizes[storage]:,} bytes, lerobot {sizes['lerobot']:,} bytes" + (
                                          f"; cores busy: kdb {mine['random_cores']:.2f}, lerobot "
                                          f"{rates['random_cores']:.2f}" if mode == "random" else "")))
    _rows.write(args.json_path, AREA, data, rows)
    if args.export_check and not check_exports(python, kdb_paths["jpeg"], folder, args, backends):
        sys.exit(1)


def check_exports(python: Path, kdb_path: Path, folder: Path, args: argparse.Namespace, backends: list[str]) -> bool:
    """export-lerobot read back by LeRobotDataset itself, and ingest-lerobot of a two-camera dataset lerobot
    wrote (see _lerobot_export.py): a line per export (or ingest) and backend; True when every item matched."""
    import _lerobot_export

    started = time.perf_counter()
    run_child = functools.partial(child, python)
    lengths, results = _lerobot_export.check(kdb_path, folder / f"export-check-s{args.size}", args.frames,
                                             backends, run_child)
    results += _lerobot_export.check_ingest(folder / f"export-check-s{args.size}", args.size, run_child)
    print(f"\nexport-lerobot read back by LeRobotDataset (episodes of {', '.join(map(str, lengths))} frames, two "
          f"cameras), and ingest-lerobot of episodes of {', '.join(map(str, _lerobot_export.LENGTHS[:3]))} frames "
          f"with two cameras written by lerobot ({time.perf_counter() - started:.0f} s): every column, and each "
          "frame of each camera against its source frame")
    for result in results:
        if "error" in result:
            print(f"  {result['export']:11} {result['backend']:11} does not load: {result['error']}")
            continue
        print(f"  {result['export']:11} {result['backend']:11} {'ok' if result['ok'] else 'MISMATCH':9}"
              f"columns differing: {', '.join(result['differ']) or 'none'}; frame error mean "
              f"{result['mean_error']:.2f}, max {result['max_error']:.2f}; frames nearer another frame: "
              f"{result['misplaced']}")
    return all(result["ok"] for result in results)


if __name__ == "__main__":
    main()
