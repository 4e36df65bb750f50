"""The byte map of a pycauset container: preamble, header slots, payload, metadata blocks (active, superseded)."""

from __future__ import annotations

from .._binary import Source, round_up
from ..bytemap import Collector, Section
from ._reader import (
    check_preamble,
    choose_active,
    read_block,
    read_slots,
    require_active,
)
from ._records import (
    BLOCK_HEADER,
    BLOCK_MAGIC,
    HEADER_BYTES,
    METADATA_ALIGN,
    PREAMBLE,
    SLOT,
    SLOTS_END,
)


def sections(source: Source) -> list[Section]:
    """Every part of the container the reader can place; a stop marker where parsing failed."""
    return Collector(source).run(_parse)


def _parse(found: Collector) -> None:
    source = found.source
    if source.size >= PREAMBLE.size:
        found.add(0, PREAMBLE.size, "header", "preamble")
    check_preamble(source)
    slots = read_slots(source)
    active = choose_active(slots)
    for slot in slots:
        state = "active" if slot is active else "valid" if slot.valid else "invalid"
        found.add(slot.offset, SLOT.size, "header", f"slot {slot.name} ({state}, generation {slot.generation})")
    found.add(SLOTS_END, HEADER_BYTES - SLOTS_END, "reserved", "rest of the 4096-byte header")
    active = require_active(slots)
    fields = active.fields
    found.add(HEADER_BYTES, fields.payload_offset - HEADER_BYTES, "padding", "up to payload_offset")
    found.add(fields.payload_offset, fields.payload_length, "array", "matrix payload")
    found.add(fields.metadata_offset, BLOCK_HEADER.size, "metadata", "active metadata block header")
    found.add(fields.metadata_offset + BLOCK_HEADER.size, fields.metadata_length - BLOCK_HEADER.size, "metadata",
              "active metadata")
    payload_end = fields.payload_offset + fields.payload_length
    _blocks(found, round_up(payload_end, METADATA_ALIGN), fields.metadata_offset)
    read_block(source, active)


def _blocks(found: Collector, start: int, active_offset: int) -> None:
    """The PCMB blocks appended after the payload, each at the next multiple of 16: the active one and
    those earlier updates left behind (superseded, still in the file)."""
    source = found.source
    position = start
    while position + BLOCK_HEADER.size <= source.size:
        header = BLOCK_HEADER.read(source, position)
        if header.block_magic != BLOCK_MAGIC or header.payload_length > source.size - position - BLOCK_HEADER.size:
            break
        role = "active" if position == active_offset else "superseded"
        kind = "metadata" if position == active_offset else "stale"
        found.add(position, BLOCK_HEADER.size, kind, f"{role} metadata block header")
        found.add(position + BLOCK_HEADER.size, header.payload_length, kind, f"{role} metadata")
        end = position + BLOCK_HEADER.size + header.payload_length
        position = round_up(end, METADATA_ALIGN)
        found.add(end, min(position, source.size) - end, "padding", "alignment padding")
