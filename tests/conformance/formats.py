"""What the conformance suite must know per format: a complete read, and where the structure bytes lie.

``read_everything`` is chosen by the registry's ``model`` of the format, so a
new format with a known model needs nothing here. ``STRUCTURE`` names, per
format, the byte ranges of its header and index (what a bit flip must never
turn into anything but a FormatError); a registered format missing from it
fails ``test_every_format_declares_its_structure``.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from arrayio._registry import FORMATS


def _read_mapping(reader: Any) -> None:
    for key in list(reader):
        np.asarray(reader[key]).sum()
        reader.info(key)


def _read_array(reader: Any) -> None:
    reader.read()
    for _chunk in reader.iter_chunks():
        pass


def _read_episodes(reader: Any) -> None:
    for position in range(len(reader)):
        episode = reader.read_episode(position)
        episode.states.sum()
        episode.actions.sum()
        for frame in range(len(episode)):
            episode.images.frame(frame)


def _read_matrix(reader: Any) -> None:
    reader.values()
    reader.packed.sum()


READERS: dict[str, Callable[[Any], None]] = {
    "mapping": _read_mapping, "array": _read_array, "episodes": _read_episodes, "matrix": _read_matrix,
}


def read_everything(format_name: str, reader: Any) -> None:
    """Touch every byte a user can reach through ``reader``: all arrays, chunks, frames and images."""
    READERS[FORMATS[format_name].model](reader)


def _keyed_structure(store: Any) -> list[tuple[int, int]]:
    starts = [store.extent(key)[0] for key in store]
    return [(0, min(starts) if starts else store.file_size)]


def _bloscpack_structure(reader: Any) -> list[tuple[int, int]]:
    digest = reader.checksum.size
    ranges = [(0, reader.data_offset)]
    for index in range(reader.nchunks):
        position, header = reader.chunk_location(index)
        ranges.append((position, position + 16))
        ranges.append((position + header.cbytes, position + header.cbytes + digest))
    return ranges


def _kdb_structure(reader: Any) -> list[tuple[int, int]]:
    header = reader.header
    ranges = [(0, 64), (header.index_offset, header.index_offset + header.index_length)]
    for position in range(len(reader)):
        entry = reader.entry(position)
        ranges.append((entry.meta_offset, entry.meta_offset + entry.meta_length))
    return ranges


def _pycauset_structure(reader: Any) -> list[tuple[int, int]]:
    ranges = [(0, 272)]
    for slot in reader.slots:
        start = int(slot.fields.metadata_offset)
        ranges.append((start, start + 32))
    return ranges


STRUCTURE: dict[str, Callable[[Any], list[tuple[int, int]]]] = {
    "kastore": _keyed_structure,
    "kast": _keyed_structure,
    "bloscpack": _bloscpack_structure,
    "kdb": _kdb_structure,
    "pycauset": _pycauset_structure,
}


def structure_offsets(format_name: str, reader: Any) -> list[int]:
    """Every byte offset of the header and index of the open demo file, ascending."""
    offsets: set[int] = set()
    for start, stop in STRUCTURE[format_name](reader):
        offsets.update(range(start, stop))
    return sorted(offsets)
