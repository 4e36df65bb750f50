"""Sample files of every format written by us and by the reference packages, and how to compare a remote
read with a local one (shared by the remote tests and the benchmark)."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import references

BUCKET = "arrayio-test"
# The object stores every remote test runs against, each through its fsspec backend and a loopback server.
OBJECT_STORES = ["s3", "gs", "az"]
RNG_SEED = 20261122


def _kastore_data() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(RNG_SEED)
    return {"big": rng.standard_normal(1 << 17), "other": rng.integers(0, 255, 1 << 19, dtype=np.uint8),
            "small": np.arange(100, dtype=np.int32)}


def _bloscpack_array() -> np.ndarray:
    return np.random.default_rng(RNG_SEED).standard_normal((4096, 64))


def _matrix() -> np.ndarray:
    return np.random.default_rng(RNG_SEED).standard_normal((512, 256))


def _kdb_episodes() -> list[dict[str, Any]]:
    rng = np.random.default_rng(RNG_SEED)
    return [{"states": rng.standard_normal((5, 7)).astype(np.float32),
             "actions": rng.standard_normal((5, 3)).astype(np.float32),
             "images": {"front": rng.integers(0, 255, (5, 64, 64, 3), dtype=np.uint8)},
             "task": f"task {index}"} for index in range(12)]


def write_sample(kind: str, folder: Path) -> Path:
    """Write one sample file: ``kind`` is "<format>/<writer>" with writer "ours" or "reference"."""
    from arrayio import bloscpack, kast, kastore, kdb, pycauset

    name, writer = kind.split("/")
    path = folder / f"{name}-{writer}.{EXTENSIONS[name]}"
    if kind == "kastore/ours":
        kastore.dump(_kastore_data(), path)
    elif kind == "kastore/reference":
        pytest.importorskip("kastore").dump(_kastore_data(), str(path))
    elif kind == "kast/ours":
        kast.dump(_kastore_data(), path)
    elif kind == "bloscpack/ours":
        bloscpack.pack_ndarray_to_file(_bloscpack_array(), path, chunk_size=128 << 10)
    elif kind == "bloscpack/reference":
        references.bloscpack(pytest.importorskip).pack_ndarray_to_file(_bloscpack_array(), str(path),
                                                                       chunk_size=128 << 10)
    elif kind == "kdb/ours":
        with kdb.Writer(path, created_timestamp=0) as out:
            for episode in _kdb_episodes():
                out.add_episode(episode["states"], episode["actions"], images=episode["images"],
                                task=episode["task"])
    elif kind == "pycauset/ours":
        pycauset.save(_matrix(), path)
    elif kind == "pycauset/reference":
        reference = references.pycauset(str(folder), pytest.importorskip)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            reference.save(reference.matrix(_matrix()), str(path))
    else:
        raise ValueError(kind)
    return path


EXTENSIONS = {"kastore": "kas", "kast": "kast", "bloscpack": "blp", "kdb": "kdb", "pycauset": "pycauset"}
SAMPLES = ["kastore/ours", "kastore/reference", "kast/ours", "bloscpack/ours", "bloscpack/reference",
           "kdb/ours", "pycauset/ours", "pycauset/reference"]


def snapshot(reader: Any) -> Any:
    """Everything a reader holds, as plain Python and numpy values, to compare a remote with a local read."""
    from arrayio.bloscpack import BloscpackFile
    from arrayio.kdb import KdbFile
    from arrayio.pycauset import Container

    if isinstance(reader, BloscpackFile):
        return {"metadata": reader.metadata, "array": reader.read()}
    if isinstance(reader, KdbFile):
        return [{"meta": episode.meta, "steps": episode.steps.copy(),
                 "images": {camera: np.asarray(frames) for camera, frames in episode.images.items()}}
                for episode in reader]
    if isinstance(reader, Container):
        return {"metadata": reader.metadata, "array": np.array(reader.array)}
    return {key: np.array(reader[key]) for key in reader}


def assert_same(left: Any, right: Any) -> None:
    """Deep equality of snapshots (numpy arrays compared element-wise, dtype included)."""
    if isinstance(left, np.ndarray):
        assert isinstance(right, np.ndarray) and left.dtype == right.dtype and left.shape == right.shape
        assert np.array_equal(left, right)
    elif isinstance(left, dict):
        assert isinstance(right, dict) and list(left) == list(right)
        for key in left:
            assert_same(left[key], right[key])
    elif isinstance(left, (list, tuple)) and not hasattr(left, "_fields"):
        assert len(left) == len(right)
        for a, b in zip(left, right):
            assert_same(a, b)
    else:
        assert left == right


def write_jpeg_shards(folder: Path, shards: int, episodes: int,
                      episode: Callable[[int, int], tuple[np.ndarray, np.ndarray, dict[str, Any]]]) -> list[Path]:
    """``shards`` .kdb files (JPEG images) of ``episodes`` episodes each: ``episode(shard, number)`` gives one's
    states, actions and the rest of ``add_episode``'s arguments (its images among them)."""
    from arrayio import kdb

    paths = []
    for shard in range(shards):
        path = folder / f"part-{shard}.kdb"
        with kdb.Writer(path, compress="jpeg") as writer:
            for number in range(episodes):
                states, actions, rest = episode(shard, number)
                writer.add_episode(states, actions, **rest)
        paths.append(path)
    return paths


def put_shards(paths: list[Path], s3_put: Callable[[str, bytes], str], request: Any, what: str) -> str:
    """The ``s3://`` glob of ``paths`` put on the S3 server under a prefix of ``what`` and the test's name (with
    its parameters, less the brackets a glob would read as a set)."""
    prefix = f"{what}-" + request.node.name.replace("[", "-").replace("]", "")
    for path in paths:
        s3_put(f"{prefix}/{path.name}", path.read_bytes())
    return f"s3://{BUCKET}/{prefix}/*.kdb"
