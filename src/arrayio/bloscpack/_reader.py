"""Reading bloscpack files: header, metadata, offsets, and a lazy array over the chunks.

``BloscpackFile`` checks the header, the metadata section and the offsets table when it opens a
file, then decompresses chunks only when asked: ``arr[a:b]`` decodes just the chunks holding
rows a..b, straight into the output array. Every chunk read verifies the chunk's Blosc header
against the file (its size, position and uncompressed length) and its digest before Blosc
touches it, so a malformed file raises a ``FormatError`` naming the chunk and byte offset.
"""

from __future__ import annotations

import math
import mmap
import os
from typing import Any, Callable, Iterator, Literal

import blosc
import numpy as np

from .. import limits
from .._binary import Source, release_pages
from .._edge import open_output, open_source
from .._readers import ReaderBase, names_its_file
from ..errors import Problem
from ._aliases import deprecated_alias
from ._blocks import decode_range
from ._errors import ERRORS, FileClosedError, NotANumpyArray
from ._lines import EntryLines
from ._metadata import MetadataSection, numpy_layout, read_metadata
from ._records import (
    BLOSC_FORMAT_VERSIONS,
    BLOSC_HEADER,
    BLOSC_OVERHEAD,
    CHECKSUMS,
    FLAG_MEMCPYED,
    FORMAT_NAME,
    FORMAT_VERSION,
    HEADER,
    KNOWN_OPTIONS,
    MAGIC,
    MAX_BUFFERSIZE,
    MAX_CHUNKS,
    METADATA_CODECS,
    METADATA_HEADER,
    OFFSET_DTYPE,
    OFFSET_SIZE,
    OPTION_METADATA,
    OPTION_OFFSETS,
    UNKNOWN,
    Checksum,
    decode_blosc_flags,
    pretty_size,
)
from ._threads import ordered_map, parallel_map

__all__ = ["BloscpackFile", "MetadataSection", "open_file", "progressive_release", "require_numpy"]

Progress = Callable[[int], None]
_BLOSC_ERRORS = (blosc.blosc_extension.error, ValueError, TypeError, OverflowError)


# Pages are released in runs of at least this many bytes: one madvise per 1 MiB chunk cost
# about 15 % of a compressible unpack, while 32 MiB still bounds the extra resident memory.
RELEASE_STEP = 32 << 20


def progressive_release(source: Source) -> Callable[[int], None]:
    """A function ``done(position)`` that lets the kernel drop the mapped pages of ``source``
    before ``position``, each page once, for one pass front to back through a large map."""
    released = [0]

    def done(position: int) -> None:
        if position - released[0] >= RELEASE_STEP:
            release_pages(source, released[0], position - released[0])
            released[0] = position - position % mmap.PAGESIZE

    return done


# zstd's run-length blocks (a 4-byte block per 128 KiB) bound Blosc1's expansion near 32768:1; the
# other codecs stay far below (zlib 1032:1).
MAX_EXPANSION = 32768


@names_its_file(lambda reader: reader.source.name)
class BloscpackFile(EntryLines, ReaderBase):
    """A bloscpack file opened lazily: header facts, metadata, and chunk-wise access to its data.

    For an ndarray file ``shape``/``dtype``/``order`` come from the metadata; for a byte stream
    the data is a 1-D ``uint8`` array. Indexing along the first axis of C-order data decodes only
    the chunks holding the selected rows. After ``close()`` every access raises ``FileClosedError``.
    """

    format = FORMAT_NAME
    closed_error = FileClosedError

    def __init__(self, source: Source) -> None:
        self.source = source
        self.name = source.name
        self.header = HEADER.read(source, 0)
        self._check_header()
        self.checksum: Checksum = CHECKSUMS[self.header.checksum]
        position = HEADER.size
        if self.nchunks_claimed != UNKNOWN:
            least = BLOSC_OVERHEAD + self.checksum.size
            if position + self.nchunks_claimed * least > source.size:
                raise ERRORS.truncated_at(f"the {self.nchunks_claimed} chunks of header.nchunks (at least {least} "
                                          "bytes each)", position, self.nchunks_claimed * least, source.size)
        self.metadata_section: MetadataSection | None = None
        if self.header.options & OPTION_METADATA:
            self.metadata_section = read_metadata(source, position)
            position += self.metadata_section.length
        self.offsets_offset = position
        self.offsets_count = 0  # entries of the offsets table, the slots kept for appending included
        self.chunk_offsets: np.ndarray | None = None  # its first nchunks entries
        self._offsets_table: np.ndarray | None = None
        self.nchunks = self.nchunks_claimed
        if self.header.options & OPTION_OFFSETS:
            position = self._read_offsets(position)
        self.data_offset = position
        self._positions: np.ndarray | None = None
        self._starts: np.ndarray | None = None
        self._offsets_trusted = False
        self.is_numpy = False
        self.dtype = np.dtype(np.uint8)
        self.order: Literal["C", "F"] = "C"
        self.shape: tuple[int, ...] = ()
        if self.metadata_section is not None and isinstance(self.metadata, dict) \
                and self.metadata.get("container") == "numpy":
            self.dtype, self.shape, self.order = numpy_layout(self.metadata_section)
            self.is_numpy = True
        self._check_data_size()

    # -- opening ---------------------------------------------------------------------------

    def _check_header(self) -> None:
        header = self.header

        def at(field: str) -> int:
            return HEADER.offset_of(field)

        ERRORS.check_magic("header.magic", 0, MAGIC, header.magic)
        ERRORS.check_version("header.format_version", at("format_version"), FORMAT_VERSION, header.format_version)
        if header.options & ~KNOWN_OPTIONS:
            raise ERRORS.invalid("header.options", at("options"), "only bits 0 (offsets) and 1 (metadata) set",
                                 f"0x{header.options:02x}")
        if header.checksum >= len(CHECKSUMS):
            raise ERRORS.invalid("header.checksum", at("checksum"), f"a checksum id 0..{len(CHECKSUMS) - 1}",
                                 header.checksum)
        for field in ("chunk_size", "last_chunk"):
            value = getattr(header, field)
            if not UNKNOWN <= value <= MAX_BUFFERSIZE:
                raise ERRORS.invalid(f"header.{field}", at(field), f"-1..{MAX_BUFFERSIZE}", value)
        if UNKNOWN not in (header.chunk_size, header.last_chunk) and header.last_chunk > header.chunk_size:
            raise ERRORS.invalid("header.last_chunk", at("last_chunk"),
                                 f"at most chunk_size ({header.chunk_size})", header.last_chunk)
        if header.nchunks < UNKNOWN:
            raise ERRORS.invalid("header.nchunks", at("nchunks"), f"-1..{MAX_CHUNKS}", header.nchunks)
        if not 0 <= header.max_app_chunks <= MAX_CHUNKS - max(header.nchunks, 0):
            raise ERRORS.invalid("header.max_app_chunks", at("max_app_chunks"),
                                 f"0..{MAX_CHUNKS - max(header.nchunks, 0)} (nchunks + max_app_chunks < 2**63)",
                                 header.max_app_chunks)
        if header.max_app_chunks and not header.options & OPTION_OFFSETS:
            raise ERRORS.invalid("header.max_app_chunks", at("max_app_chunks"), "0 without an offsets table",
                                 header.max_app_chunks)
        if header.max_app_chunks and header.nchunks == UNKNOWN:
            raise ERRORS.invalid("header.max_app_chunks", at("max_app_chunks"), "0 when nchunks is -1",
                                 header.max_app_chunks)

    def _read_offsets(self, position: int) -> int:
        if self.nchunks == UNKNOWN:
            # A table of unknown length: its first entry, the first chunk, says where it ends.
            first = int(self.source.array(position, 1, OFFSET_DTYPE, "offsets[0]")[0])
            length = first - position
            if first < position or length % OFFSET_SIZE:
                raise ERRORS.invalid("offsets[0]", position,
                                     "the end of the offsets table (nchunks is -1, so it gives the table's length)",
                                     first)
            self.nchunks = length // OFFSET_SIZE
            count = self.nchunks
        else:
            count = self.nchunks + self.header.max_app_chunks
        # The slots kept for appending are read only when asked for (a remote open would fetch them all).
        what = f"offsets table ({count} entries)"
        self.source.check(position, count * OFFSET_SIZE, what)
        self.offsets_count = count
        self.chunk_offsets = self.source.array(position, self.nchunks, OFFSET_DTYPE, what)
        return position + count * OFFSET_SIZE

    @property
    def offsets(self) -> np.ndarray | None:
        """The whole offsets table, the slots kept for appending included (None: the file has none)."""
        if self.chunk_offsets is None:
            return None
        if self._offsets_table is None:
            self._offsets_table = self.source.array(self.offsets_offset, self.offsets_count, OFFSET_DTYPE,
                                                    f"offsets table ({self.offsets_count} entries)")
        return self._offsets_table

    def _check_data_size(self) -> None:
        stored = self.nbytes if self.nbytes is not None else self._scanned_nbytes()
        # Every buffer (the whole array, a chunk, verify's scratch) is sized from this claim, so a
        # claim no Blosc1 codec could expand the stored bytes to is refused before any is allocated.
        available = max(0, self.source.size - self.data_offset)
        if stored > MAX_EXPANSION * available:
            field, offset = (("header.chunk_size", HEADER.offset_of("chunk_size")) if self.nbytes is not None
                             else ("the chunks' blosc header.nbytes", self.data_offset))
            raise ERRORS.invalid(field, offset, f"at most {MAX_EXPANSION} x the {available} stored data bytes "
                                 "(the most a Blosc1 codec expands)", f"{stored} data bytes claimed")
        if not self.is_numpy:
            self.shape = (stored,)
            return
        assert self.metadata_section is not None  # is_numpy comes from the metadata
        expected = math.prod(self.shape) * self.dtype.itemsize
        if stored != expected:
            raise ERRORS.invalid("metadata['shape']", self.metadata_section.offset + METADATA_HEADER.size,
                                 f"a shape holding the {stored} data bytes of the chunks",
                                 f"{list(self.shape)} x {self.dtype.itemsize} bytes = {expected} bytes")

    @property
    def nbytes(self) -> int | None:
        """Uncompressed size from the header, or None when the header does not record it."""
        header = self.header
        if header.nchunks == UNKNOWN or UNKNOWN in (header.chunk_size, header.last_chunk):
            return None
        if header.nchunks == 0:
            return 0
        return (header.nchunks - 1) * header.chunk_size + header.last_chunk

    @property
    def concurrent(self) -> bool:
        """True when chunks can be read from several threads at once (maps and buffers, not file objects)."""
        return self.source.buffer is not None

    @property
    def nchunks_claimed(self) -> int:
        """The header's nchunks (-1 = not recorded; ``nchunks`` then holds the count found)."""
        return self.header.nchunks

    @property
    def metadata(self) -> Any:
        """The decoded JSON metadata (None when the file has no metadata section)."""
        return self.metadata_section.value if self.metadata_section is not None else None

    @property
    def size(self) -> int:
        """Number of elements."""
        return math.prod(self.shape)

    @property
    def ndim(self) -> int:
        """Number of dimensions."""
        return len(self.shape)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d array")
        return self.shape[0]

    def __repr__(self) -> str:
        if self.closed:
            return "<bloscpack file, closed>"
        return (f"<bloscpack {self.name}: shape={self.shape} dtype={self.dtype} order={self.order} "
                f"nchunks={self.nchunks} checksum={self.checksum.name}>")

    def _release(self) -> None:
        # Arrays already returned stay valid: they are copies.
        self.source.close()

    # -- where the chunks are ------------------------------------------------------------------

    def _chunk_header(self, index: int, position: int) -> Any:
        what = f"chunk {index} blosc header"
        header = BLOSC_HEADER.read(self.source, position)
        if header.version not in BLOSC_FORMAT_VERSIONS:
            raise ERRORS.invalid(f"chunk {index} blosc header.version", position,
                                 "a Blosc1 chunk (version 2)", header.version)
        if not BLOSC_OVERHEAD <= header.cbytes <= header.nbytes + BLOSC_OVERHEAD:
            raise ERRORS.invalid(f"chunk {index} blosc header.cbytes", position + BLOSC_HEADER.offsets["cbytes"],
                                 f"16..nbytes+16 ({header.nbytes + BLOSC_OVERHEAD})", header.cbytes)
        if header.flags & FLAG_MEMCPYED and header.cbytes != header.nbytes + BLOSC_OVERHEAD:
            raise ERRORS.invalid(f"chunk {index} blosc header.cbytes", position + BLOSC_HEADER.offsets["cbytes"],
                                 f"nbytes+16 ({header.nbytes + BLOSC_OVERHEAD}) for a memcpy'd chunk", header.cbytes)
        self.source.check(position, header.cbytes + self.checksum.size, f"chunk {index} ({what} says "
                                                                        f"{header.cbytes} bytes + digest)")
        return header

    def _scan(self) -> np.ndarray:
        """Chunk positions found by walking the chunk headers from the first chunk."""
        positions = []
        position = self.data_offset
        step_extra = self.checksum.size
        index = 0
        while (index < self.nchunks) if self.nchunks != UNKNOWN else (position < self.source.size):
            positions.append(position)
            position += self._chunk_header(index, position).cbytes + step_extra
            index += 1
        if self.nchunks == UNKNOWN:
            self.nchunks = index
        return np.array(positions, dtype=np.int64)

    def _offsets_plausible(self) -> bool:
        if self.chunk_offsets is None or self.nchunks == 0:
            return False
        table = self.chunk_offsets
        least = BLOSC_OVERHEAD + self.checksum.size
        return bool(table[0] == self.data_offset and np.all(np.diff(table) >= least)
                    and table[-1] + least <= self.source.size)

    @property
    def positions(self) -> np.ndarray:
        """Absolute byte offset of each chunk's Blosc header (from the offsets table when it is sound)."""
        if self._positions is None:
            if self._offsets_plausible():
                self._positions = np.asarray(self.chunk_offsets, dtype=np.int64)
                self._offsets_trusted = True
            else:
                self._positions = self._scan()
        return self._positions

    def _scanned_nbytes(self) -> int:
        return int(self.starts[-1])

    @property
    def starts(self) -> np.ndarray:
        """Uncompressed byte offset where each chunk starts, plus the total size at the end."""
        if self._starts is None:
            header = self.header
            positions = self.positions
            if UNKNOWN not in (header.chunk_size, header.last_chunk) and header.nchunks != UNKNOWN:
                starts = np.arange(len(positions) + 1, dtype=np.int64) * header.chunk_size
                if len(positions):
                    starts[-1] = starts[-2] + header.last_chunk
            else:
                sizes = [self._chunk_header(i, int(p)).nbytes for i, p in enumerate(positions)]
                starts = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)])
            self._starts = starts
        return self._starts

    def chunk_location(self, index: int) -> tuple[int, Any]:
        """(byte offset, Blosc header) of chunk ``index``, checked against the file and the layout."""
        if not 0 <= index < self.nchunks:
            raise IndexError(f"chunk {index} out of range 0..{self.nchunks - 1}")
        positions = self.positions
        position = int(positions[index])
        header = self._chunk_header(index, position)
        expected = int(self.starts[index + 1] - self.starts[index])
        if header.nbytes != expected:
            raise ERRORS.invalid(f"chunk {index} blosc header.nbytes", position + BLOSC_HEADER.offsets["nbytes"],
                                 f"{expected} (the chunk's share of the data)", header.nbytes)
        end = position + header.cbytes + self.checksum.size
        if index + 1 < len(positions) and end != positions[index + 1]:
            raise ERRORS.invalid(f"offsets[{index + 1}]", self.offsets_offset + (index + 1) * OFFSET_SIZE,
                                 f"{end} (where chunk {index} and its digest end)", int(positions[index + 1]))
        return position, header

    def chunk_span(self, index: int) -> tuple[int, int]:
        """(byte offset, length) of chunk ``index``'s Blosc frame, from the offsets table alone.

        A manifest of a remote file then costs no request per chunk: the frame
        ends where the next chunk's offset, less its digest, says. The last
        chunk has no next offset and is measured by its Blosc header. Positions
        come from a table that passed ``_offsets_plausible`` (or from a scan of
        the headers), so every length covers at least a Blosc header; a frame
        whose header disagrees is still refused when it is read.
        """
        if not 0 <= index < self.nchunks:
            raise IndexError(f"chunk {index} out of range 0..{self.nchunks - 1}")
        positions = self.positions
        if index + 1 == len(positions):
            position, header = self.chunk_location(index)
            return position, int(header.cbytes)
        position = int(positions[index])
        return position, int(positions[index + 1]) - position - self.checksum.size

    # -- decoding chunks -------------------------------------------------------------------

    def _compressed(self, index: int) -> tuple[int, Any, memoryview]:
        position, header = self.chunk_location(index)
        compressed = self.source.view(position, header.cbytes, f"chunk {index}")
        if self.checksum.size:
            digest_offset = position + header.cbytes
            digest = self.source.view(digest_offset, self.checksum.size, f"chunk {index} digest")
            computed = self.checksum(compressed)
            if bytes(digest) != computed:
                raise ERRORS.checksum_mismatch(f"chunk {index} {self.checksum.name} digest", digest_offset,
                                               expected=bytes(digest), found=computed)
        return position, header, compressed

    def compressed_chunk(self, index: int) -> memoryview:
        """Chunk ``index``'s Blosc frame as stored, its digest verified: what a migration copies unchanged and
        a zarr store serves for zarr's Blosc codec."""
        return self._compressed(index)[2]

    def _decode_into(self, index: int, address: int) -> None:
        """Verify chunk ``index`` and decompress it to ``address`` (room for its nbytes is the caller's job)."""
        position, header, compressed = self._compressed(index)
        if header.nbytes == 0:
            return
        try:
            written = blosc.decompress_ptr(compressed, address)
        except _BLOSC_ERRORS as error:
            raise ERRORS.invalid(f"chunk {index} payload", position, "a decodable Blosc chunk", str(error)) from None
        if written != header.nbytes:
            raise ERRORS.invalid(f"chunk {index} payload", position, f"{header.nbytes} decoded bytes", written)

    def read_chunk(self, index: int, out: np.ndarray | None = None) -> np.ndarray:
        """Chunk ``index`` decompressed, as a 1-D ``uint8`` array (verified against its digest).

        ``out``, a contiguous ``uint8`` array at least as long as the chunk, is filled instead of
        a new array (refused over the ``chunk_bytes`` limit: slices decode only the blocks they need).
        """
        if not 0 <= index < self.nchunks:
            raise IndexError(f"chunk {index} out of range 0..{self.nchunks - 1}")
        length = int(self.starts[index + 1] - self.starts[index])
        if out is None:
            limits.check("chunk_bytes", length, f"chunk {index}", format=FORMAT_NAME, offset=int(self.positions[index]))
            out = np.empty(length, dtype=np.uint8)
        elif out.dtype != np.uint8 or out.ndim != 1 or not out.flags.c_contiguous or len(out) < length:
            raise ValueError(f"out must be a contiguous 1-D uint8 array of at least {length} bytes")
        self._decode_into(index, out.ctypes.data)
        return out[:length]

    def iter_chunks(self) -> Iterator[np.ndarray]:
        """Every chunk in order, decompressed, as 1-D ``uint8`` arrays."""
        for index in range(self.nchunks):
            yield self.read_chunk(index)

    def _read_bytes(self, start: int, stop: int, out: np.ndarray) -> None:
        """Decode data bytes ``start..stop`` into the contiguous buffer ``out`` (chunks touched only)."""
        if stop <= start:
            return
        starts = self.starts
        first = int(np.searchsorted(starts, start, side="right")) - 1
        last = int(np.searchsorted(starts, stop, side="left")) - 1
        base = out.ctypes.data
        positions = self.positions
        # One request for the touched chunks when the bytes are remote (a no-op for maps).
        end = int(positions[last + 1]) if last + 1 < len(positions) else self.source.size
        self.source.prefetch([(int(positions[first]), end - int(positions[first]))])
        whole = [i for i in range(first, last + 1) if starts[i] >= start and starts[i + 1] <= stop]
        release = self._releaser() if len(whole) == self.nchunks else None

        def decode_whole(index: int) -> None:
            self._decode_into(index, base + int(starts[index]) - start)

        parallel_map(decode_whole, whole, on_done=release, threads=self.concurrent)
        for index in sorted({first, last} - set(whole)):
            lo, hi = max(start, int(starts[index])), min(stop, int(starts[index + 1]))
            self._decode_part(index, lo - int(starts[index]), hi - int(starts[index]), out[lo - start:hi - start])

    def _decode_part(self, index: int, low: int, high: int, out: np.ndarray | None) -> None:
        """Bytes ``low..high`` of chunk ``index`` into ``out`` (None: check only); a chunk over the
        chunk_bytes limit decodes only the Blosc blocks holding them."""
        length = int(self.starts[index + 1] - self.starts[index])
        if length <= limits.get("chunk_bytes"):
            chunk = self.read_chunk(index)
            if out is not None:
                out[:high - low] = chunk[low:high]
            return
        position, header, compressed = self._compressed(index)
        decode_range(compressed, header, low, high, out, f"chunk {index}", position)

    def _releaser(self) -> Callable[[int], None]:
        # A whole-file read lets the kernel drop each mapped chunk once decoded, so the
        # resident set stays near the size of the output array, not output + file.
        positions = self.positions
        release = progressive_release(self.source)
        return lambda index: release(int(positions[index]))

    def read(self) -> np.ndarray:
        """The whole array (every chunk verified and decoded straight into it)."""
        out = np.empty(self.shape, dtype=self.dtype, order=self.order)
        flat = out.reshape(-1, order="A").view(np.uint8) if out.size else np.empty(0, np.uint8)
        self._read_bytes(0, int(self.starts[-1]), flat)
        return out

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        data = self.read()
        return data if dtype is None else data.astype(dtype, copy=False)

    def __getitem__(self, key: Any) -> Any:
        parts = key if isinstance(key, tuple) else (key,)
        first, rest = (parts[0], parts[1:]) if parts else (Ellipsis, ())
        if self.order != "C" or not self.shape or not isinstance(first, (int, np.integer, slice)) \
                or isinstance(first, bool):
            return self.read()[key]
        rows = self.shape[0]
        if isinstance(first, slice):
            selected = range(*first.indices(rows))
            if not selected:
                return np.empty((0,) + self.shape[1:], dtype=self.dtype)[(slice(None),) + rest]
            low, high = min(selected[0], selected[-1]), max(selected[0], selected[-1]) + 1
            step = slice(selected[0] - low, None, selected.step)
            block = self._rows(low, high)
            return block[(step,) + rest]
        index = int(first)
        if not -rows <= index < rows:
            raise IndexError(f"index {index} is out of bounds for axis 0 with size {rows}")
        index %= rows
        return self._rows(index, index + 1)[(0,) + rest]

    def _rows(self, low: int, high: int) -> np.ndarray:
        out = np.empty((high - low,) + self.shape[1:], dtype=self.dtype)
        row_bytes = math.prod(self.shape[1:]) * self.dtype.itemsize
        if out.size:
            self._read_bytes(low * row_bytes, high * row_bytes, out.reshape(-1).view(np.uint8))
        return out

    # -- checking everything ---------------------------------------------------------------

    def validate(self) -> list[Problem]:
        """Problems found by decoding every chunk and checking the offsets table (empty = valid)."""
        problems = []
        try:
            positions = self.positions
        except ERRORS.format_error as error:
            return [Problem.from_error(error)]
        if self.chunk_offsets is not None and not self._offsets_trusted:
            problems.append(ERRORS.problem("offsets table", self.offsets_offset,
                                           f"the positions of the {self.nchunks} chunks",
                                           "values that are not (chunks found by scanning)"))
        spare = self.offsets[self.nchunks:] if self.offsets is not None else np.empty(0, OFFSET_DTYPE)
        if np.any(spare != UNKNOWN):
            first = int(np.flatnonzero(spare != UNKNOWN)[0])
            problems.append(ERRORS.problem(f"offsets[{self.nchunks + first}]",
                                           self.offsets_offset + (self.nchunks + first) * OFFSET_SIZE,
                                           f"-1 in the {len(spare)} slots kept for appending",
                                           int(spare[first])))
        if self.metadata_section is not None:
            problems += self._metadata_problems(self.metadata_section)
        sizes = np.diff(self.starts)
        scratch = np.empty(int(np.max(sizes[sizes <= limits.get("chunk_bytes")], initial=0)), dtype=np.uint8)
        for index in range(len(positions)):
            try:
                if sizes[index] <= len(scratch):
                    self._decode_into(index, scratch.ctypes.data)
                else:
                    self._decode_part(index, 0, int(sizes[index]), None)
            except ERRORS.format_error as error:
                problems.append(Problem.from_error(error))
        return problems

    def _metadata_problems(self, section: MetadataSection) -> list[Problem]:
        """Bytes the reference writes as zeros and never reads: meta_options, user_codec, the spare room."""
        problems = []
        header = section.header
        for field in ("meta_options", "user_codec"):
            if any(bytes(self.source.view(METADATA_HEADER.offset_of(field, base=section.offset),
                                          METADATA_HEADER.dtype[field].itemsize, f"metadata header.{field}"))):
                problems.append(ERRORS.problem(f"metadata header.{field}", METADATA_HEADER.offset_of(
                    field, base=section.offset), "zero (written zero, not read)", getattr(header, field)))
        spare_start = section.offset + METADATA_HEADER.size + header.meta_comp_size
        spare = np.frombuffer(self.source.view(spare_start, header.max_meta_size - header.meta_comp_size,
                                               "metadata spare room"), dtype=np.uint8)
        if spare.any():
            first = int(np.flatnonzero(spare)[0])
            problems.append(ERRORS.problem("metadata spare room", spare_start + first,
                                           "zero bytes up to max_meta_size", f"{int(spare[first]):#04x}"))
        return problems

    # -- the Reader protocol -----------------------------------------------------------------

    def data_end(self) -> int:
        """Where the last chunk's digest ends (the rest of the file is trailing bytes)."""
        if not self.nchunks:
            return self.data_offset
        return int(self.positions[-1]) + self.chunk_location(self.nchunks - 1)[1].cbytes + self.checksum.size

    def info(self) -> dict[str, Any]:
        """Facts about the file (header, metadata, first chunk), without decoding any data."""
        header = self.header
        size = self.source.size
        nbytes = int(self.starts[-1])
        holds = f"ndarray {'x'.join(map(str, self.shape))} {self.dtype}" if self.is_numpy else "bytes"
        facts: dict[str, Any] = {
            "format": self.format,
            "version": str(header.format_version),
            "file_size": size,
            "summary": (f"{holds}, {pretty_size(nbytes)} in {self.nchunks} chunk{'s' if self.nchunks != 1 else ''}"
                        f" -> {pretty_size(size)}"),
            "container": "numpy" if self.is_numpy else "bytes",
        }
        if self.is_numpy:
            facts.update(dtype=str(self.dtype), shape=list(self.shape), order=self.order)
        facts.update(
            nbytes=nbytes, ratio=round(nbytes / size, 3) if size else None,
            nchunks=self.nchunks, chunk_size=header.chunk_size, last_chunk=header.last_chunk,
            typesize=header.typesize, checksum=self.checksum.name, offsets=self.chunk_offsets is not None,
            max_app_chunks=header.max_app_chunks, first_offsets=[int(x) for x in self.positions[:5]],
            trailing_bytes=size - self.data_end(),
        )
        if self.metadata_section is not None:
            meta = self.metadata_section.header
            facts["metadata"] = self.metadata
            facts["metadata_header"] = {
                "meta_checksum": self.metadata_section.checksum.name,
                "meta_codec": METADATA_CODECS[meta.meta_codec], "meta_level": meta.meta_level,
                "meta_size": meta.meta_size, "max_meta_size": meta.max_meta_size,
                "meta_comp_size": meta.meta_comp_size}
        if self.nchunks:
            _position, first = self.chunk_location(0)
            facts["first_chunk"] = {**first._asdict(), **decode_blosc_flags(first.flags)}
        return facts


def open_file(target: Any, storage_options: dict | None = None) -> BloscpackFile:
    """Open a path (mapped), bytes-like data, a seekable binary file, a URL or an fsspec file as a
    ``BloscpackFile``."""
    source = open_source(target, ERRORS, storage_options)
    try:
        return BloscpackFile(source)
    except BaseException:
        source.close()
        raise


def require_numpy(reader: BloscpackFile) -> None:
    """Raise NotANumpyArray unless the file holds an ndarray."""
    if not reader.is_numpy:
        raise NotANumpyArray(format="bloscpack", field="metadata['container']", offset=HEADER.size,
                             expected="'numpy' (a file written by pack_ndarray_*)",
                             found=repr(reader.metadata.get("container")) if isinstance(reader.metadata, dict)
                             else "no numpy metadata")


# -- the reference's unpack functions ---------------------------------------------------------

def _unpack_ndarray(target: Any) -> np.ndarray:
    with open_file(target) as reader:
        require_numpy(reader)
        return reader.read()


def unpack_ndarray_from_file(filename: Any, storage_options: dict | None = None) -> np.ndarray:
    """Read the ndarray stored in ``filename`` (a path, URL or fsspec file; every checksum verified)."""
    with open_file(filename, storage_options) as reader:
        require_numpy(reader)
        return reader.read()


def unpack_ndarray_from_bytes(bytes_: Any) -> np.ndarray:
    """Read the ndarray stored in the bloscpack bytes ``bytes_``."""
    return _unpack_ndarray(memoryview(bytes_))


def _as_uint8(bytes_: Any) -> np.ndarray:
    view = memoryview(bytes_).cast("B")
    return np.frombuffer(view, dtype=np.uint8) if len(view) else np.empty(0, np.uint8)


def _unpack_bytes(target: Any) -> tuple[bytes, Any]:
    with open_file(target) as reader:
        out = bytearray(int(reader.starts[-1]))
        reader._read_bytes(0, len(out), _as_uint8(out))
        return bytes(out), reader.metadata


def unpack_bytes_from_file(compressed_file: Any) -> tuple[bytes, Any]:
    """(data, metadata) of a bloscpack file; metadata is None when the file has none."""
    return _unpack_bytes(os.fspath(compressed_file))


def unpack_bytes_from_bytes(bytes_: Any) -> tuple[bytes, Any]:
    """(data, metadata) of bloscpack bytes."""
    return _unpack_bytes(memoryview(bytes_))


def _map_input(path: Any) -> tuple[Source, np.ndarray]:
    source = Source.open(os.fspath(path), ERRORS)
    return source, source.array(0, source.size, np.uint8, f"input file {os.fspath(path)}")


def unpack_file_from_file(in_file: Any, out_file: Any, progress: Progress | None = None) -> Any:
    """Decompress the bloscpack file ``in_file`` into ``out_file``; returns its metadata (or None)."""
    with open_file(os.fspath(in_file)) as reader, open_output(out_file) as stream:
        positions, sizes, part = reader.positions, np.diff(reader.starts), limits.get("chunk_bytes")
        release = progressive_release(reader.source)
        def decoded(index: int) -> np.ndarray | None:  # None: over the limit, streamed in parts below
            return reader.read_chunk(index) if sizes[index] <= part else None

        for index, chunk in enumerate(ordered_map(decoded, range(reader.nchunks), threads=reader.concurrent)):
            for low in range(0, int(sizes[index]), part) if chunk is None else ():
                piece = np.empty(min(part, int(sizes[index]) - low), np.uint8)
                reader._decode_part(index, low, low + len(piece), piece)
                stream.write(piece.data)
            if chunk is not None:
                stream.write(memoryview(chunk))
            release(int(positions[index]))
            if progress is not None:
                progress(int(sizes[index]))
        return reader.metadata


unpack_ndarray_file = deprecated_alias(unpack_ndarray_from_file, "unpack_ndarray_file")
unpack_ndarray_str = deprecated_alias(unpack_ndarray_from_bytes, "unpack_ndarray_str")
unpack_bytes_file = deprecated_alias(unpack_bytes_from_file, "unpack_bytes_file")
unpack_file = deprecated_alias(unpack_file_from_file, "unpack_file")

