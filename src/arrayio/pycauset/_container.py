"""The container itself: the 4096-byte header with two CRC-protected slots, the
payload at a 4096-aligned offset and append-only PCMB metadata blocks.

Reading picks the valid slot with the highest generation (slot A on a tie),
decodes the metadata block it points at (a bad block there is an error, never
a silent fallback) and maps the payload. Writing a new file goes through a
temporary file and a rename; ``update_metadata`` appends a block, fsyncs,
writes the inactive slot, fsyncs, and never touches the payload or the active
slot.
"""

from __future__ import annotations

import os
import uuid
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

try:
    import fcntl
except ImportError:  # not POSIX: concurrent updaters are not serialised there
    fcntl = None

from .._binary import Record, Source, Writer, output_stream, round_up, write_at
from .._sources import resolve
from ..errors import UnsupportedError
from ._codec import decode_metadata, encode_metadata
from ._errors import ERRORS
from ._layouts import (
    DENSE,
    UNPACK_LIMIT,
    Layout,
    PackedMatrix,
    check_payload_length,
    data_type_of,
    dense_bit_stride,
    dense_params,
    layout_from_metadata,
)

if TYPE_CHECKING:
    from typing_extensions import Self

MAGIC = b"PYCAUSET"
FORMAT_VERSION = 1
ENDIAN_LITTLE = 1
HEADER_BYTES = 4096
PAYLOAD_ALIGN = 4096
METADATA_ALIGN = 16
BLOCK_MAGIC = b"PCMB"
BLOCK_VERSION = 1
ENCODING_VERSION = 1

PREAMBLE = Record("pycauset preamble", [
    ("magic", "8s"), ("format_version", "<u4"), ("endian", "u1"), ("header_bytes", "<u2"), ("reserved0", "u1"),
], size=16)
SLOT = Record("pycauset header slot", [
    ("generation", "<u8"), ("payload_offset", "<u8"), ("payload_length", "<u8"),
    ("metadata_offset", "<u8"), ("metadata_length", "<u8"), ("hot_offset", "<u8"), ("hot_length", "<u8"),
    ("slot_crc32", "<u4"), ("reserved", "68s"),
], size=128)
BLOCK_HEADER = Record("pycauset metadata block header", [
    ("block_magic", "4s"), ("block_version", "<u4"), ("encoding_version", "<u4"), ("reserved0", "<u4"),
    ("payload_length", "<u8"), ("payload_crc32", "<u4"), ("reserved1", "<u4"),
], size=32)

SLOT_OFFSETS = {"A": PREAMBLE.size, "B": PREAMBLE.size + SLOT.size}
SLOT_CRC_COVERS = SLOT.offsets["slot_crc32"]
SLOTS_END = SLOT_OFFSETS["B"] + SLOT.size
U64_LIMIT = 2**64 - 1

# Keys that describe the payload bytes; update_metadata may not change them.
IDENTITY_KEYS = frozenset({"rows", "cols", "matrix_type", "data_type", "payload_layout", "payload_uuid"})
WRITER_KEYS = IDENTITY_KEYS | {"seed", "view"}


@dataclass(frozen=True)
class SlotState:
    """One header slot as read, with the reasons (if any) it is not valid."""

    name: str
    offset: int
    fields: Any
    crc_ok: bool
    problems: tuple[str, ...]

    @property
    def valid(self) -> bool:
        """True when the slot may be chosen (CRC, alignment, ranges, no overlap with the header)."""
        return not self.problems

    @property
    def generation(self) -> int:
        """The slot's generation counter."""
        return int(self.fields.generation)

    def field_offset(self, name: str) -> int:
        """Absolute byte offset of one of this slot's fields."""
        return SLOT.offset_of(name, base=self.offset)


def slot_crc(raw: Any) -> int:
    """The zlib (IEEE) CRC-32 of the first 56 bytes of a slot."""
    return zlib.crc32(bytes(raw[:SLOT_CRC_COVERS])) & 0xFFFFFFFF


def check_preamble(source: Source) -> Any:
    """Read and check the 16-byte preamble and that the 4096-byte header is complete."""
    preamble = PREAMBLE.read(source, 0)
    ERRORS.check_magic("preamble.magic", 0, MAGIC, preamble.magic)
    ERRORS.check_version("preamble.format_version", PREAMBLE.offsets["format_version"], FORMAT_VERSION,
                         preamble.format_version)
    if preamble.endian != ENDIAN_LITTLE:
        raise ERRORS.invalid("preamble.endian", PREAMBLE.offsets["endian"], f"{ENDIAN_LITTLE} (little-endian)",
                             preamble.endian)
    if preamble.header_bytes != HEADER_BYTES:
        raise ERRORS.invalid("preamble.header_bytes", PREAMBLE.offsets["header_bytes"], HEADER_BYTES,
                             preamble.header_bytes)
    if preamble.reserved0 != 0:
        raise ERRORS.invalid("preamble.reserved0", PREAMBLE.offsets["reserved0"], 0, preamble.reserved0)
    source.check(0, HEADER_BYTES, "pycauset header (4096 bytes)")
    return preamble


def _range_problem(slot_name: str, base: int, what: str, offset: int, length: int, size: int) -> str | None:
    field = f"slot {slot_name} {what}_offset"
    at = SLOT.offset_of(f"{what}_offset", base=base)
    if offset < HEADER_BYTES:
        return str(ERRORS.invalid(field, at, f">= {HEADER_BYTES} (after the header)", offset))
    if offset + length > size:
        return str(ERRORS.invalid(f"slot {slot_name} {what} range", at,
                                  f"offset + length <= file size {size}", f"{offset} + {length}"))
    return None


def read_slot(source: Source, name: str) -> SlotState:
    """Read slot ``name`` ("A" or "B") and judge its validity against the file size."""
    base = SLOT_OFFSETS[name]
    raw = source.view(base, SLOT.size, f"slot {name}")
    fields = SLOT.unpack(raw)
    problems: list[str] = []
    computed = slot_crc(raw)
    crc_ok = computed == fields.slot_crc32
    if not crc_ok:
        problems.append(str(ERRORS.checksum_mismatch(f"slot {name} slot_crc32", base + SLOT_CRC_COVERS,
                                                     f"0x{computed:08x}", f"0x{fields.slot_crc32:08x}")))
    if fields.payload_offset % PAYLOAD_ALIGN:
        problems.append(str(ERRORS.invalid(f"slot {name} payload_offset", base + SLOT.offsets["payload_offset"],
                                           f"a multiple of {PAYLOAD_ALIGN}", fields.payload_offset)))
    if fields.metadata_offset % METADATA_ALIGN:
        problems.append(str(ERRORS.invalid(f"slot {name} metadata_offset", base + SLOT.offsets["metadata_offset"],
                                           f"a multiple of {METADATA_ALIGN}", fields.metadata_offset)))
    for what, offset, length in (("payload", fields.payload_offset, fields.payload_length),
                                 ("metadata", fields.metadata_offset, fields.metadata_length)):
        problem = _range_problem(name, base, what, offset, length, source.size)
        if problem:
            problems.append(problem)
    if fields.hot_length and fields.hot_offset + fields.hot_length > source.size:
        problems.append(str(ERRORS.invalid(f"slot {name} hot range", base + SLOT.offsets["hot_offset"],
                                           f"offset + length <= file size {source.size}",
                                           f"{fields.hot_offset} + {fields.hot_length}")))
    return SlotState(name, base, fields, crc_ok, tuple(problems))


def choose_active(slots: tuple[SlotState, SlotState]) -> SlotState | None:
    """The valid slot with the highest generation; slot A wins a tie; None when neither is valid."""
    slot_a, slot_b = slots
    if slot_a.valid and (not slot_b.valid or slot_a.generation >= slot_b.generation):
        return slot_a
    return slot_b if slot_b.valid else None


def read_slots(source: Source) -> tuple[SlotState, SlotState]:
    """Both header slots, in order A, B."""
    return read_slot(source, "A"), read_slot(source, "B")


def require_active(slots: tuple[SlotState, SlotState]) -> SlotState:
    """The active slot, or a FormatError that gives both slots' reasons."""
    active = choose_active(slots)
    if active is None:
        reasons = "; ".join(problem for slot in slots for problem in slot.problems)
        raise ERRORS.format_error(f"pycauset: no valid header slot at bytes 16..271: {reasons}",
                                  format="pycauset", field="header slots", offset=SLOT_OFFSETS["A"],
                                  expected="a valid slot A or B")
    return active


def read_block(source: Source, slot: SlotState) -> dict[str, Any]:
    """Check the PCMB block ``slot`` points at (framing, versions, CRC) and decode its metadata."""
    fields = slot.fields
    start = int(fields.metadata_offset)
    where = f"metadata block of slot {slot.name}"
    if fields.metadata_length < BLOCK_HEADER.size:
        raise ERRORS.invalid(f"slot {slot.name} metadata_length", slot.field_offset("metadata_length"),
                             f"at least {BLOCK_HEADER.size} (a PCMB block header)", fields.metadata_length)
    header = BLOCK_HEADER.read(source, start)
    if header.block_magic != BLOCK_MAGIC:
        raise ERRORS.invalid(f"{where} block_magic", start, BLOCK_MAGIC, header.block_magic)
    for name, supported in (("block_version", BLOCK_VERSION), ("encoding_version", ENCODING_VERSION)):
        value = getattr(header, name)
        if value != supported:
            raise ERRORS.version(f"{where} {name}", BLOCK_HEADER.offset_of(name, base=start), supported, value,
                                 newer=value > supported)
    for name in ("reserved0", "reserved1"):
        if getattr(header, name):
            raise ERRORS.invalid(f"{where} {name}", BLOCK_HEADER.offset_of(name, base=start), 0,
                                 getattr(header, name))
    if fields.metadata_length != BLOCK_HEADER.size + header.payload_length:
        raise ERRORS.invalid(f"{where} payload_length", BLOCK_HEADER.offset_of("payload_length", base=start),
                             f"{fields.metadata_length - BLOCK_HEADER.size} (slot metadata_length "
                             f"{fields.metadata_length} - 32)", header.payload_length)
    payload = source.view(start + BLOCK_HEADER.size, header.payload_length, f"{where} payload")
    crc = zlib.crc32(payload) & 0xFFFFFFFF
    if crc != header.payload_crc32:
        raise ERRORS.checksum_mismatch(f"{where} payload_crc32", BLOCK_HEADER.offset_of("payload_crc32", base=start),
                                       f"0x{crc:08x}", f"0x{header.payload_crc32:08x}")
    return decode_metadata(payload, start + BLOCK_HEADER.size)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _scalar(view: Any) -> complex | float:
    """The view's scalar: a {real, imag} map (native objects) or a plain F64 (BLOCK); 1.0 when malformed."""
    value = view.get("scalar", 1.0) if isinstance(view, dict) else 1.0
    if isinstance(value, dict):
        real, imag = value.get("real", 1.0), value.get("imag", 0.0)
        if _is_number(real) and _is_number(imag):
            return float(real) if imag == 0 else complex(real, imag)
        return 1.0
    return float(value) if _is_number(value) else 1.0


class Container:
    """A loaded ``.pycauset`` file: its metadata, the active slot and the matrix payload.

    ``array`` is a read-only zero-copy view of dense payloads (transposition
    applied as a view) and a dense array unpacked on first use for the packed
    layouts; ``values()`` also applies the view's conjugation and scalar.
    """

    def __init__(self, source: Source, name: str = "<buffer>") -> None:
        self.source = source
        self.name = name
        try:
            self.preamble = check_preamble(source)
            self.slots = read_slots(source)
            active = require_active(self.slots)
            self.active_slot = active.name
            self.generation = active.generation
            self.payload_offset = int(active.fields.payload_offset)
            self.payload_length = int(active.fields.payload_length)
            self.metadata_offset = int(active.fields.metadata_offset)
            self.metadata_length = int(active.fields.metadata_length)
            self.metadata = read_block(source, active)
            self.layout = layout_from_metadata(self.metadata, self.payload_length, self.metadata_offset)
            check_payload_length(self.layout, self.payload_length, active.field_offset("payload_length"))
            source.check(self.payload_offset, self.layout.nbytes(), "matrix payload")
            # Mapped payloads are views at once; a remote one is fetched only when used.
            self._payload = self._read_payload() if source.buffer is not None else None
        except BaseException:
            source.close()
            raise
        self._unpacked: np.ndarray | None = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"<pycauset Container {self.name!r} {self.matrix_type}/{self.data_type} shape={self.shape} "
                f"slot {self.active_slot} generation {self.generation}>")

    def close(self) -> None:
        """Release the file map (arrays handed out keep their pages alive until dropped)."""
        self._payload = None
        self._unpacked = None
        self.source.close()

    @property
    def matrix_type(self) -> str:
        """The stored matrix_type (DENSE_FLOAT, INTEGER, CAUSAL, ...)."""
        return self.layout.matrix_type

    @property
    def data_type(self) -> str:
        """The stored data_type (FLOAT64, INT32, BIT, ...)."""
        return self.layout.data_type

    @property
    def shape(self) -> tuple[int, ...]:
        """The logical shape (after transposition); vectors are 1-D."""
        return self.layout.shape

    @property
    def is_transposed(self) -> bool:
        """The view flag: the matrix is the transpose of the stored payload."""
        return self.layout.is_transposed

    @property
    def is_conjugated(self) -> bool:
        """The view flag: the matrix is the complex conjugate of the stored values."""
        view = self.metadata.get("view", {})
        return bool(view.get("is_conjugated", False)) if isinstance(view, dict) else False

    @property
    def scalar(self) -> complex | float:
        """The view's scalar factor (1.0 for everything arrayio and numpy-based pycauset code save)."""
        return _scalar(self.metadata.get("view"))

    @property
    def properties(self) -> dict[str, Any]:
        """The user's gospel properties (the ``properties`` map; empty when absent)."""
        value = self.metadata.get("properties", {})
        return value if isinstance(value, dict) else {}

    @property
    def packed(self) -> np.ndarray:
        """The payload as stored, read-only and zero-copy (typed for dense and diagonal payloads)."""
        return self.layout.packed_view(self._live_payload())

    def _read_payload(self) -> np.ndarray:
        return self.source.array(self.payload_offset, self.layout.nbytes(), np.uint8, "matrix payload")

    def _live_payload(self) -> np.ndarray:
        if self.source.closed:
            raise ValueError("I/O operation on a closed pycauset container")
        if self._payload is None:
            self._payload = self._read_payload()
        return self._payload

    def unpack(self, max_bytes: int | None = UNPACK_LIMIT) -> np.ndarray:
        """The matrix as a dense numpy array (a zero-copy view for dense payloads)."""
        payload = self._live_payload()
        if self.layout.zero_copy:
            return self.layout.orient(self.layout.dense_view(payload))
        if self._unpacked is None:
            unpacked = self.layout.unpack(payload, max_bytes)
            unpacked.flags.writeable = False
            self._unpacked = unpacked
        return self.layout.orient(self._unpacked)

    def read_rows(self, start: int, stop: int) -> np.ndarray:
        """Rows ``start..stop`` of a dense payload in stored orientation, reading only their bytes."""
        layout = self.layout
        if not layout.zero_copy:
            raise UnsupportedError(f"pycauset: {layout.matrix_type}/{layout.data_type} payloads are not stored "
                                   "as plain rows")
        rows, cols = (layout.rows, 1) if layout.is_vector else (layout.rows, layout.cols)
        start, stop, _ = slice(start, stop).indices(rows)
        stop = max(start, stop)
        if self.source.closed:
            raise ValueError("I/O operation on a closed pycauset container")
        row_bytes = cols * layout.dtype.itemsize
        block = self.source.array(self.payload_offset + start * row_bytes, (stop - start) * cols, layout.dtype,
                                  f"matrix rows {start}..{stop}")
        return block if layout.is_vector else block.reshape(stop - start, cols)

    @property
    def array(self) -> np.ndarray:
        """The matrix: read-only, zero-copy for dense payloads, unpacked once for packed ones."""
        return self.unpack()

    def values(self) -> np.ndarray:
        """The logical matrix with the view's conjugation and scalar applied (a copy only when they apply)."""
        result = self.array
        if self.is_conjugated and result.dtype.kind == "c":
            result = np.conj(result)
        scalar = self.scalar
        if scalar != 1:
            result = result * scalar
        return result


def _dense_chunks(array: np.ndarray, data_type: str, vector: bool, chunk_bytes: int = 1 << 24) -> Iterator[Any]:
    """The payload of a dense numpy array, in row chunks of bounded size (no full copy)."""
    if array.size == 0:
        return
    if data_type == "BIT":
        if vector:
            packed = np.packbits(array, bitorder="little")
            yield packed
            yield bytes(round_up(packed.size, 8) - packed.size)
            return
        stride = dense_bit_stride(array.shape[1])
        step = max(1, chunk_bytes // max(1, array.shape[1]))
        for start in range(0, array.shape[0], step):
            bits = np.packbits(array[start:start + step], axis=1, bitorder="little")
            rows = np.zeros((bits.shape[0], stride), dtype=np.uint8)
            rows[:, :bits.shape[1]] = bits
            yield rows
        return
    if array.flags.c_contiguous:
        yield array
        return
    step = max(1, chunk_bytes // max(1, array.itemsize * (array.shape[1] if array.ndim == 2 else 1)))
    for start in range(0, array.shape[0], step):
        yield np.ascontiguousarray(array[start:start + step])


def _prepare(matrix: Any) -> tuple[Layout, Iterator[Any]]:
    if isinstance(matrix, PackedMatrix):
        return matrix.layout(), iter((matrix.payload,))
    if isinstance(matrix, Container):
        matrix = matrix.values()
    array = np.asarray(matrix)
    if array.ndim not in (1, 2):
        raise UnsupportedError(f"pycauset: save takes a 1-D vector or a 2-D matrix, got {array.ndim} dimensions")
    data_type = data_type_of(array.dtype)
    vector = array.ndim == 1
    transposed = False
    if not vector and not array.flags.c_contiguous and array.flags.f_contiguous and data_type != "BIT":
        # A Fortran-ordered matrix is the transpose of a C-ordered one: store that, zero copy.
        array, transposed = array.T, True
    rows = array.shape[0]
    cols = 1 if vector else array.shape[1]
    matrix_type = "VECTOR" if vector else ("INTEGER" if array.dtype.kind in "iu" else "DENSE_FLOAT")
    layout = Layout(matrix_type, data_type, DENSE, rows, cols, dense_params(data_type, cols, vector),
                    is_transposed=transposed)
    return layout, _dense_chunks(array, data_type, vector)


def identity_metadata(layout: Layout) -> dict[str, Any]:
    """The identity keys arrayio writes for a payload (the same keys pycauset 0.6.1 writes)."""
    return {
        "rows": layout.rows,
        "cols": layout.cols,
        "seed": 0,
        "payload_uuid": uuid.uuid4().hex,
        "view": {"is_transposed": layout.is_transposed, "is_conjugated": False,
                 "scalar": {"real": 1.0, "imag": 0.0}},
        "payload_layout": {"kind": layout.kind, "params": dict(layout.params)},
        "matrix_type": layout.matrix_type,
        "data_type": layout.data_type,
    }


def pack_block(metadata: Mapping[str, Any]) -> bytes:
    """One complete PCMB block (header + encoded payload) for ``metadata``."""
    encoded = encode_metadata(metadata)
    header = BLOCK_HEADER.pack(block_magic=BLOCK_MAGIC, block_version=BLOCK_VERSION,
                               encoding_version=ENCODING_VERSION, payload_length=len(encoded),
                               payload_crc32=zlib.crc32(encoded) & 0xFFFFFFFF)
    return header + encoded


def pack_slot(generation: int, payload_offset: int, payload_length: int, metadata_offset: int,
              metadata_length: int) -> bytes:
    """One 128-byte header slot with its CRC."""
    fields = {"generation": generation, "payload_offset": payload_offset, "payload_length": payload_length,
              "metadata_offset": metadata_offset, "metadata_length": metadata_length}
    return SLOT.pack(**fields, slot_crc32=slot_crc(SLOT.pack(**fields)))


def write_container(target: Any, chunks: Iterator[Any], payload_length: int, metadata: Mapping[str, Any]) -> None:
    """Write a complete container: header (slot A gen 1, slot B gen 0), payload, padding, one block.

    ``target`` is a path (written atomically), a file descriptor or a binary stream.
    """
    block = pack_block(metadata)
    metadata_offset = round_up(HEADER_BYTES + payload_length, METADATA_ALIGN)
    pointers = (HEADER_BYTES, payload_length, metadata_offset, len(block))
    header = (PREAMBLE.pack(magic=MAGIC, format_version=FORMAT_VERSION, endian=ENDIAN_LITTLE,
                            header_bytes=HEADER_BYTES) + pack_slot(1, *pointers) + pack_slot(0, *pointers))
    with output_stream(target) as stream:
        writer = Writer(stream)
        writer.write(header)
        writer.pad_to(HEADER_BYTES)
        for chunk in chunks:
            if isinstance(chunk, np.ndarray):
                writer.write_array(chunk)
            else:
                writer.write(chunk)
        if writer.position != HEADER_BYTES + payload_length:
            raise RuntimeError(f"pycauset writer: wrote {writer.position - HEADER_BYTES} payload bytes, "
                               f"declared {payload_length}")
        writer.pad_to(METADATA_ALIGN)
        writer.write(block)


def save(matrix: Any, path: Any, *, properties: Mapping[str, Any] | None = None,
         metadata: Mapping[str, Any] | None = None) -> None:
    """Save a numpy matrix/vector or a packed layout to ``path`` atomically (temp file, fsync, rename)."""
    layout, chunks = _prepare(matrix)
    document = identity_metadata(layout)
    for key, value in (metadata or {}).items():
        if key in WRITER_KEYS:
            raise UnsupportedError(f"pycauset: metadata key {key!r} is written by save itself")
        document[key] = value
    if properties is not None:
        if "properties" in document:
            raise UnsupportedError("pycauset: give properties either as properties= or in metadata=, not both")
        document["properties"] = {key: value for key, value in properties.items() if value is not None}
    write_container(path, chunks, layout.nbytes(), document)


def load(path: Any, storage_options: dict | None = None) -> Container:
    """Open a ``.pycauset`` file (path, bytes, binary file, URL or fsspec file): header, metadata and a
    mapped payload, O(1); a remote payload is fetched on first use."""
    source = Source.open(resolve(path, storage_options) if storage_options else path, ERRORS)
    return Container(source, source.name)


def read_typed_metadata(path: Any) -> dict[str, Any]:
    """The decoded metadata map of the active slot (slot A on equal generations)."""
    with Source.open(path, ERRORS) as source:
        check_preamble(source)
        return read_block(source, require_active(read_slots(source)))


def _merge(current: Mapping[str, Any], changes: Mapping[str, Any], path: str = "") -> dict[str, Any]:
    merged = dict(current)
    for key, value in changes.items():
        if not isinstance(key, str):
            raise UnsupportedError(f"pycauset metadata: map keys must be str, got {key!r}")
        if not path and key in IDENTITY_KEYS:
            if merged.get(key) != value:
                raise UnsupportedError(f"pycauset: update_metadata cannot change the identity key {key!r} "
                                       "(it describes the payload bytes); save a new file instead")
            continue
        if value is None:
            merged.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = _merge(merged[key], value, f"{path}{key}.")
        else:
            merged[key] = value
    return merged


def update_metadata(path: Any, changes: Mapping[str, Any]) -> int:
    """Merge ``changes`` into the metadata (None deletes a key) crash-safely; returns the new generation.

    Appends a new block, fsyncs, writes the inactive slot with generation + 1,
    fsyncs. The payload and the active slot are never written, so a crash at
    any point leaves the old or the new metadata, and the cost is independent
    of the payload size. An advisory lock (flock) serialises concurrent updaters.
    """
    if not isinstance(changes, Mapping):
        raise UnsupportedError(f"pycauset: changes must be a dict, got {type(changes).__name__}")
    fd = os.open(os.fspath(path), os.O_RDWR)
    try:
        if fcntl is not None:
            # Concurrent updaters take turns, so no merge reads a map another one is replacing.
            fcntl.flock(fd, fcntl.LOCK_EX)
        with Source.from_fd(fd, ERRORS, name=os.fsdecode(path)) as source:
            check_preamble(source)
            slots = read_slots(source)
            active = require_active(slots)
            current = read_block(source, active)
            file_size = source.size
        if active.generation >= U64_LIMIT:
            raise UnsupportedError("pycauset: the generation counter is exhausted (2**64 - 1)")
        block = pack_block(_merge(current, changes))
        block_offset = round_up(file_size, METADATA_ALIGN)
        # Barrier 1: the block must be durable before any slot points at it.
        write_at(fd, file_size, bytes(block_offset - file_size) + block)
        inactive = "B" if active.name == "A" else "A"
        slot = pack_slot(active.generation + 1, int(active.fields.payload_offset),
                         int(active.fields.payload_length), block_offset, len(block))
        # Barrier 2: the commit is durable when we return.
        write_at(fd, SLOT_OFFSETS[inactive], slot)
        return active.generation + 1
    finally:
        os.close(fd)


@dataclass(frozen=True)
class SlotSummary:
    """pycauset's storage_debug.SlotSummary: one slot's fields, its CRC result and validity."""

    name: str
    crc_ok: bool
    generation: int
    payload_offset: int
    payload_length: int
    metadata_offset: int
    metadata_length: int
    hot_offset: int
    hot_length: int
    valid: bool


def _summary_of(slot: SlotState) -> SlotSummary:
    fields = slot.fields
    return SlotSummary(slot.name, slot.crc_ok, int(fields.generation), int(fields.payload_offset),
                       int(fields.payload_length), int(fields.metadata_offset), int(fields.metadata_length),
                       int(fields.hot_offset), int(fields.hot_length), slot.valid)


def summarize_container(path: Any) -> dict[str, Any]:
    """pycauset's summarize_container: preamble, both slots and the active one, without reading metadata."""
    with Source.open(path, ERRORS) as source:
        preamble = PREAMBLE.read(source, 0)
        slots = read_slots(source)
        active = choose_active(slots)
        return {
            "path": os.fsdecode(path) if isinstance(path, (str, os.PathLike)) else source.name,
            "file_size": source.size,
            "preamble": {"magic": preamble.magic, "format_version": int(preamble.format_version),
                         "endian": int(preamble.endian), "header_bytes": int(preamble.header_bytes),
                         "reserved": int(preamble.reserved0)},
            "slot_a": _summary_of(slots[0]),
            "slot_b": _summary_of(slots[1]),
            "active_slot": active.name if active else None,
        }

