"""Fuzz the LeRobot ingest: a dataset folder built from one input, then ``ingest_lerobot`` into a .kdb.

The input is split at SEPARATOR into up to four files: ``meta/info.json``, ``meta/episodes.jsonl``,
``meta/tasks.jsonl`` and ``data/chunk-000/episode_000000.parquet`` (an empty part leaves the file
out). Everything in a dataset is untrusted, so the only allowed outcome besides success is a
FormatError (a LimitError included) naming the file and field.
"""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

from arrayio.robot.lerobot import ingest_lerobot  # at import: atheris instruments arrayio while this loads

FORMAT = "lerobot"
SEPARATOR = b"\n\xff\xfe\n"
FILES = ("meta/info.json", "meta/episodes.jsonl", "meta/tasks.jsonl", "data/chunk-000/episode_000000.parquet")


def exercise(path: str, data: bytes) -> None:
    """Build the dataset folder beside ``path`` and ingest it."""
    folder = Path(path).parent / "dataset"
    shutil.rmtree(folder, ignore_errors=True)
    for name, part in zip(FILES, data.split(SEPARATOR)):
        if part:
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_bytes(part)
    target = Path(path).parent / "out.kdb"
    try:
        ingest_lerobot(folder, target)
    finally:
        target.unlink(missing_ok=True)


def _parquet(rows: int, image: bool) -> bytes:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
    from PIL import Image

    png = io.BytesIO()
    Image.fromarray(np.full((4, 6, 3), 90, np.uint8)).save(png, format="PNG")
    columns = {"observation.state": [[0.5 * row, 1.0] for row in range(rows)],
               "action": [[float(row)] for row in range(rows)],
               "timestamp": [row / 10 for row in range(rows)], "frame_index": list(range(rows)),
               "episode_index": [0] * rows, "index": list(range(rows)), "task_index": [0] * rows,
               "next.reward": [0.25] * rows}
    if image:
        columns["observation.images.front"] = [{"bytes": png.getvalue(), "path": None}] * rows
    out = io.BytesIO()
    pq.write_table(pa.table(columns), out)
    return out.getvalue()


def seeds(folder: Path):
    """Valid v2.1-style datasets (images in the parquet, or a declared video that is missing)."""
    features = {"observation.state": {"dtype": "float32", "shape": [2]}, "action": {"dtype": "float32", "shape": [1]},
                "observation.images.front": {"dtype": "image", "shape": [4, 6, 3]}}
    info = {"codebase_version": "v2.1", "fps": 10, "robot_type": "arm", "chunks_size": 1000,
            "data_path": "data/chunk-{episode_chunk:03d}/episode_{episode_index:06d}.parquet",
            "video_path": "videos/chunk-{episode_chunk:03d}/{video_key}/episode_{episode_index:06d}.mp4",
            "features": features}
    episodes = json.dumps({"episode_index": 0, "tasks": ["pick"], "length": 3}).encode()
    tasks = json.dumps({"task_index": 0, "task": "pick"}).encode()
    yield "images", SEPARATOR.join([json.dumps(info).encode(), episodes, tasks, _parquet(3, True)])
    video = {**info, "features": {**features, "observation.images.wrist": {"dtype": "video", "shape": [4, 6, 3]}}}
    yield "video", SEPARATOR.join([json.dumps(video).encode(), episodes, tasks, _parquet(2, False)])
    yield "no-episodes", SEPARATOR.join([json.dumps(info).encode(), b"", b"", _parquet(2, False)])
