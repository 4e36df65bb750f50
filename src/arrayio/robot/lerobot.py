"""LeRobot datasets in and out: ingest of the v2.1 and v3.0 layouts (parquet rows,
embedded PNG/JPEG images and MP4 video features decoded with PyAV) and export
of a v3.0 dataset in the layout the ``lerobot`` package writes.

The layouts (see docs/formats/kdb.md): v3.0 concatenates episodes in
``data/chunk-*/file-*.parquet`` and in one MP4 per camera
(``videos/<key>/chunk-*/file-*.mp4``), frame k of episode e at
``from_timestamp[e] + timestamp[k]``, with per-episode offsets in
``meta/episodes/chunk-*/file-*.parquet`` and task strings in
``meta/tasks.parquet``; v2.1 has one parquet and one MP4 per episode,
``meta/episodes.jsonl`` and ``meta/tasks.jsonl``.

Both directions stream: one batch of parquet rows and one decoded video frame
per camera at a time on the way in, one episode at a time on the way out.
pyarrow, PyAV and pandas are imported only here.
"""

from __future__ import annotations

import io
import json
import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from .._edge import open_output_folder
from .._names import confined, path_segment, relative_under
from .._optional import require
from ..errors import FormatError
from ..kdb import EncodedImage, Writer, encode_image
from ..kdb import open as open_file
from ._arguments import finite_number
from ._lerobot_meta import (
    dataset_errors,
    expand_template,
    integer_field,
    metadata_error,
    read_json,
    read_jsonl,
    task_list,
)
from ._lerobot_video import VIDEO_CODECS, Videos, VideoWriter

Progress = Callable[[int, int], None]
CODEBASE_VERSION = "v3.0"
# LeRobot matches a video frame to a timestamp within this many seconds.
TOLERANCE_S = 1e-4
ROWS_PER_BATCH = 1024
# The frame rates an export takes: float32 timestamps of any frame count stay finite, and the video's rate
# (a fraction with a denominator up to 1001) is neither 0 nor past FFmpeg's 32-bit numerator.
EXPORT_FPS = (0.001, 1_000_000)
CHUNKS_SIZE = 1000


def _no_progress(done: int, total: int) -> None:
    """Default progress callback: nothing."""


def camera_name(key: str) -> str:
    """The kdb camera of a LeRobot feature key: ``observation.images.front`` -> ``front``."""
    for prefix in ("observation.", "images."):
        key = key.removeprefix(prefix)
    return key


# -- ingest -----------------------------------------------------------------------------------------


def ingest_lerobot(source: Any, target: Any, *, compress: str | None = "jpeg", quality: int = 90,
                   embodiment: str | None = None, fps: float | None = None, tolerance_s: float = TOLERANCE_S,
                   progress: Progress = _no_progress) -> int:
    """Convert a LeRobot dataset folder (v2.1 or v3.0, or older parquet-only folders) to one .kdb file.

    State is ``observation.state`` (or its ``observation.state.*`` columns),
    action ``action``; image features keep their stored PNG/JPEG bytes; video
    features are decoded with PyAV at each row's ``from_timestamp + timestamp``
    (within ``tolerance_s``) and stored per ``compress`` ("jpeg", "png" or None
    for raw pixels). ``next.reward`` / ``next.done`` are used when present,
    otherwise reward 0 and only the last frame terminal. Returns the number of episodes.
    """
    tolerance_s = finite_number("tolerance_s", tolerance_s)
    if fps is not None:
        fps = finite_number("fps", fps, positive=True)
    pa = require("pyarrow", "LeRobot datasets")
    pq = require("pyarrow.parquet", "LeRobot datasets")

    root = Path(source)
    info_path = root / "meta" / "info.json"
    info = read_json(info_path)
    if fps is None:
        fps = info.get("fps", 30)
        if isinstance(fps, bool) or not isinstance(fps, (int, float)) or not 0 < fps < math.inf:
            raise metadata_error(info_path, "fps", "a positive number", fps)
    fps = float(fps)
    embodiment = embodiment if embodiment is not None else str(info.get("robot_type") or "")
    features = info.get("features", {})
    if not isinstance(features, dict) or not all(isinstance(feature, dict) for feature in features.values()):
        raise metadata_error(info_path, "features", "an object of feature objects", features)
    video_keys = sorted(key for key, feature in features.items() if feature.get("dtype") == "video")
    with dataset_errors(root / "meta"):
        tasks = _lerobot_tasks(root / "meta")
        episodes = _episode_table(root, info, video_keys)
    if video_keys and not episodes:
        raise FormatError(f"LeRobot: video features {video_keys} but no episode table (meta/episodes/*.parquet or "
                          "meta/episodes.jsonl)", format="LeRobot").naming(str(root))
    files = _dataset_files(root, root / "data")
    if not files:
        raise FormatError("LeRobot: no data/**/*.parquet files (not a LeRobot dataset folder)",
                          format="LeRobot").naming(str(root))
    seen: set[int] = set()
    videos = Videos(tolerance_s)
    try:
        with Writer(target, compress=compress, quality=quality) as writer:
            run = _EpisodeRun(writer, tasks, embodiment, fps, episodes, video_keys, videos)
            for done, path in enumerate(files):
                with dataset_errors(path):
                    for batch in pq.ParquetFile(path).iter_batches(batch_size=ROWS_PER_BATCH):
                        table = pa.Table.from_batches([batch])
                        for episode_index, rows in _episode_runs(table):
                            if episode_index != run.episode_index:
                                run.end()
                                if episode_index in seen:
                                    raise FormatError(f"kdb: rows of episode {episode_index} are not contiguous "
                                                      f"in {root}")
                                seen.add(episode_index)
                                run.begin(episode_index, rows)
                            run.add(rows)
                    progress(done + 1, len(files))
            with dataset_errors(files[-1]):
                run.end()
    finally:
        videos.close()
    return len(seen)


def dataset_path(root: Path, template: Any, fields: dict[str, Any], *, name: str, path: Path) -> Path:
    """The file a template of ``info.json`` names (expanded by the one template function), refused unless it
    lies inside the dataset ``root`` (no absolute or ``..`` path, no symlink leading out)."""
    return relative_under(root, expand_template(template, fields, name=name, path=path), f"LeRobot: {name}")


def _dataset_files(root: Path, folder: Path) -> list[Path]:
    """The parquet files under ``folder``, each checked to lie inside ``root`` (symlinks followed)."""
    return [confined(path, root, "LeRobot: parquet file") for path in sorted(folder.rglob("*.parquet"))]


def _lerobot_tasks(meta: Path) -> dict[int, str]:
    """task_index -> task text from tasks.jsonl (v2.1) or tasks.parquet (v3.0: the text is the pandas index)."""
    if (meta / "tasks.jsonl").exists():
        return {int(record["task_index"]): str(record["task"]) for record in read_jsonl(meta / "tasks.jsonl")}
    if (meta / "tasks.parquet").exists():
        pq = require("pyarrow.parquet", "LeRobot datasets")

        table = pq.read_table(meta / "tasks.parquet").to_pydict()
        names = table.get("task") or table.get("__index_level_0__")
        if names is None or "task_index" not in table:
            raise FormatError("LeRobot: no task_index and task (or pandas index) columns",
                              format="LeRobot").naming(str(meta / "tasks.parquet"))
        return {int(index): str(name) for index, name in zip(table["task_index"], names)}
    return {}


def _episode_table(root: Path, info: dict, video_keys: list[str]) -> dict[int, dict]:
    """episode_index -> {"tasks": [...], "videos": {key: (mp4 path, from_timestamp)}} from the episode metadata."""
    table: dict[int, dict] = {}
    meta = root / "meta"
    if (meta / "episodes").is_dir():
        pq = require("pyarrow.parquet", "LeRobot datasets")

        for path in _dataset_files(root, meta / "episodes"):
            names = pq.ParquetFile(path).schema_arrow.names
            wanted = [name for name in names if not name.startswith("stats/")]
            rows = pq.read_table(path, columns=wanted).to_pylist()
            for number, row in enumerate(rows):
                videos = {}
                for key in video_keys:
                    columns = [f"videos/{key}/{part}" for part in ("chunk_index", "file_index", "from_timestamp")]
                    chunk, file, start = (integer_field(row, column, path, number, integer=not column.endswith(
                        "timestamp")) for column in columns)
                    video = dataset_path(root, info.get("video_path"), {
                        "video_key": key, "chunk_index": int(chunk), "file_index": int(file)},
                        name="video_path", path=meta / "info.json")
                    videos[key] = (video, float(start))
                index = int(integer_field(row, "episode_index", path, number))
                table[index] = {"tasks": task_list(row, path, number), "videos": videos}
    elif (meta / "episodes.jsonl").exists():
        chunks = info.get("chunks_size", CHUNKS_SIZE)
        if isinstance(chunks, bool) or not isinstance(chunks, int) or chunks <= 0:
            raise metadata_error(meta / "info.json", "chunks_size", "a positive integer", chunks)
        template = info.get("video_path") or (
            "videos/chunk-{episode_chunk:03d}/{video_key}/episode_{episode_index:06d}.mp4")
        for number, record in enumerate(read_jsonl(meta / "episodes.jsonl")):
            index = int(integer_field(record, "episode_index", meta / "episodes.jsonl", number))
            videos = {key: (dataset_path(root, template, {
                "episode_chunk": index // chunks, "video_key": key, "episode_index": index},
                name="video_path", path=meta / "info.json"), 0.0) for key in video_keys}
            table[index] = {"tasks": task_list(record, meta / "episodes.jsonl", number), "videos": videos}
    return table


def _episode_runs(table: Any) -> Iterator[tuple[int, Any]]:
    """Consecutive row ranges of ``table`` that share an episode_index."""
    if "episode_index" not in table.column_names:
        raise FormatError("kdb: parquet rows have no episode_index column (not a LeRobot table)")
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
    """Struct columns with a ``bytes`` field by camera name, sorted."""
    pa = require("pyarrow", "LeRobot datasets")

    cameras = {camera_name(field.name): field.name for field in table.schema
               if pa.types.is_struct(field.type) and field.type.get_field_index("bytes") >= 0}
    return dict(sorted(cameras.items()))


def _encoded(data: bytes, where: str) -> EncodedImage:
    """The stated encoding of a LeRobot image cell, from its codec's identification of the file."""
    from PIL import Image

    try:
        with Image.open(io.BytesIO(data)) as image:
            kind = (image.format or "").lower()
    except Exception as error:  # noqa: BLE001 - Pillow raises several types for unreadable bytes
        raise FormatError(f"kdb: {where} is not a readable image ({error})") from None
    if kind not in ("jpeg", "png"):
        raise FormatError(f"kdb: {where} is a {kind or 'unknown'} image; only JPEG and PNG can be stored")
    return EncodedImage(data, kind).with_dimensions()


class _EpisodeRun:
    """The episode being written: rows arrive in runs; the newest frame is held back until its
    successor (or the episode end) shows whether it is the last one."""

    def __init__(self, writer: Writer, tasks: dict[int, str], embodiment: str, fps: float,
                 episodes: dict[int, dict], video_keys: list[str], videos: Videos) -> None:
        self.writer, self.tasks, self.embodiment, self.fps = writer, tasks, embodiment, fps
        self.episodes, self.video_keys, self.videos = episodes, video_keys, videos
        self.episode_index: int | None = None
        self.held: tuple | None = None
        self.total_reward: float | None = None
        self.frame = 0

    def begin(self, episode_index: int, rows: Any) -> None:
        """Open episode ``episode_index`` with the dims and task of its first rows."""
        states = _matrix_of(rows.slice(0, 1), _vector_columns(rows, "observation.state"))
        actions = _matrix_of(rows.slice(0, 1), _vector_columns(rows, "action"))
        task_index = rows.column("task_index")[0].as_py() if "task_index" in rows.column_names else None
        listed = self.episodes.get(episode_index, {}).get("tasks") or [""]
        task = listed[0] if task_index is None else self.tasks.get(task_index, listed[0])
        if self.video_keys and episode_index not in self.episodes:
            raise FormatError(f"kdb: episode {episode_index} is not in the episode metadata (its videos are unknown)")
        self.writer.begin_episode(state_dim=states.shape[1], action_dim=actions.shape[1], embodiment=self.embodiment,
                                  task=task, fps=self.fps)
        self.episode_index, self.held, self.frame = episode_index, None, 0
        self.total_reward = 0.0 if "next.reward" in rows.column_names else None

    def add(self, rows: Any) -> None:
        """Write the rows of one run of this episode."""
        states = _matrix_of(rows, _vector_columns(rows, "observation.state"))
        actions = _matrix_of(rows, _vector_columns(rows, "action"))
        names = rows.column_names
        rewards = (np.asarray(rows.column("next.reward").to_pylist(), dtype=np.float32).reshape(-1)
                   if "next.reward" in names else np.zeros(rows.num_rows, np.float32))
        dones = (np.asarray(rows.column("next.done").to_pylist(), dtype=bool).reshape(-1)
                 if "next.done" in names else None)
        if "timestamp" in names:
            times = np.asarray(rows.column("timestamp").to_pylist(), np.float64).reshape(-1)  # null: NaN
            unusable = np.flatnonzero(~np.isfinite(times))
            if len(unusable) and self.video_keys:
                row = int(unusable[0])  # a ValueError: dataset_errors names the file
                raise ValueError(f"episode {self.episode_index} frame {self.frame + row}: timestamp "
                                 f"{rows.column('timestamp')[row].as_py()!r} is not a finite number of seconds, "
                                 f"so no video frame can be found for it")
        else:
            times = (self.frame + np.arange(rows.num_rows)) / self.fps
        images = {camera: rows.column(column).to_pylist() for camera, column in _image_columns(rows).items()}
        known = {} if self.episode_index is None else self.episodes.get(self.episode_index, {})
        videos = known.get("videos", {})
        for row in range(rows.num_rows):
            frame_images: dict[str, Any] = {
                camera: _encoded(cells[row]["bytes"], f"episode {self.episode_index} {camera} row {row}")
                for camera, cells in images.items() if cells[row] and cells[row].get("bytes")}
            for key in self.video_keys:
                path, start = videos[key]
                frame_images[camera_name(key)] = self.videos.frame_at(key, path, start + float(times[row]))
            self._flush(last=False)
            self.held = (states[row], actions[row], float(rewards[row]),
                         None if dones is None else bool(dones[row]), frame_images)
        if self.total_reward is not None:
            self.total_reward += float(rewards.sum(dtype=np.float64))
        self.frame += rows.num_rows

    def _flush(self, last: bool) -> None:
        if self.held is None:
            return
        state, action, reward, done, images = self.held
        self.writer.add_frame(state, action, reward=reward, terminal=last if done is None else done, images=images)
        self.held = None

    def end(self) -> None:
        """Finish the open episode, if any."""
        if self.episode_index is None:
            return
        self._flush(last=True)
        self.writer.end_episode(total_reward=self.total_reward)
        self.episode_index = None


def is_lerobot_dataset(path: Path) -> bool:
    """True for a folder holding a LeRobot dataset (``meta/info.json`` with a ``codebase_version``): the only
    folders ``export_lerobot(..., force=True)`` replaces."""
    try:
        info = json.loads((Path(path) / "meta" / "info.json").read_text("utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(info, dict) and isinstance(info.get("codebase_version"), str)


def export_lerobot(source: Any, target: Any, *, video: bool = True, codec: str = "av1", crf: int | None = None,
                   robot_type: str | None = None, progress: Progress = _no_progress, force: bool = False) -> int:
    """Write a .kdb file as a LeRobot v3.0 dataset folder ``target``, which must not exist yet unless ``force``
    (then only a LeRobot dataset is replaced, never another folder).

    Cameras become ``observation.images.<camera>`` features: MP4 videos
    (``codec`` "av1" as LeRobot's default, every frame a key frame, or "h264"
    with a key frame every 2 frames; yuv420p) or, with ``video=False``, PNG
    images inside the data parquet.
    Every episode must share one fps, state/action dims and camera set. The
    folder is built beside ``target`` and renamed into place when complete.
    Returns the number of episodes.
    """
    if codec not in VIDEO_CODECS:
        raise ValueError(f"kdb: codec must be one of {sorted(VIDEO_CODECS)}, got {codec!r}")
    with open_output_folder(target, replaces=is_lerobot_dataset, force=force, sources=[source]) as building, \
            open_file(source) as kdb:
        building.mkdir()
        return _export(kdb, building, video=video, codec=codec, crf=crf, robot_type=robot_type,
                       progress=progress)


def _export(kdb: Any, root: Path, *, video: bool, codec: str, crf: int | None, robot_type: str | None,
            progress: Progress) -> int:
    pa = require("pyarrow", "LeRobot datasets")
    pq = require("pyarrow.parquet", "LeRobot datasets")

    if not len(kdb):
        raise ValueError("kdb: the file has no episodes; a LeRobot dataset needs at least one")
    metas = kdb.read_metas()
    fps_values = sorted({meta.fps for meta in metas})
    dims = sorted({(meta.state_dim, meta.action_dim) for meta in metas})
    if len(fps_values) != 1:
        raise ValueError(f"kdb: a LeRobot dataset has one fps; the episodes have {fps_values}")
    if not EXPORT_FPS[0] <= fps_values[0] <= EXPORT_FPS[1]:  # NaN too
        raise ValueError(f"kdb: the episodes' fps {fps_values[0]:g} is outside the {EXPORT_FPS[0]:g}.."
                         f"{EXPORT_FPS[1]:,} a LeRobot dataset's timestamps and video frame rate can hold")
    if len(dims) != 1:
        raise ValueError(f"kdb: a LeRobot dataset has one state/action shape; the episodes have {dims}")
    fps = fps_values[0]
    state_dim, action_dim = dims[0]
    first = kdb.image_records(0, 0)
    cameras = {path_segment(record.camera, "kdb: camera name"): kdb.decode_image(record).shape for record in first}
    first_records = {record.camera: record for record in first}
    if video:
        for camera, (height, width, _) in cameras.items():
            if height % 2 or width % 2:
                raise ValueError(f"kdb: camera {camera!r} is {width}x{height}; yuv420p video needs even sizes "
                                 "(export with images instead)")
    keys = {camera: f"observation.images.{camera}" for camera in cameras}
    tasks: dict[str, int] = {}
    for meta in metas:
        tasks.setdefault(meta.task, len(tasks))
    features = _features(state_dim, action_dim, cameras, keys, fps, video, codec)
    schema = _data_schema(state_dim, action_dim, keys, video, features)
    data_path = root / "data" / "chunk-000" / "file-000.parquet"
    data_path.parent.mkdir(parents=True)
    videos = {camera: VideoWriter(root / "videos" / key / "chunk-000" / "file-000.mp4", fps,
                                   cameras[camera], codec, crf) for camera, key in keys.items()} if video else {}
    stats = {name: _Stats() for name in ("observation.state", "action", "timestamp", "frame_index", "episode_index",
                                         "index", "task_index", "next.reward")}
    image_stats = {key: _ImageStats() for key in keys.values()}
    episode_rows = []
    total = 0
    try:
        with pq.ParquetWriter(data_path, schema) as data:
            for position, meta in enumerate(metas):
                _check_one_image_shape(kdb, position, first_records, video)  # its image section read once
                episode = kdb.read_episode(position)
                frames = len(episode)
                frame_index = np.arange(frames, dtype=np.int64)
                columns: dict[str, Any] = {
                    "observation.state": np.asarray(episode.states, np.float32),
                    "action": np.asarray(episode.actions, np.float32),
                    "timestamp": (frame_index / fps).astype(np.float32),
                    "frame_index": frame_index,
                    "episode_index": np.full(frames, position, np.int64),
                    "index": total + frame_index,
                    "task_index": np.full(frames, tasks[meta.task], np.int64),
                    "next.reward": np.asarray(episode.rewards, np.float32),
                    "next.done": episode.terminals != 0,
                }
                episode_stats: dict[str, Any] = {}
                for name, accumulator in stats.items():
                    episode_stat = _Stats()
                    episode_stat.add(columns[name])
                    accumulator.add(columns[name])
                    episode_stats[name] = episode_stat
                for camera, key in keys.items():
                    image_stat = episode_stats[key] = _ImageStats()
                    for frame in _stat_frames(frames):
                        pixels = episode.images.frame(frame, [camera])[camera]
                        image_stat.add(pixels)
                        image_stats[key].add(pixels)
                arrays = []
                for field in schema:
                    if field.name in keys.values():
                        camera = camera_name(field.name)
                        arrays.append(pa.array([{"bytes": _png(episode, camera, frame),
                                                 "path": f"frame-{frame:06d}.png"}
                                                for frame in range(frames)], type=field.type))
                    elif pa.types.is_fixed_size_list(field.type):
                        values = columns[field.name]
                        arrays.append(pa.FixedSizeListArray.from_arrays(pa.array(values.reshape(-1)), values.shape[1]))
                    else:
                        arrays.append(pa.array(columns[field.name], type=field.type))
                data.write_table(pa.Table.from_arrays(arrays, schema=schema))
                row = {"episode_index": position, "tasks": [meta.task], "length": frames,
                       "data/chunk_index": 0, "data/file_index": 0,
                       "dataset_from_index": total, "dataset_to_index": total + frames}
                for camera, key in keys.items():
                    if video:
                        start = videos[camera].add_episode(episode.images, camera, frames)
                        row.update({f"videos/{key}/chunk_index": 0, f"videos/{key}/file_index": 0,
                                    f"videos/{key}/from_timestamp": start / fps,
                                    f"videos/{key}/to_timestamp": (start + frames) / fps})
                row.update({"meta/episodes/chunk_index": 0, "meta/episodes/file_index": 0})
                for name, episode_stat in episode_stats.items():
                    row.update({f"stats/{name}/{stat}": value for stat, value in episode_stat.result().items()})
                episode_rows.append(row)
                total += frames
                progress(position + 1, len(metas))
    finally:
        for writer in videos.values():
            writer.close()
    episodes_path = root / "meta" / "episodes" / "chunk-000" / "file-000.parquet"
    episodes_path.parent.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(episode_rows), episodes_path)
    _write_tasks(root / "meta" / "tasks.parquet", tasks)
    if not video:
        for key in keys.values():
            (root / "images" / key).mkdir(parents=True, exist_ok=True)  # lerobot leaves these behind too
    info = {
        "codebase_version": CODEBASE_VERSION, "robot_type": robot_type if robot_type is not None else (
            metas[0].embodiment or None),
        "total_episodes": len(metas), "total_frames": total, "total_tasks": len(tasks),
        "chunks_size": CHUNKS_SIZE, "data_files_size_in_mb": 100, "video_files_size_in_mb": 200,
        "fps": int(fps) if float(fps).is_integer() else fps, "splits": {"train": f"0:{len(metas)}"},
        "data_path": "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet",
        "video_path": ("videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
                       if video and keys else None),
        "features": features,
    }
    (root / "meta" / "info.json").write_text(json.dumps(info, indent=4), "utf-8")
    (root / "meta" / "stats.json").write_text(
        json.dumps({**{name: accumulator.result() for name, accumulator in stats.items()},
                    **{name: accumulator.result() for name, accumulator in image_stats.items()}}, indent=4),
        "utf-8")
    return len(metas)


def _check_one_image_shape(kdb: Any, position: int, first: dict[str, Any], video: bool) -> None:
    """ValueError unless every frame of episode ``position`` has an image of each camera of ``first`` (the
    records of the file's frame 0) and no other, all of its size (and channels, where PNGs keep them): a
    LeRobot feature has one shape, and a video stream would scale a frame of another size to its own. (The
    export is built beside its target: a refusal half-way leaves nothing.)"""
    table = kdb.image_table(position)
    if sorted(table) != sorted(first):
        raise ValueError(f"kdb: a LeRobot dataset has one set of cameras; episode 0 has {sorted(first)}, "
                         f"episode {position} {sorted(table)}")
    for camera, records in table.items():
        expected = first[camera]
        differs = (records["length"] < 0) | (records["height"] != expected.height) | \
            (records["width"] != expected.width)
        if not video:
            differs |= records["channels"] != expected.channels
        if differs.any():
            frame = int(np.flatnonzero(differs)[0])
            found = records[frame]
            what = "no image" if found["length"] < 0 else \
                f"a {found['width']}x{found['height']} image with {found['channels']} channel(s)"
            raise ValueError(f"kdb: camera {camera!r} has {what} at episode {position} frame {frame}; a LeRobot "
                             f"feature has one shape, here {expected.width}x{expected.height} with "
                             f"{expected.channels} channel(s) (episode 0 frame 0)")


def _features(state_dim: int, action_dim: int, cameras: dict[str, tuple], keys: dict[str, str], fps: float,
              video: bool, codec: str) -> dict[str, dict]:
    features: dict[str, dict] = {
        "observation.state": {"dtype": "float32", "shape": [state_dim], "names": None},
        "action": {"dtype": "float32", "shape": [action_dim], "names": None},
    }
    for camera, key in keys.items():
        height, width, _ = cameras[camera]
        feature: dict[str, Any] = {"dtype": "video" if video else "image", "shape": [height, width, 3],
                                   "names": ["height", "width", "channels"]}
        if video:
            feature["info"] = {"video.height": height, "video.width": width, "video.codec": codec,
                               "video.pix_fmt": "yuv420p", "video.is_depth_map": False, "video.fps": fps,
                               "video.channels": 3, "has_audio": False}
        features[key] = feature
    for name, dtype in (("timestamp", "float32"), ("frame_index", "int64"), ("episode_index", "int64"),
                        ("index", "int64"), ("task_index", "int64"), ("next.reward", "float32"),
                        ("next.done", "bool")):
        features[name] = {"dtype": dtype, "shape": [1], "names": None}
    return features


def _data_schema(state_dim: int, action_dim: int, keys: dict[str, str], video: bool, features: dict) -> Any:
    pa = require("pyarrow", "LeRobot datasets")

    fields = [pa.field("observation.state", pa.list_(pa.float32(), state_dim)),
              pa.field("action", pa.list_(pa.float32(), action_dim))]
    hf: dict[str, Any] = {
        "observation.state": {"feature": {"dtype": "float32", "_type": "Value"}, "length": state_dim,
                              "_type": "Sequence"},
        "action": {"feature": {"dtype": "float32", "_type": "Value"}, "length": action_dim, "_type": "Sequence"},
    }
    if not video:
        for key in keys.values():
            fields.append(pa.field(key, pa.struct([("bytes", pa.binary()), ("path", pa.string())])))
            hf[key] = {"_type": "Image"}
    for name, kind in (("timestamp", pa.float32()), ("frame_index", pa.int64()), ("episode_index", pa.int64()),
                       ("index", pa.int64()), ("task_index", pa.int64()), ("next.reward", pa.float32()),
                       ("next.done", pa.bool_())):
        fields.append(pa.field(name, kind))
        hf[name] = {"dtype": features[name]["dtype"], "_type": "Value"}
    return pa.schema(fields, metadata={"huggingface": json.dumps({"info": {"features": hf}})})


def _png(episode: Any, camera: str, frame: int) -> bytes:
    """PNG bytes of one stored image (passed through when it already is a PNG)."""
    stored = bytes(episode.images.raw(frame, camera))
    if stored.startswith(b"\x89PNG"):
        return stored
    pixels = episode.images.frame(frame, [camera])[camera]
    return encode_image(pixels if pixels.shape[2] != 4 else pixels[:, :, :3], "png", 90)


def _write_tasks(path: Path, tasks: dict[str, int]) -> None:
    """meta/tasks.parquet as lerobot writes it: task_index with the task text as the (named) pandas index."""
    pd = require("pandas", "LeRobot export")

    frame = pd.DataFrame({"task_index": np.asarray(list(tasks.values()), np.int64)},
                         index=pd.Index(list(tasks), name="task"))
    frame.to_parquet(path)


class _Stats:
    """Streaming min, max, mean, std and count of a feature (per component for vectors)."""

    def __init__(self) -> None:
        self.count = 0
        self.total: np.ndarray | None = None
        self.squares: np.ndarray | None = None
        self.low: np.ndarray | None = None
        self.high: np.ndarray | None = None

    def add(self, values: np.ndarray) -> None:
        """Take in (frames,) or (frames, dim) values."""
        rows = np.asarray(values, np.float64).reshape(len(values), -1)
        if not len(rows):
            return
        if self.total is None:
            self.total, self.squares = rows.sum(0), (rows ** 2).sum(0)
            self.low, self.high = rows.min(0), rows.max(0)
        else:
            assert self.squares is not None and self.low is not None and self.high is not None  # set with total
            self.total += rows.sum(0)
            self.squares += (rows ** 2).sum(0)
            self.low, self.high = np.minimum(self.low, rows.min(0)), np.maximum(self.high, rows.max(0))
        self.count += len(rows)

    def result(self) -> dict[str, list]:
        """The statistics as lists (the stats.json form)."""
        if self.total is None or self.squares is None or self.low is None or self.high is None:
            raise ValueError("kdb: no values to summarise")
        mean = self.total / self.count
        std = np.sqrt(np.maximum(self.squares / self.count - mean ** 2, 0))
        return {"min": self.low.tolist(), "max": self.high.tolist(), "mean": mean.tolist(), "std": std.tolist(),
                "count": [self.count]}


def _stat_frames(frames: int) -> list[int]:
    """The frames of an episode sampled for image statistics (at most 100, evenly spread, as lerobot does)."""
    return sorted(set(np.linspace(0, frames - 1, min(frames, 100)).round().astype(int).tolist()))


class _ImageStats:
    """Per-channel min, max, mean, std of RGB images in [0, 1], shaped (3, 1, 1) as lerobot writes them;
    count is the number of images."""

    def __init__(self) -> None:
        self.count = 0
        self.pixels = 0
        self.total = np.zeros(3)
        self.squares = np.zeros(3)
        self.low = np.full(3, np.inf)
        self.high = np.full(3, -np.inf)

    def add(self, pixels: np.ndarray) -> None:
        """Take in one (H, W, C) uint8 image (gray repeated to RGB, alpha dropped)."""
        step = max(1, max(pixels.shape[:2]) // 100)  # lerobot also shrinks images (to ~150 px) for statistics
        rgb = pixels[::step, ::step]
        rgb = np.repeat(rgb[:, :, :1], 3, axis=2) if rgb.shape[2] < 3 else rgb[:, :, :3]
        planes = np.ascontiguousarray(rgb.reshape(-1, 3).T)  # (3, pixels): reductions along contiguous rows
        wide = planes.astype(np.uint32)
        self.total += wide.sum(1) / 255
        self.squares += np.einsum("ij,ij->i", wide, wide, dtype=np.uint64) / 255 ** 2
        self.low = np.minimum(self.low, planes.min(1) / 255)
        self.high = np.maximum(self.high, planes.max(1) / 255)
        self.pixels += planes.shape[1]
        self.count += 1

    def result(self) -> dict[str, list]:
        """The statistics as nested (3, 1, 1) lists."""
        mean = self.total / max(self.pixels, 1)
        std = np.sqrt(np.maximum(self.squares / max(self.pixels, 1) - mean ** 2, 0))
        shaped = {"min": self.low, "max": self.high, "mean": mean, "std": std}
        return {**{name: value.reshape(3, 1, 1).tolist() for name, value in shaped.items()}, "count": [self.count]}
