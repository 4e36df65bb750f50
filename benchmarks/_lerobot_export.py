"""``export-lerobot`` read back by ``lerobot`` itself (issue 21, item 6), for benchmarks/lerobot_vs_kdb.py:
episodes of different lengths cut from the benchmark's .kdb file, with a second camera of another size (a
half-size "wrist" view of the first), are exported (AV1, H.264 and PNG), each export is loaded with
``LeRobotDataset`` in the lerobot venv (``_lerobot_child.py dump``: every item, with each video backend),
and every item of every camera is compared with its source frame."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np

# Frames per exported episode, cut from the benchmark's first episodes: all different, one of 5.
LENGTHS = (37, 60, 23, 150, 5)
KINDS = {"av1": {"codec": "av1"}, "h264": {"codec": "h264"}, "png": {"video": False}}
# A decoded video frame is its own source frame within this mean absolute error (AV1 crf 30 and H.264
# crf 23 gave 2.1-3.0 on the benchmark's frames); PNG is exact.
VIDEO_ERROR = 6.0


def source_episodes(path: Path, folder: Path, frames_available: int) -> tuple[Path, dict[str, np.ndarray]]:
    """A .kdb file in ``folder`` holding the first episodes of ``path`` cut to LENGTHS (at most
    ``frames_available`` each), and what LeRobotDataset should give back for it, item by item."""
    from arrayio import kdb

    cut = folder / "export-source.kdb"
    lengths = [min(length, frames_available) for length in LENGTHS]
    parts: dict[str, list] = {name: [] for name in ("state", "action", "reward", "episode", "frame", "task",
                                                   "images_front", "images_wrist")}
    with kdb.open(path) as source, kdb.Writer(cut) as writer:
        lengths = lengths[:len(source)]
        for position, length in enumerate(lengths):
            episode = source.read_episode(position)
            front = np.asarray(episode.images[episode.images.cameras[0]])[:length]
            values = {"state": np.asarray(episode.states)[:length], "action": np.asarray(episode.actions)[:length],
                      "reward": np.asarray(episode.rewards)[:length], "images_front": front,
                      "images_wrist": np.ascontiguousarray(front[:, ::2, ::2][:, :front.shape[1] // 4 * 2,
                                                                               :front.shape[2] // 4 * 2])}
            writer.add_episode(values["state"], values["action"], rewards=values["reward"],
                               images={"front": values["images_front"], "wrist": values["images_wrist"]},
                               embodiment=episode.meta.embodiment, task=episode.meta.task, fps=episode.meta.fps)
            values.update(episode=np.full(length, position), frame=np.arange(length),
                          task=np.array([episode.meta.task] * length))
            for name, value in values.items():
                parts[name].append(value)
            fps = episode.meta.fps
    expected = {name: np.concatenate(value) for name, value in parts.items()}
    expected["timestamp"] = expected["frame"] / fps
    return cut, expected


def compare(found: Mapping[str, np.ndarray], expected: Mapping[str, np.ndarray], exact: bool,
            optional: tuple[str, ...] = ()) -> dict:
    """How LeRobotDataset's items (``found``, as ``_lerobot_child.py dump`` writes them) match ``expected``:
    the columns that differ, each frame's mean absolute error against its own source frame (every camera,
    ``images_<camera>``), and how many frames lie closer to another frame of their episode than to their
    own, where that frame's picture differs from their own by more than the error (a misplaced frame).
    Columns in ``optional`` may be missing from ``found``."""
    columns = {"observation_state": "state", "action": "action", "next_reward": "reward",
               "episode_index": "episode", "frame_index": "frame", "tasks": "task"}
    differ = [name for name, mine in columns.items() if (name in found or name not in optional) and (
        name not in found or found[name].shape != expected[mine].shape or not np.array_equal(found[name],
                                                                                             expected[mine]))]
    if not np.array_equal(found["index"], np.arange(len(expected["frame"]))):
        differ.append("index")
    if found["timestamp"].shape != expected["timestamp"].shape or \
            not np.allclose(found["timestamp"], expected["timestamp"], atol=1e-6):
        differ.append("timestamp")
    errors, misplaced = [], 0
    for camera in sorted(key for key in expected if key.startswith("images_")):
        if camera not in found or found[camera].shape != expected[camera].shape:
            return {"differ": [*differ, camera], "mean_error": None, "max_error": None, "misplaced": None,
                    "ok": False}
        images, sources = found[camera].astype(np.int16), expected[camera].astype(np.int16)
        for item in range(len(images)):
            own_episode = np.flatnonzero(expected["episode"] == expected["episode"][item])
            distances = np.abs(sources[own_episode] - images[item]).reshape(len(own_episode), -1).mean(1)
            own, nearest = expected["frame"][item], int(np.argmin(distances))
            errors.append(float(distances[own]))
            # Nearer another frame, which differs from its own by more than that (periodic content repeats a
            # picture: a frame 120 apart differed by 0.5, less than the codec's error, and is no sign).
            misplaced += int(distances[nearest] < distances[own] and np.abs(
                sources[own_episode[own]] - sources[own_episode[nearest]]).mean() > distances[nearest])
    worst = max(errors)
    ok = not differ and not misplaced and (worst == 0 if exact else worst < VIDEO_ERROR)
    return {"differ": differ, "mean_error": float(np.mean(errors)), "max_error": worst, "misplaced": misplaced,
            "ok": ok}


def kdb_items(path: Path) -> dict[str, np.ndarray]:
    """What a .kdb file holds, item by item, named as :func:`compare` expects."""
    from arrayio import kdb

    parts: dict[str, list] = {}
    with kdb.open(path) as source:
        for position in range(len(source)):
            episode = source.read_episode(position)
            length = len(episode)
            values = {"state": episode.states, "action": episode.actions, "reward": episode.rewards,
                      "episode": np.full(length, position), "frame": np.arange(length),
                      "task": np.array([episode.meta.task] * length),
                      "timestamp": np.arange(length) / episode.meta.fps,
                      **{f"images_{camera}": episode.images[camera] for camera in episode.images.cameras}}
            for name, value in values.items():
                parts.setdefault(name, []).append(np.array(value))
    return {name: np.concatenate(value) for name, value in parts.items()}


def check_ingest(folder: Path, size: int, run_child: Callable[..., str]) -> list[dict]:
    """Episodes of the first three LENGTHS with two cameras (``size`` and half of it) written by lerobot
    itself, ingested raw and as JPEG; each .kdb file compared with what LeRobotDataset (pyav) gives."""
    import shutil

    from arrayio.robot.lerobot import ingest_lerobot

    dataset = folder / f"ingest-check-s{size}"
    if not (dataset / "meta" / "info.json").exists():
        shutil.rmtree(dataset, ignore_errors=True)
        run_child("write", str(dataset), "--lengths", ",".join(map(str, LENGTHS[:3])), "--size", str(size),
                  "--wrist", str(size // 4 * 2))
    dump = folder / f"ingest-check-s{size}.npz"
    run_child("dump", str(dataset), "--backend", "pyav", "--out", str(dump))
    with np.load(dump) as loaded:
        found = dict(loaded)
    results = []
    for compress in (None, "jpeg"):
        target = folder / f"ingest-check-s{size}-{compress or 'raw'}.kdb"
        target.unlink(missing_ok=True)
        ingest_lerobot(dataset, target, compress=compress)
        results.append({"export": f"ingest {compress or 'raw'}", "backend": "pyav",
                        **compare(found, kdb_items(target), exact=compress is None, optional=("next_reward",))})
    return results


def check(kdb_path: Path, folder: Path, frames_available: int, backends: list[str],
          run_child: Callable[..., str]) -> tuple[list[int], list[dict]]:
    """Export the cut episodes of ``kdb_path`` each way, load each export with LeRobotDataset and each
    backend (``run_child``: runs _lerobot_child.py in the venv), and compare: the episodes' lengths, and one
    result per export and backend."""
    import shutil

    from arrayio.robot.lerobot import export_lerobot

    folder.mkdir(parents=True, exist_ok=True)
    cut, expected = source_episodes(kdb_path, folder, frames_available)
    results = []
    for kind, options in KINDS.items():
        export = folder / f"export-{kind}"
        shutil.rmtree(export, ignore_errors=True)
        export_lerobot(cut, export, **options)
        for backend in backends if kind != "png" else ["(images)"]:
            dump = folder / f"dump-{kind}-{backend.strip('()')}.npz"
            try:
                run_child("dump", str(export), "--backend", backend, "--out", str(dump))
            except (RuntimeError, subprocess.SubprocessError) as error:
                results.append({"export": kind, "backend": backend, "ok": False, "error": str(error)})
                continue
            with np.load(dump) as found:
                results.append({"export": kind, "backend": backend,
                                **compare(dict(found), expected, exact=kind == "png")})
    return np.bincount(expected["episode"]).tolist(), results
