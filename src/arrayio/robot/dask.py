"""A dask.bag of kdb episodes over many files (optional extra ``dask``): ``kdb_bag(targets)``.

Partitions hold only the location of their file (path or URL) and a range of
episode positions; each worker opens the file itself.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

import numpy as np

from .._optional import require
from .._remote._settings import checked_options
from .._sources import RemoteFile, is_url, resolve, target_list
from ..dask import location_of, reach
from ..kdb import Episode
from ..kdb import open as open_file
from ._arguments import whole_number

__all__ = ["kdb_bag"]


def _episodes(location: str, options: dict, size: int | None, etag: str | None, start: int,
              stop: int | None) -> list:
    """Episodes ``start..stop`` of one kdb file, their images decoded (a partition of kdb_bag)."""
    target = reach(location, options, size, etag)
    episodes = []
    with open_file(target) as kdb:
        for position in range(start, len(kdb) if stop is None else stop):
            episode = kdb.read_episode(position)
            images = {camera: np.asarray(frames) for camera, frames in episode.images.items()}
            episodes.append(Episode(episode.meta, episode.steps.copy(), images))  # type: ignore[arg-type]
    return episodes


def kdb_bag(targets: Iterable[Any], storage_options: dict | None = None,
            episodes_per_partition: int | None = None) -> Any:
    """A ``dask.bag`` of the episodes of many ``.kdb`` files (paths or URLs; one path alone is one file).

    One partition per file, or per ``episodes_per_partition`` episodes (then
    each file's header is read here to count them). Elements are ``kdb.Episode``
    values whose ``images`` map camera -> (frames, H, W, C) uint8 arrays.
    """
    require("dask.bag", "arrayio.robot.dask")
    import dask
    import dask.bag

    options = checked_options(storage_options)
    if episodes_per_partition is not None:
        episodes_per_partition = whole_number("episodes_per_partition", episodes_per_partition, 1)
    parts = []
    for target in target_list(targets):
        if episodes_per_partition is None:  # nothing to read here: the worker opens the file
            where = target.url if isinstance(target, RemoteFile) else (
                target if is_url(target) else os.path.abspath(os.fspath(target)))
            parts.append(dask.delayed(_episodes, pure=True)(where, options, None, None, 0, None))
            continue
        resolved = resolve(target, storage_options)
        location = location_of(resolved)
        with open_file(resolved) as kdb:
            count = len(kdb)
        for start in range(0, count, episodes_per_partition):
            parts.append(dask.delayed(_episodes, pure=True)(*location, start,
                                                            min(count, start + episodes_per_partition)))
    return dask.bag.from_delayed(parts)
