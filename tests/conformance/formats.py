"""What the conformance suite must know per format: a complete read, and where the structure bytes lie.

``read_everything`` is chosen by the registry's ``model`` of the format, so a
new format with a known model needs nothing here. ``STRUCTURE`` names, per
format, the byte ranges of its header and index (what a bit flip must never
turn into anything but a FormatError); a registered format missing from it
fails ``test_every_format_declares_its_structure``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from arrayio._registry import FORMATS


def _read_mapping(reader: Any) -> None:
    for key in list(reader):
        np.asarray(reader[key]).tobytes()
        reader.info(key)


def _read_array(reader: Any) -> None:
    reader.read()
    for _chunk in reader.iter_chunks():
        pass


def _read_episodes(reader: Any) -> None:
    for position in range(len(reader)):
        episode = reader.read_episode(position)
        episode.states.tobytes()
        episode.actions.tobytes()
        for frame in range(len(episode)):
            episode.images.frame(frame)


def _read_matrix(reader: Any) -> None:
    reader.values()
    reader.packed.tobytes()


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


def _field(record: Any, name: str, base: int = 0, index: int = 0) -> tuple[int, int]:
    start = record.offset_of(name, base=base, index=index)
    return start, start + record.dtype[name].itemsize


def _kastore_free(store: Any) -> list[tuple[int, int]]:
    from arrayio.kastore._records import HEADER, ITEM

    table_end = HEADER.size + ITEM.size * len(store)
    # Same-size type codes (int32 <-> uint32) and key bytes that keep the order are values, not structure.
    return [_field(HEADER, "version_minor"), *(_field(ITEM, "type", HEADER.size, i) for i in range(len(store))),
            (table_end, _keyed_structure(store)[0][1])]


def _kast_free(store: Any) -> list[tuple[int, int]]:
    from arrayio.kast._records import ENTRY, HEADER

    return [_field(HEADER, "version_minor"), (HEADER.size + ENTRY.size * len(store), store.header.data_offset)]


def _bloscpack_free(reader: Any) -> list[tuple[int, int]]:
    from arrayio.bloscpack._records import HEADER, METADATA_HEADER

    free = [_field(HEADER, "typesize")]  # any Blosc typesize is valid; it only tunes the shuffle
    if reader.metadata_section is not None:
        free.append(_field(METADATA_HEADER, "meta_level", reader.metadata_section.offset))
    return free


def _kdb_free(reader: Any) -> list[tuple[int, int]]:
    from arrayio.kdb._records import HEADER, INDEX_ENTRY

    free = [_field(HEADER, "version_minor"), _field(HEADER, "created_timestamp")]
    for position in range(len(reader)):
        entry = reader.entry(position)
        free.append(_field(INDEX_ENTRY, "episode_id", reader.header.index_offset, position))
        free.append((entry.meta_offset, entry.meta_offset + entry.meta_length))  # names, fps, reward: values
    return free


# Where a bit flip may go unnoticed: fields whose every value is valid (a minor version, a timestamp,
# an id, text), so neither reading nor validate can tell a flipped value from a written one.
FREE: dict[str, Callable[[Any], list[tuple[int, int]]]] = {
    "kastore": _kastore_free,
    "kast": _kast_free,
    "bloscpack": _bloscpack_free,
    "kdb": _kdb_free,
    "pycauset": lambda reader: [],
}


def free_offsets(format_name: str, reader: Any) -> set[int]:
    """Offsets of the demo file's bytes whose flips may read as valid (see FREE)."""
    return {offset for start, stop in FREE[format_name](reader) for offset in range(start, stop)}


def structure_offsets(format_name: str, reader: Any) -> list[int]:
    """Every byte offset of the header and index of the open demo file, ascending."""
    offsets: set[int] = set()
    for start, stop in STRUCTURE[format_name](reader):
        offsets.update(range(start, stop))
    return sorted(offsets)
