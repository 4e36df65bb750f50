"""Conversions: robomimic-style HDF5 and LeRobot-style parquet folders into
.kdb, and .kdb out to one .npz.

Ingest streams one episode at a time through the writer's frame-by-frame form,
reading sources in bounded slices, so memory does not grow with the dataset.
h5py and pyarrow are imported only by the function that needs them.
"""

from __future__ import annotations

import io
import json
import os
import re
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from .._binary import atomic_write
from ._images import EncodedImage
from ._reader import open_file
from ._writer import Writer

Progress = Callable[[int, int], None]
# Frames read from an HDF5 demo per slice (bounds the memory of long image demos).
HDF5_SLICE = 64
_DEMO = re.compile(r"demo_(\d+)$")


def _no_progress(done: int, total: int) -> None:
    """Default progress callback: nothing."""


def ingest_hdf5(source: Any, target: Any, *, compress: str | None = "jpeg", quality: int = 90,
                embodiment: str = "", task: str | None = None, fps: float = 10.0,
                progress: Progress = _no_progress) -> int:
    """Convert a robomimic-layout HDF5 file (``data/demo_N/{actions, states, rewards, dones, obs/*_image}``).

    Demos are taken in numeric order (demo_2 before demo_10). State is the
    ``states`` dataset, or when absent the 2-D float ``obs`` keys concatenated
    in alphabetical order; cameras are the 4-D uint8 ``obs`` datasets, named
    without their ``_image`` suffix. success = last reward > 0, total_reward =
    sum of rewards, terminal = ``dones``; demos without frames are left out with
    a warning. Returns the number of episodes written.
    """
    import h5py

    with h5py.File(source, "r") as hdf5:
        if "data" not in hdf5:
            raise ValueError(f"kdb: {os.fsdecode(source)} has no 'data' group (not a robomimic-layout file)")
        data = hdf5["data"]
        if task is None:
            task = _robomimic_task(data.attrs.get("env_args"))
        demos = sorted((name for name in data if _DEMO.match(name)), key=lambda name: int(_DEMO.match(name)[1]))
        written = 0
        with Writer(target, compress=compress, quality=quality) as writer:
            for done, name in enumerate(demos):
                written += _ingest_demo(writer, data[name], name, embodiment=embodiment, task=task, fps=fps)
                progress(done + 1, len(demos))
    return written


def _robomimic_task(env_args: Any) -> str:
    if env_args is None:
        return ""
    try:
        return str(json.loads(env_args).get("env_name", ""))
    except (TypeError, ValueError, AttributeError):
        return ""


def _ingest_demo(writer: Writer, demo: Any, name: str, **meta: Any) -> bool:
    """Write one demo as an episode; False (with a warning) for a demo without frames."""
    actions = demo.get("actions")
    if not hasattr(actions, "shape") or len(actions.shape) < 1:
        raise ValueError(f"kdb: {name} has no 'actions' dataset")
    frames = actions.shape[0]
    if frames == 0:
        warnings.warn(f"kdb: {name} has no frames and is left out (the format cannot hold empty episodes)",
                      RuntimeWarning, stacklevel=3)
        return False
    group = demo.get("obs", {})
    obs = {key: group[key] for key in sorted(group) if hasattr(group[key], "shape")}
    if hasattr(demo.get("states"), "shape"):
        state_parts = [demo["states"]]
    else:
        state_parts = [data for data in obs.values() if data.ndim == 2 and data.dtype.kind == "f"]
    cameras = {key.removesuffix("_image"): data for key, data in obs.items()
               if data.ndim == 4 and data.dtype == np.uint8}
    rewards = np.asarray(demo["rewards"], dtype=np.float32).reshape(-1) if "rewards" in demo else np.zeros(frames)
    dones = np.asarray(demo["dones"]).reshape(-1) != 0 if "dones" in demo else np.arange(frames) == frames - 1
    lengths = {"rewards": len(rewards), "dones": len(dones)}
    lengths.update({f"state part {number}": len(part) for number, part in enumerate(state_parts)})
    for label, length in lengths.items():
        if length != frames:
            raise ValueError(f"kdb: {name} {label} has {length} rows, actions has {frames}")
    for camera, images in cameras.items():
        if images.shape[0] != frames:
            raise ValueError(f"kdb: {name}/obs/{camera} has {images.shape[0]} frames, actions has {frames}")
    state_dim = sum(int(np.prod(part.shape[1:])) for part in state_parts)
    writer.begin_episode(state_dim=state_dim, action_dim=int(np.prod(actions.shape[1:])), **meta)
    for start in range(0, frames, HDF5_SLICE):
        stop = min(frames, start + HDF5_SLICE)
        action_rows = np.asarray(actions[start:stop], dtype=np.float32).reshape(stop - start, -1)
        state_rows = (np.concatenate([np.asarray(part[start:stop], dtype=np.float32).reshape(stop - start, -1)
                                      for part in state_parts], axis=1)
                      if state_parts else np.zeros((stop - start, 0), np.float32))
        image_rows = {camera: images[start:stop] for camera, images in cameras.items()}
        for row in range(stop - start):
            writer.add_frame(state_rows[row], action_rows[row], reward=float(rewards[start + row]),
                             terminal=bool(dones[start + row]),
                             images={camera: rows[row] for camera, rows in image_rows.items()})
    writer.end_episode(success=bool(rewards[-1] > 0),
                       total_reward=float(rewards.sum(dtype=np.float64)) if "rewards" in demo else None)
    return True


def ingest_lerobot(source: Any, target: Any, *, compress: str | None = None, quality: int = 90,
                   embodiment: str | None = None, fps: float | None = None,
                   progress: Progress = _no_progress) -> int:
    """Convert a LeRobot-style folder (``meta/info.json``, ``meta/tasks.jsonl``, ``data/**/*.parquet``).

    Rows are grouped by ``episode_index`` in file order; state is
    ``observation.state`` (or ``observation.state.*`` columns), action is
    ``action`` (or ``action.*``); image columns are structs with the encoded
    ``bytes`` (stored as they are; video features are skipped with a warning);
    ``next.reward`` / ``next.done`` are used when present, otherwise reward 0
    and only the last frame terminal. Returns the number of episodes.
    """
    import pyarrow.parquet as pq

    root = Path(source)
    info = _read_json(root / "meta" / "info.json")
    tasks = _lerobot_tasks(root / "meta")
    fps = float(fps if fps is not None else info.get("fps", 30))
    embodiment = embodiment if embodiment is not None else str(info.get("robot_type") or "")
    videos = [key for key, feature in info.get("features", {}).items() if feature.get("dtype") == "video"]
    if videos:
        warnings.warn(f"kdb: video features {videos} are not ingested (only parquet image columns are)",
                      RuntimeWarning, stacklevel=2)
    files = sorted((root / "data").rglob("*.parquet"))
    if not files:
        raise ValueError(f"kdb: {root} has no data/**/*.parquet files (not a LeRobot-style folder)")
    seen: set[int] = set()
    with Writer(target, compress=compress, quality=quality) as writer:
        current = None
        pending: dict[str, Any] = {}
        for done, path in enumerate(files):
            parquet = pq.ParquetFile(path)
            for group in range(parquet.num_row_groups):
                table = parquet.read_row_group(group)
                for episode_index, rows in _episode_runs(table):
                    if episode_index != current:
                        if current is not None:
                            _end_lerobot_episode(writer, pending)
                        if episode_index in seen:
                            raise ValueError(f"kdb: rows of episode {episode_index} are not contiguous in {root}")
                        seen.add(episode_index)
                        current = episode_index
                        pending = {}
                    _add_lerobot_rows(writer, rows, pending, tasks, embodiment, fps)
            progress(done + 1, len(files))
        if current is not None:
            _end_lerobot_episode(writer, pending)
    return len(seen)


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text("utf-8"))
    except FileNotFoundError:
        return {}


def _lerobot_tasks(meta: Path) -> dict[int, str]:
    tasks = {}
    if (meta / "tasks.jsonl").exists():
        for line in (meta / "tasks.jsonl").read_text("utf-8").splitlines():
            if line.strip():
                record = json.loads(line)
                tasks[int(record["task_index"])] = str(record["task"])
    elif (meta / "tasks.parquet").exists():
        import pyarrow.parquet as pq

        table = pq.read_table(meta / "tasks.parquet").to_pydict()
        names = table.get("task") or table.get("__index_level_0__") or []
        tasks = {int(index): str(name) for index, name in zip(table.get("task_index", []), names)}
    return tasks


def _episode_runs(table: Any) -> Iterator[tuple[int, Any]]:
    """Consecutive row ranges of ``table`` that share an episode_index."""
    if "episode_index" not in table.column_names:
        raise ValueError("kdb: parquet rows have no episode_index column (not a LeRobot-style table)")
    episodes = table.column("episode_index").to_numpy()
    if not len(episodes):
        return
    cuts = np.flatnonzero(np.diff(episodes)) + 1
    for start, stop in zip(np.concatenate([[0], cuts]), np.concatenate([cuts, [len(episodes)]])):
        yield int(episodes[start]), table.slice(int(start), int(stop - start))


def _vector_columns(table: Any, name: str) -> list[str]:
    if name in table.column_names:
        return [name]
    return sorted(column for column in table.column_names if column.startswith(name + "."))


def _matrix_of(table: Any, columns: list[str]) -> np.ndarray:
    parts = []
    for column in columns:
        values = table.column(column).to_pylist()
        parts.append(np.asarray(values, dtype=np.float32).reshape(len(values), -1))
    return np.concatenate(parts, axis=1) if parts else np.zeros((table.num_rows, 0), np.float32)


def _image_columns(table: Any) -> dict[str, str]:
    """Struct columns with a ``bytes`` field, camera name = column without observation./images. prefixes."""
    import pyarrow as pa

    cameras = {}
    for field in table.schema:
        if pa.types.is_struct(field.type) and field.type.get_field_index("bytes") >= 0:
            camera = field.name
            for prefix in ("observation.", "images."):
                camera = camera.removeprefix(prefix)
            cameras[camera] = field.name
    return dict(sorted(cameras.items()))


def _encoded(data: bytes, where: str) -> EncodedImage:
    """The stated encoding of a LeRobot image cell, from its codec's identification of the file."""
    from PIL import Image

    try:
        with Image.open(io.BytesIO(data)) as image:
            kind = (image.format or "").lower()
    except Exception as error:  # Pillow raises several types for unreadable bytes
        raise ValueError(f"kdb: {where} is not a readable image ({error})") from None
    if kind not in ("jpeg", "png"):
        raise ValueError(f"kdb: {where} is a {kind or 'unknown'} image; only JPEG and PNG can be stored")
    return EncodedImage(data, kind).with_dimensions()


def _add_lerobot_rows(writer: Writer, rows: Any, pending: dict, tasks: dict[int, str], embodiment: str,
                      fps: float) -> None:
    """Write the rows of one episode run; the newest frame is held back until its successor (or the
    episode end) shows whether it is the last one."""
    states = _matrix_of(rows, _vector_columns(rows, "observation.state"))
    actions = _matrix_of(rows, _vector_columns(rows, "action"))
    has_rewards = "next.reward" in rows.column_names
    rewards = (np.asarray(rows.column("next.reward").to_pylist(), dtype=np.float32).reshape(-1)
               if has_rewards else np.zeros(rows.num_rows, np.float32))
    dones = (np.asarray(rows.column("next.done").to_pylist(), dtype=bool).reshape(-1)
             if "next.done" in rows.column_names else None)
    images = {camera: [cell["bytes"] if cell else None for cell in rows.column(column).to_pylist()]
              for camera, column in _image_columns(rows).items()}
    if "held" not in pending:
        task_index = rows.column("task_index")[0].as_py() if "task_index" in rows.column_names else None
        writer.begin_episode(state_dim=states.shape[1], action_dim=actions.shape[1], embodiment=embodiment,
                             task=tasks.get(task_index, ""), fps=fps)
        pending.update(held=None, total_reward=0.0 if has_rewards else None)
    for row in range(rows.num_rows):
        frame_images = {camera: _encoded(cells[row], f"{camera} row {row}") for camera, cells in images.items()
                        if cells[row] is not None}
        _flush_held(writer, pending, last=False)
        pending["held"] = (states[row], actions[row], float(rewards[row]),
                           None if dones is None else bool(dones[row]), frame_images)
    if has_rewards:
        pending["total_reward"] = (pending["total_reward"] or 0.0) + float(rewards.sum(dtype=np.float64))


def _flush_held(writer: Writer, pending: dict, last: bool) -> None:
    if pending.get("held") is None:
        return
    state, action, reward, done, images = pending["held"]
    writer.add_frame(state, action, reward=reward, terminal=last if done is None else done, images=images)
    pending["held"] = None


def _end_lerobot_episode(writer: Writer, pending: dict) -> None:
    _flush_held(writer, pending, last=True)
    writer.end_episode(total_reward=pending.get("total_reward"))


def export_npz(source: Any, target: Any, *, images: bool = True, progress: Progress = _no_progress) -> int:
    """Write every episode of a .kdb file into one .npz (``episode_<id>.states`` ..., images decoded).

    ``episodes.json`` (a 0-d string array) holds the metadata of every episode.
    Returns the number of episodes.
    """
    with open_file(source) as kdb, atomic_write(target) as stream:
        metas = []

        def arrays() -> Iterator[tuple[str, np.ndarray]]:
            """(member name, array) for every episode in order, collecting the metadata on the way."""
            for position in range(len(kdb)):
                episode = kdb.read_episode(position)
                prefix = f"episode_{episode.meta.episode_id}"
                metas.append(episode.meta.as_dict())
                yield f"{prefix}.states", np.array(episode.states)
                yield f"{prefix}.actions", np.array(episode.actions)
                yield f"{prefix}.rewards", np.array(episode.rewards)
                yield f"{prefix}.terminals", episode.terminals != 0
                if images:
                    for camera in episode.images.cameras:
                        yield f"{prefix}.images.{camera}", episode.images.stack(camera)[0]
                progress(position + 1, len(kdb))

        _write_npz(stream, arrays(), lambda: json.dumps(metas, ensure_ascii=False))
        return len(kdb)


def _write_npz(stream: Any, arrays: Iterator[tuple[str, np.ndarray]], metadata: Callable[[], str]) -> None:
    """An .npz written member by member (np.savez would need every array in memory at once)."""
    import zipfile

    with zipfile.ZipFile(stream, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as archive:
        for name, array in arrays:
            with archive.open(name + ".npy", "w", force_zip64=True) as member:
                np.lib.format.write_array(member, np.ascontiguousarray(array), allow_pickle=False)
        with archive.open("episodes.json.npy", "w") as member:
            np.lib.format.write_array(member, np.array(metadata()), allow_pickle=False)
