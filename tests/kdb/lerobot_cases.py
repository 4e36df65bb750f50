"""Small LeRobot datasets in exactly the layouts the `lerobot` package writes (notes/lerobot.md):
v3.0 (episodes concatenated in one parquet and one MP4 per camera, AV1 or H.264, or PNG images in the
parquet) and v2.1 (one parquet and one MP4 per episode, episodes.jsonl, tasks.jsonl). Built with
pyarrow and PyAV, independently of arrayio's own exporter."""

from __future__ import annotations

import io
import json
from fractions import Fraction
from pathlib import Path

import numpy as np

FPS = 30
HEIGHT, WIDTH = 64, 96
TASKS = ["pick up the red cube", "push the blue block to the left"]
CAMERA = "observation.images.front"
# Like lerobot's AV1 files: time base 1/15360, so frame k sits at k * 512 ticks at 30 fps.
TIME_BASE = Fraction(1, 15360)


def video_frames(count: int, first: int = 0) -> np.ndarray:
    """Frames that differ clearly from each other: a gradient and a bright block whose place is the frame number."""
    y, x = np.mgrid[0:HEIGHT, 0:WIDTH]
    frames = np.empty((count, HEIGHT, WIDTH, 3), np.uint8)
    for k in range(count):
        n = first + k
        picture = np.stack([(x * 2 + 40) % 256, (y * 3 + 20) % 256, np.full_like(x, 90)], -1).astype(np.uint8)
        row, column = 8 * ((n // 9) % 6), 8 * (n % 9) + 16
        picture[row:row + 16, column:column + 16] = (250, 250, 250)
        frames[k] = picture
    return frames


def encode_mp4(path: Path, frames: np.ndarray, codec: str) -> None:
    """An MP4 as lerobot writes it: yuv420p, a keyframe every 2 frames, frame n at n/FPS."""
    import av

    path.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(path), "w") as container:
        name = {"av1": "libsvtav1", "h264": "libx264"}[codec]
        options = {"crf": "30", "preset": "12"} if codec == "av1" else {"crf": "18"}
        stream = container.add_stream(name, rate=FPS, options=options)
        stream.width, stream.height, stream.pix_fmt = WIDTH, HEIGHT, "yuv420p"
        stream.codec_context.gop_size = 2
        stream.time_base = TIME_BASE
        for n, pixels in enumerate(frames):
            frame = av.VideoFrame.from_ndarray(pixels, format="rgb24")
            frame.pts = n * int(1 / (FPS * TIME_BASE))
            frame.time_base = TIME_BASE
            container.mux(stream.encode(frame))
        container.mux(stream.encode(None))


def _png(pixels: np.ndarray) -> bytes:
    from PIL import Image

    out = io.BytesIO()
    Image.fromarray(pixels).save(out, format="PNG")
    return out.getvalue()


def _features(video: str | None) -> dict:
    camera = ({"dtype": "video", "shape": [HEIGHT, WIDTH, 3], "names": ["height", "width", "channels"],
               "info": {"video.height": HEIGHT, "video.width": WIDTH, "video.codec": video, "video.pix_fmt": "yuv420p",
                        "video.is_depth_map": False, "video.fps": FPS, "video.channels": 3, "has_audio": False}}
              if video else {"dtype": "image", "shape": [HEIGHT, WIDTH, 3], "names": ["height", "width", "channels"]})
    scalar = {"shape": [1], "names": None}
    return {"observation.state": {"dtype": "float32", "shape": [6], "names": [f"joint{i}" for i in range(6)]},
            "action": {"dtype": "float32", "shape": [6], "names": [f"joint{i}" for i in range(6)]},
            CAMERA: camera,
            "timestamp": {"dtype": "float32", **scalar}, "frame_index": {"dtype": "int64", **scalar},
            "episode_index": {"dtype": "int64", **scalar}, "index": {"dtype": "int64", **scalar},
            "task_index": {"dtype": "int64", **scalar}}


def episode_values(lengths: list[int]) -> list[dict]:
    """States, actions, task and frames of each episode."""
    rng = np.random.default_rng(5)
    values, first = [], 0
    for episode, length in enumerate(lengths):
        values.append({"state": rng.standard_normal((length, 6)).astype(np.float32),
                       "action": rng.standard_normal((length, 6)).astype(np.float32),
                       "task_index": episode % 2, "frames": video_frames(length, first)})
        first += length
    return values


def _data_table(episodes: list[dict], image_mode: bool, first_index: int = 0, only: int | None = None):
    import pyarrow as pa

    columns: dict[str, list] = {name: [] for name in ("observation.state", "action", "timestamp", "frame_index",
                                                      "episode_index", "index", "task_index")}
    cells = []
    index = first_index
    for number, episode in enumerate(episodes):
        if only is not None and number != only:
            continue
        for k in range(len(episode["state"])):
            columns["observation.state"].append(episode["state"][k])
            columns["action"].append(episode["action"][k])
            columns["timestamp"].append(np.float32(k / FPS))
            columns["frame_index"].append(k)
            columns["episode_index"].append(number)
            columns["index"].append(index)
            columns["task_index"].append(episode["task_index"])
            if image_mode:
                cells.append({"bytes": _png(episode["frames"][k]), "path": f"frame-{k:06d}.png"})
            index += 1
    fields = [pa.field("observation.state", pa.list_(pa.float32(), 6)), pa.field("action", pa.list_(pa.float32(), 6))]
    arrays = [pa.FixedSizeListArray.from_arrays(pa.array(np.concatenate(columns[name]).reshape(-1)), 6)
              for name in ("observation.state", "action")]
    if image_mode:
        kind = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
        fields.append(pa.field(CAMERA, kind))
        arrays.append(pa.array(cells, type=kind))
    for name, kind in (("timestamp", pa.float32()), ("frame_index", pa.int64()), ("episode_index", pa.int64()),
                       ("index", pa.int64()), ("task_index", pa.int64())):
        fields.append(pa.field(name, kind))
        arrays.append(pa.array(columns[name], type=kind))
    schema = pa.schema(fields, metadata={"huggingface": json.dumps({"info": {"features": {}}})})
    return pa.Table.from_arrays(arrays, schema=schema)


def write_lerobot_v30(folder: Path, lengths: list[int], video: str | None = "av1", task_column: str = "task") -> list:
    """A v3.0 dataset; ``video`` "av1"/"h264" or None for PNG images in the parquet. Returns the episode values."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    episodes = episode_values(lengths)
    (folder / "data" / "chunk-000").mkdir(parents=True)
    (folder / "meta" / "episodes" / "chunk-000").mkdir(parents=True)
    pq.write_table(_data_table(episodes, image_mode=video is None), folder / "data" / "chunk-000" / "file-000.parquet")
    if video:
        encode_mp4(folder / "videos" / CAMERA / "chunk-000" / "file-000.mp4",
                   np.concatenate([episode["frames"] for episode in episodes]), video)
    rows, start = [], 0
    for number, length in enumerate(lengths):
        row = {"episode_index": number, "tasks": [TASKS[episodes[number]["task_index"]]], "length": length,
               "data/chunk_index": 0, "data/file_index": 0, "dataset_from_index": start,
               "dataset_to_index": start + length}
        if video:
            row.update({f"videos/{CAMERA}/chunk_index": 0, f"videos/{CAMERA}/file_index": 0,
                        f"videos/{CAMERA}/from_timestamp": start / FPS,
                        f"videos/{CAMERA}/to_timestamp": (start + length) / FPS})
        row.update({"meta/episodes/chunk_index": 0, "meta/episodes/file_index": 0,
                    "stats/action/mean": episodes[number]["action"].mean(0).tolist()})
        rows.append(row)
        start += length
    pq.write_table(pa.Table.from_pylist(rows), folder / "meta" / "episodes" / "chunk-000" / "file-000.parquet")
    pq.write_table(pa.table({task_column: pa.array(TASKS, pa.large_string()), "task_index": [0, 1]}),
                   folder / "meta" / "tasks.parquet")
    info = {"codebase_version": "v3.0", "robot_type": "fixture_arm", "total_episodes": len(lengths),
            "total_frames": sum(lengths), "total_tasks": 2, "chunks_size": 1000, "data_files_size_in_mb": 100,
            "video_files_size_in_mb": 200, "fps": FPS, "splits": {"train": f"0:{len(lengths)}"},
            "data_path": "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet",
            "video_path": "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4" if video else None,
            "features": _features(video)}
    (folder / "meta" / "info.json").write_text(json.dumps(info, indent=4))
    (folder / "meta" / "stats.json").write_text("{}")
    return episodes


def write_lerobot_v21(folder: Path, lengths: list[int], video: str = "h264") -> list:
    """A v2.1 dataset: one parquet and one MP4 per episode, episodes.jsonl and tasks.jsonl."""
    import pyarrow.parquet as pq

    episodes = episode_values(lengths)
    (folder / "meta").mkdir(parents=True)
    start = 0
    for number, length in enumerate(lengths):
        path = folder / "data" / "chunk-000" / f"episode_{number:06d}.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(_data_table(episodes, image_mode=False, first_index=start, only=number), path)
        encode_mp4(folder / "videos" / "chunk-000" / CAMERA / f"episode_{number:06d}.mp4", episodes[number]["frames"],
                   video)
        start += length
    (folder / "meta" / "episodes.jsonl").write_text("\n".join(
        json.dumps({"episode_index": n, "tasks": [TASKS[episodes[n]["task_index"]]], "length": length})
        for n, length in enumerate(lengths)))
    (folder / "meta" / "tasks.jsonl").write_text("\n".join(
        json.dumps({"task_index": n, "task": task}) for n, task in enumerate(TASKS)))
    info = {"codebase_version": "v2.1", "robot_type": "fixture_arm", "total_episodes": len(lengths),
            "total_frames": sum(lengths), "total_tasks": 2, "total_videos": len(lengths), "total_chunks": 1,
            "chunks_size": 1000, "fps": FPS, "splits": {"train": f"0:{len(lengths)}"},
            "data_path": "data/chunk-{episode_chunk:03d}/episode_{episode_index:06d}.parquet",
            "video_path": "videos/chunk-{episode_chunk:03d}/{video_key}/episode_{episode_index:06d}.mp4",
            "features": _features(video)}
    (folder / "meta" / "info.json").write_text(json.dumps(info, indent=4))
    return episodes


def closest_frame(pixels: np.ndarray, candidates: np.ndarray) -> tuple[int, float]:
    """(index of the candidate nearest to ``pixels``, its mean absolute difference)."""
    errors = np.abs(candidates.astype(np.int16) - pixels.astype(np.int16)).reshape(len(candidates), -1).mean(1)
    best = int(np.argmin(errors))
    return best, float(errors[best])
