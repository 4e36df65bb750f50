"""Conversions: robomimic-style HDF5 into .kdb, and .kdb out to one .npz
(LeRobot datasets in and out live in ``lerobot.py``; ``ingest_lerobot`` is re-exported here).

Ingest streams one episode at a time through the writer's frame-by-frame form,
reading sources in bounded slices, so memory does not grow with the dataset.
h5py and pyarrow are imported only by the function that needs them.
"""

from __future__ import annotations

import json
import os
import re
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from .._edge import open_output
from .._names import path_segment
from .._optional import require
from ..errors import FormatError, naming_file
from ..kdb import Writer
from ..kdb import open as open_file
from ._arguments import finite_number
from .lerobot import ingest_lerobot

__all__ = ["export_npz", "ingest_hdf5", "ingest_lerobot"]

Progress = Callable[[int, int], None]
# Frames read from an HDF5 demo per slice (bounds the memory of long image demos).
HDF5_SLICE = 64
_DEMO = re.compile(r"demo_(\d+)$")


def _demo_number(name: str) -> int:
    match = _DEMO.match(name)
    assert match is not None  # only names that match are sorted
    return int(match[1])


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
    fps = finite_number("fps", fps, positive=True)
    h5py = require("h5py", "kdb ingest-hdf5")
    try:
        opened = h5py.File(source, "r")
    except (FileNotFoundError, IsADirectoryError, PermissionError):
        raise
    except OSError as error:  # h5py's message names neither the file nor what it is not
        raise FormatError(f"HDF5: not an HDF5 file ({error})", format="HDF5").naming(os.fsdecode(source)) from None
    # A file that is not in robomimic's layout names itself; the output is not published.
    with opened as hdf5, naming_file(os.fsdecode(source)):
        if "data" not in hdf5:
            raise FormatError("HDF5: no 'data' group (not a robomimic-layout file)", format="HDF5")
        data = hdf5["data"]
        if task is None:
            task = _robomimic_task(data.attrs.get("env_args"))
        demos = sorted((name for name in data if _DEMO.match(name)), key=_demo_number)
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
    if not hasattr(demo, "keys"):
        raise FormatError(f"HDF5: data/{name} is a dataset, not a demo group", format="HDF5")
    actions = demo.get("actions")
    if not hasattr(actions, "shape") or len(actions.shape) < 1:
        raise FormatError(f"HDF5: data/{name} has no 'actions' dataset", format="HDF5")
    frames = actions.shape[0]
    if frames == 0:
        warnings.warn(f"HDF5: data/{name} has no frames and is left out (kdb cannot hold empty episodes)",
                      RuntimeWarning, stacklevel=3)
        return False
    group = demo.get("obs", {})
    obs = {key: group[key] for key in sorted(group) if hasattr(group[key], "shape")}
    if hasattr(demo.get("states"), "shape"):
        named_parts = {"states": demo["states"]}
    else:
        named_parts = {f"obs/{key}": data for key, data in obs.items() if data.ndim == 2 and data.dtype.kind == "f"}
    for label, data in {"actions": actions, **named_parts, **{key: demo[key] for key in ("rewards", "dones")
                                                                if key in demo}}.items():
        if getattr(data, "dtype", np.dtype(object)).kind not in "biuf":  # a cast fails later, naming nothing
            raise FormatError(f"HDF5: data/{name}/{label} holds {getattr(data, 'dtype', type(data).__name__)} values, "
                              "not numbers", format="HDF5")
    state_parts = list(named_parts.values())
    cameras = {key.removesuffix("_image"): data for key, data in obs.items()
               if data.ndim == 4 and data.dtype == np.uint8}
    rewards = np.asarray(demo["rewards"], dtype=np.float32).reshape(-1) if "rewards" in demo else np.zeros(frames)
    dones = np.asarray(demo["dones"]).reshape(-1) != 0 if "dones" in demo else np.arange(frames) == frames - 1
    for key in ("rewards", "dones"):
        if key in demo and demo[key].shape not in ((frames,), (frames, 1)):
            raise FormatError(f"HDF5: data/{name}/{key} has shape {demo[key].shape}; one value per frame (the "
                              f"{frames} rows of actions) is expected", format="HDF5")
    lengths = {f"state part {number}": len(part) for number, part in enumerate(state_parts)}
    for label, length in lengths.items():
        if length != frames:
            raise FormatError(f"HDF5: data/{name} {label} has {length} rows, actions has {frames}", format="HDF5")
    for camera, images in cameras.items():
        if images.shape[0] != frames:
            raise FormatError(f"HDF5: data/{name}/obs/{camera} has {images.shape[0]} frames, actions has {frames}",
                              format="HDF5")
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


def export_npz(source: Any, target: Any, *, images: bool = True, progress: Progress = _no_progress) -> int:
    """Write every episode of a .kdb file into one .npz (``episode_<id>.states`` ..., images decoded).

    ``episodes.json`` (a 0-d string array) holds the metadata of every episode.
    Returns the number of episodes.
    """
    with open_file(source) as kdb, open_output(target) as stream:
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
                        name = path_segment(camera, "kdb: camera name")
                        yield f"{prefix}.images.{name}", episode.images.stack(camera)[0]
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
