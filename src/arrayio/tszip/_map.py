"""The byte map of a tszip file: each member's local header and data, the central directory, the end records."""

from __future__ import annotations

from .._binary import Source
from ..bytemap import Collector, Section
from ._records import END, ZIP64_END, ZIP64_LOCATOR
from ._zip import data_offset, read_directory


def sections(source: Source) -> list[Section]:
    """Every member, the directory and the end records; a stop marker where parsing failed."""
    return Collector(source).run(_parse)


def _kind(name: str) -> str:
    """Chunks are the numbered members; ``.zarray``/``.zattrs``/``.zgroup`` are metadata."""
    return "chunk" if name.rpartition("/")[2].isdigit() else "metadata"


def _parse(found: Collector) -> None:
    source = found.source
    directory = read_directory(source)
    latest = set(directory.latest().values())
    for member in directory.members:
        start = data_offset(source, member)
        found.add(member.local_offset, start - member.local_offset, "record", f"local header of {member.name}")
        kind = _kind(member.name) if member in latest else "stale"
        found.add(start, member.compressed_size, kind, member.name if member in latest
                  else f"{member.name} (superseded by a later member of the same name)")
    found.add(directory.directory_offset, directory.directory_size, "table",
              f"central directory ({len(directory.members)} entries)")
    if directory.zip64_offset is not None:
        found.add(directory.zip64_offset, ZIP64_END.size, "header", "zip64 end of central directory")
        found.add(directory.end_offset - ZIP64_LOCATOR.size, ZIP64_LOCATOR.size, "header", "zip64 locator")
    found.add(directory.end_offset, END.size, "header", "end of central directory")
    found.add(directory.end_offset + END.size, source.size - directory.end_offset - END.size, "trailing",
              "zip comment")
