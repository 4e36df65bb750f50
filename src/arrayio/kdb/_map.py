"""The byte map of a .kdb file: header, each episode's metadata, state/action rows and image records, the index."""

from __future__ import annotations

from .._binary import Source
from ..bytemap import Collector, Section
from ..errors import FormatError
from ._reader import KdbFile
from ._records import HEADER_SIZE

# Above this many frames in the file, an episode's images are one section each instead of one per image.
FRAME_DETAIL_LIMIT = 2048


def sections(source: Source) -> list[Section]:
    """Header, index, and each episode's sections (meta, steps, images); a stop marker where parsing failed."""
    return Collector(source).run(_parse)


def _parse(found: Collector) -> None:
    source = found.source
    try:
        kdb = KdbFile(source)
    except FormatError:
        if source.size >= HEADER_SIZE:
            found.add(0, HEADER_SIZE, "header", "header")
        raise
    header = kdb.header
    found.add(0, HEADER_SIZE, "header", "header")
    found.add(header.index_offset, header.index_length, "table", f"index ({len(kdb)} episodes)")
    index_end = header.index_offset + header.index_length
    found.add(index_end, source.size - index_end, "trailing", "after the index")
    detailed = kdb.num_frames <= FRAME_DETAIL_LIMIT
    for position in range(len(kdb)):
        entry = kdb.entry(position)
        found.add(entry.meta_offset, entry.meta_length, "metadata", f"episode {position} metadata")
        found.add(entry.actions_offset, entry.actions_length, "steps", f"episode {position} state/action")
        if detailed:
            _images(found, kdb, position, entry.num_frames)
        else:
            found.add(entry.images_offset, entry.images_length, "image",
                      f"episode {position} images ({entry.num_frames} frames)")


def _images(found: Collector, kdb: KdbFile, position: int, num_frames: int) -> None:
    """One section per image and one per run of record headers between images (camera count, name, sizes)."""
    for frame in range(num_frames):
        cursor = kdb.frame_offset(position, frame)
        for record in kdb.image_records(position, frame):
            found.add(cursor, record.offset - cursor, "record", f"episode {position} frame {frame} records")
            found.add(record.offset, record.length, "image", f"episode {position} frame {frame} {record.camera}")
            cursor = record.offset + record.length
        found.add(cursor, kdb.frame_offset(position, frame + 1) - cursor, "record",
                  f"episode {position} frame {frame} records")
