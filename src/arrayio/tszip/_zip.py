"""The zip layer of a tszip file: the end record, the central directory, and each member's bytes.

Read over a :class:`~arrayio._binary.Source`, so a local file is mapped and a
URL is read in ranges: the end of the file (end record and central
directory) once, then each member's local header and data when asked for.
Every offset and size is checked against the file before it is used.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

from .._binary import Source
from ..errors import UnsupportedError
from ._errors import ERRORS
from ._records import (
    CENTRAL,
    CENTRAL_SIGNATURE,
    DEFLATED,
    END,
    END_SEARCH_BYTES,
    END_SIGNATURE,
    LOCAL,
    LOCAL_SIGNATURE,
    STORED,
    UNSET_16,
    UNSET_32,
    ZIP64_END,
    ZIP64_END_SIGNATURE,
    ZIP64_EXTRA_ID,
    ZIP64_LOCATOR,
    ZIP64_LOCATOR_SIGNATURE,
)


@dataclass(frozen=True)
class Member:
    """One central directory entry: where the member's local header is, its sizes, method and CRC."""

    name: str
    index: int
    entry_offset: int
    entry_size: int
    local_offset: int
    compressed_size: int
    size: int
    method: int
    crc32: int


@dataclass(frozen=True)
class Directory:
    """The archive's members in directory order, and where its end records and directory lie."""

    members: list[Member]
    directory_offset: int
    directory_size: int
    end_offset: int
    zip64_offset: int | None

    def latest(self) -> dict[str, Member]:
        """Name -> member; a name written twice means its last entry (as zipfile and zarr's ZipStore read it)."""
        return {member.name: member for member in self.members}


def _find_end(source: Source) -> int:
    """The offset of the end record: the last signature within 22 + 65535 bytes of the end of the file."""
    if source.size < END.size:
        raise ERRORS.truncated_at("end of central directory", 0, END.size, source.size)
    start = max(0, source.size - END_SEARCH_BYTES)
    tail = bytes(source.view(start, source.size - start, "end of central directory"))
    position = tail.rfind(END_SIGNATURE.to_bytes(4, "little"))
    while position >= 0:
        if position + END.size <= len(tail):
            return start + position
        position = tail.rfind(END_SIGNATURE.to_bytes(4, "little"), 0, position)
    raise ERRORS.invalid("end of central directory", max(0, source.size - END.size),
                         f"the signature {END_SIGNATURE:#010x} (a zip archive) in the last {END_SEARCH_BYTES} bytes",
                         "none")


def _zip64_sizes(extra: bytes, entry: dict[str, int], where: str, offset: int) -> None:
    """Replace the 32-bit fields set to 0xFFFFFFFF by the zip64 extra field's 64-bit values, in its order."""
    position = 0
    while position + 4 <= len(extra):
        kind = int.from_bytes(extra[position:position + 2], "little")
        length = int.from_bytes(extra[position + 2:position + 4], "little")
        body = extra[position + 4:position + 4 + length]
        if kind == ZIP64_EXTRA_ID:
            cursor = 0
            for field in ("size", "compressed_size", "local_offset"):
                if entry[field] == UNSET_32:
                    if cursor + 8 > len(body):
                        raise ERRORS.invalid(f"{where} zip64 extra field", offset, f"8 bytes for {field}",
                                             f"{len(body) - cursor} bytes")
                    entry[field] = int.from_bytes(body[cursor:cursor + 8], "little")
                    cursor += 8
            return
        position += 4 + length


def read_directory(source: Source) -> Directory:
    """Parse the end record (zip64 ones too) and the central directory, checking every range."""
    end_offset = _find_end(source)
    end = END.read(source, end_offset)
    count, size, offset = end.entries, end.directory_size, end.directory_offset
    zip64_offset = None
    if UNSET_16 in (count,) or UNSET_32 in (size, offset):
        locator_offset = end_offset - ZIP64_LOCATOR.size
        if locator_offset < 0:
            raise ERRORS.invalid("zip64 end of central directory locator", 0, "a locator before the end record",
                                 "the file starts there")
        locator = ZIP64_LOCATOR.read(source, locator_offset)
        if locator.signature != ZIP64_LOCATOR_SIGNATURE:
            raise ERRORS.invalid("zip64 end of central directory locator signature", locator_offset,
                                 f"{ZIP64_LOCATOR_SIGNATURE:#010x}", f"{locator.signature:#010x}")
        zip64_offset = locator.end_offset
        record = ZIP64_END.read(source, zip64_offset)
        if record.signature != ZIP64_END_SIGNATURE:
            raise ERRORS.invalid("zip64 end of central directory signature", zip64_offset,
                                 f"{ZIP64_END_SIGNATURE:#010x}", f"{record.signature:#010x}")
        count, size, offset = record.entries, record.directory_size, record.directory_offset
    limit = zip64_offset if zip64_offset is not None else end_offset
    if offset > limit or size > limit - offset:
        raise ERRORS.invalid("end of central directory directory_offset", end_offset + END.offsets["directory_offset"],
                             f"a directory inside the {limit} bytes before the end record",
                             f"offset {offset}, size {size}")
    if count * CENTRAL.size > size:
        raise ERRORS.invalid("end of central directory entries", end_offset + END.offsets["entries"],
                             f"at most {size // CENTRAL.size} entries in a {size}-byte directory", count)
    directory = bytes(source.view(offset, size, "central directory"))
    members = []
    position = 0
    for index in range(count):
        where = f"central directory entry {index}"
        if position + CENTRAL.size > len(directory):
            raise ERRORS.truncated_at(where, offset + position, CENTRAL.size, offset + len(directory))
        entry = CENTRAL.unpack(directory, position)
        if entry.signature != CENTRAL_SIGNATURE:
            raise ERRORS.invalid(f"{where} signature", offset + position, f"{CENTRAL_SIGNATURE:#010x}",
                                 f"{entry.signature:#010x}")
        variable = entry.name_length + entry.extra_length + entry.comment_length
        if position + CENTRAL.size + variable > len(directory):
            raise ERRORS.truncated_at(f"{where} name and extra field", offset + position, CENTRAL.size + variable,
                                      offset + len(directory))
        raw_name = directory[position + CENTRAL.size:position + CENTRAL.size + entry.name_length]
        try:
            name = raw_name.decode("utf-8")
        except UnicodeDecodeError:
            raise ERRORS.invalid(f"{where} name", offset + position + CENTRAL.size, "a UTF-8 member name",
                                 raw_name) from None
        fields = {"size": entry.size, "compressed_size": entry.compressed_size, "local_offset": entry.local_offset}
        extra_start = position + CENTRAL.size + entry.name_length
        _zip64_sizes(directory[extra_start:extra_start + entry.extra_length], fields, where, offset + extra_start)
        if fields["local_offset"] + LOCAL.size > offset:
            raise ERRORS.invalid(f"{where} local_offset", offset + position + CENTRAL.offsets["local_offset"],
                                 f"a local header before the central directory at {offset}", fields["local_offset"])
        members.append(Member(name, index, offset + position, CENTRAL.size + variable, fields["local_offset"],
                              fields["compressed_size"], fields["size"], entry.method, entry.crc32))
        position += CENTRAL.size + variable
    return Directory(members, offset, size, end_offset, zip64_offset)


def data_offset(source: Source, member: Member) -> int:
    """Where ``member``'s data starts: after its local header, name and extra field (checked)."""
    header = LOCAL.read(source, member.local_offset)
    if header.signature != LOCAL_SIGNATURE:
        raise ERRORS.invalid(f"local header of {member.name!r} signature", member.local_offset,
                             f"{LOCAL_SIGNATURE:#010x}", f"{header.signature:#010x}")
    start = member.local_offset + LOCAL.size + header.name_length + header.extra_length
    source.check(start, member.compressed_size, f"data of member {member.name!r}")
    return start


def member_bytes(source: Source, member: Member, check_crc: bool = False) -> bytes:
    """The member's uncompressed bytes (stored or deflated), never more than its declared size."""
    start = data_offset(source, member)
    raw = source.view(start, member.compressed_size, f"data of member {member.name!r}")
    if member.method == STORED:
        if member.compressed_size != member.size:
            raise ERRORS.invalid(f"member {member.name!r} size", member.entry_offset + CENTRAL.offsets["size"],
                                 f"{member.compressed_size} (a stored member's compressed size)", member.size)
        data = bytes(raw)
    elif member.method == DEFLATED:
        inflater = zlib.decompressobj(-15)
        try:
            data = inflater.decompress(raw, member.size)
        except zlib.error as error:
            raise ERRORS.invalid(f"data of member {member.name!r}", start, "a deflate stream", str(error)) from None
        if len(data) != member.size or inflater.unconsumed_tail:
            raise ERRORS.invalid(f"member {member.name!r} size", member.entry_offset + CENTRAL.offsets["size"],
                                 f"{len(data)} bytes inflated", member.size)
    else:
        raise UnsupportedError(f"tszip: member {member.name!r} uses zip compression method {member.method}; "
                               "arrayio reads stored (0) and deflated (8) members")
    if check_crc and zlib.crc32(data) != member.crc32:
        raise ERRORS.checksum_mismatch(f"member {member.name!r} crc32", member.entry_offset + CENTRAL.offsets["crc32"],
                                       f"{zlib.crc32(data):#010x} (the CRC-32 of its bytes)", f"{member.crc32:#010x}")
    return data
