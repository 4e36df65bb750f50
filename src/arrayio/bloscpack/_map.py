"""The byte map of a bloscpack file: header, metadata section, offsets table, chunks and their digests."""

from __future__ import annotations

from .._binary import Source
from ..bytemap import Collector, Section
from ..errors import FormatError
from ._reader import BloscpackFile
from ._records import HEADER, METADATA_HEADER, OFFSET_SIZE


def sections(source: Source) -> list[Section]:
    """Header, metadata, offsets table and each chunk with its digest; a stop marker where parsing failed."""
    return Collector(source).run(_parse)


def _parse(found: Collector) -> None:
    source = found.source
    try:
        reader = BloscpackFile(source)
    except FormatError:
        if source.size >= HEADER.size:
            found.add(0, HEADER.size, "header", "header")
        raise
    found.add(0, HEADER.size, "header", "header")
    metadata = reader.metadata_section
    if metadata is not None:
        header = metadata.header
        data = metadata.offset + METADATA_HEADER.size
        found.add(metadata.offset, METADATA_HEADER.size, "metadata", "metadata header")
        found.add(data, header.meta_comp_size, "metadata", f"metadata ({header.meta_comp_size} bytes)")
        found.add(data + header.meta_comp_size, header.max_meta_size - header.meta_comp_size, "reserved",
                  "metadata room to grow")
        found.add(data + header.max_meta_size, metadata.checksum.size, "checksum",
                  f"metadata {metadata.checksum.name}")
    if reader.chunk_offsets is not None:
        used = reader.nchunks * OFFSET_SIZE
        found.add(reader.offsets_offset, used, "table", f"offsets ({reader.nchunks})")
        found.add(reader.offsets_offset + used, reader.offsets_count * OFFSET_SIZE - used, "reserved",
                  f"{reader.offsets_count - reader.nchunks} offset slots for appending")
    digest = reader.checksum.size
    end = reader.data_offset
    for index in range(reader.nchunks):
        position, chunk = reader.chunk_location(index)
        found.add(position, chunk.cbytes, "chunk", f"chunk {index}")
        found.add(position + chunk.cbytes, digest, "checksum", f"chunk {index} {reader.checksum.name}")
        end = position + chunk.cbytes + digest
    found.add(end, source.size - end, "trailing", "after the last chunk")
