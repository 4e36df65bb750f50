"""Shared data of the kdb tests: the golden vector and small generated datasets."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from arrayio import kdb

# notes/kdb.md §2.9: one episode, two frames, one 1x1x3 raw camera, created 1700000000.
GOLDEN_HEX = """
4b49 4e4f 0000 0100 0100 0000 0000 0000 0200 0000 0000 0000 9e00 0000 0000 0000
4000 0000 0000 0000 00f1 5365 0000 0000 0000 0000 0000 0000 0000 0000 0000 0000
0100 6101 0074 0000 2041 0201 0000 803f 0000 003f 0000 80bf 0000 803e 0000 0000
0000 00c0 3f00 0000 4000 0080 be00 0080 3f01 0100 0100 6301 0000 0001 0000 0003
0003 0000 0000 141e 0100 0100 6301 0000 0001 0000 0003 0003 0000 000a 141e 0000
0000 0000 0000 0200 0000 0100 0200 5000 0000 0000 0000 2200 0000 0000 0000 7200
0000 0000 0000 2c00 0000 0000 0000 4000 0000 0000 0000 1000 0000 0000 0000
"""
GOLDEN = bytes.fromhex("".join(GOLDEN_HEX.split()))

GOLDEN_EPISODE = dict(
    states=np.array([[0.5, -1.0], [1.5, 2.0]], np.float32),
    actions=np.array([[0.25], [-0.25]], np.float32),
    rewards=np.array([0.0, 1.0], np.float32),
    terminals=np.array([False, True]),
    images={"c": np.array([[[[0, 20, 30]]], [[[10, 20, 30]]]], np.uint8)},
    embodiment="a", task="t", fps=10.0, success=True, total_reward=1.0,
)


def gradient_frames(frames: int, height: int = 16, width: int = 20, shift: int = 0) -> np.ndarray:
    """Smooth synthetic camera frames (compress well, decode recognisably)."""
    y, x = np.mgrid[0:height, 0:width]
    t = np.arange(frames)[:, None, None]
    red = (x * 255 // max(1, width - 1) + 5 * t + shift) % 256
    green = (y * 255 // max(1, height - 1) + 3 * t) % 256
    blue = np.broadcast_to((128 + 7 * t) % 256, red.shape)
    return np.stack([red, green, blue], axis=-1).astype(np.uint8)


def write_sample(path: Path, episodes: int = 3, frames: int = 6, compress: str | None = "jpeg") -> Path:
    """A small two-camera file with varied episode lengths."""
    rng = np.random.default_rng(1)
    with kdb.Writer(path, compress=compress, created_timestamp=1) as writer:
        for episode in range(episodes):
            count = frames + episode
            writer.add_episode(rng.standard_normal((count, 3)), rng.standard_normal((count, 2)),
                               rewards=np.linspace(0, 1, count), terminals=np.arange(count) == count - 1,
                               images={"front": gradient_frames(count), "wrist": gradient_frames(count, shift=50)},
                               embodiment="arm", task=f"task {episode}", fps=5.0, success=bool(episode % 2))
    return path


def write_robomimic(path: Path, demos: int = 3, frames: int = 5) -> Path:
    """A robomimic-layout HDF5 file (data/demo_N/{actions, states, rewards, dones, obs/*_image})."""
    import h5py

    rng = np.random.default_rng(2)
    with h5py.File(path, "w") as hdf5:
        data = hdf5.create_group("data")
        data.attrs["env_args"] = json.dumps({"env_name": "Lift", "env_type": 1})
        for demo in (0, 1, 10)[:demos]:
            count = frames + demo % 3
            group = data.create_group(f"demo_{demo}")
            group["actions"] = rng.standard_normal((count, 7))
            group["states"] = rng.standard_normal((count, 9))
            group["rewards"] = (np.arange(count) == count - 1).astype(np.float64)
            group["dones"] = (np.arange(count) == count - 1).astype(np.int64)
            group["obs/agentview_image"] = gradient_frames(count, 12, 12)
            group["obs/robot0_eye_in_hand_image"] = gradient_frames(count, 12, 12, shift=90)
            group["obs/robot0_eef_pos"] = rng.standard_normal((count, 3))
    return path


def write_lerobot(folder: Path, episodes: int = 2, frames: int = 4) -> Path:
    """A LeRobot-v2-style folder: meta/info.json, meta/tasks.jsonl, data/chunk-000/episode_*.parquet."""
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq
    from PIL import Image

    (folder / "meta").mkdir(parents=True)
    (folder / "data" / "chunk-000").mkdir(parents=True)
    (folder / "meta" / "info.json").write_text(json.dumps({
        "fps": 15, "robot_type": "koch",
        "features": {"observation.images.top": {"dtype": "image"}, "observation.state": {"dtype": "float32"}}}))
    (folder / "meta" / "tasks.jsonl").write_text(
        "\n".join(json.dumps({"task_index": i, "task": f"stack the cubes {i}"}) for i in range(episodes)))
    rng = np.random.default_rng(3)
    for episode in range(episodes):
        count = frames + episode
        pictures = gradient_frames(count, 10, 14, shift=episode * 20)
        cells = []
        for picture in pictures:
            out = io.BytesIO()
            Image.fromarray(picture).save(out, format="PNG")
            cells.append({"bytes": out.getvalue(), "path": None})
        table = pa.table({
            "observation.state": [list(row) for row in rng.standard_normal((count, 6)).astype(np.float32)],
            "action": [list(row) for row in rng.standard_normal((count, 6)).astype(np.float32)],
            "observation.images.top": pa.array(cells, type=pa.struct([("bytes", pa.binary()),
                                                                      ("path", pa.string())])),
            "episode_index": [episode] * count,
            "frame_index": list(range(count)),
            "timestamp": [i / 15 for i in range(count)],
            "task_index": [episode] * count,
        })
        pq.write_table(table, folder / "data" / "chunk-000" / f"episode_{episode:06d}.parquet")
    return folder


def shared_block_of(tensor) -> int | None:
    """The inode of the shared-memory file that ``tensor``'s data lies in, in this process's maps (None where
    it lies in private memory): the same block twice gives the same inode."""
    address = tensor.untyped_storage().data_ptr()
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split(maxsplit=5)
            start, end = (int(part, 16) for part in fields[0].split("-"))
            if start <= address < end:
                shared = fields[1][3] == "s" and int(fields[4]) != 0
                return int(fields[4]) if shared else None
    return None
