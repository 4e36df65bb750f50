"""Reading the container: the 4096-byte header with two CRC-protected slots, the
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
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

try:
    import fcntl
except ImportError:  # not POSIX: concurrent updaters are not serialised there
    fcntl = None  # type: ignore[assignment]  # the module or None; checked before use

from .._binary import Source
from .._edge import open_source
from .._readers import ReaderBase, names_its_file
from .._text import row_lines, value_lines
from ..errors import ArrayIOError, FormatError, Problem, UnsupportedError, naming_file
from ._codec import decode_metadata
from ._errors import ERRORS, ContainerClosedError
from ._matrices import (
    UNPACK_LIMIT,
    check_payload_length,
    layout_from_metadata,
)
from ._records import (
    BLOCK_HEADER,
    BLOCK_MAGIC,
    BLOCK_VERSION,
    ENCODING_VERSION,
    ENDIAN_LITTLE,
    FORMAT_NAME,
    FORMAT_VERSION,
    HEADER_BYTES,
    MAGIC,
    METADATA_ALIGN,
    PAYLOAD_ALIGN,
    PREAMBLE,
    SLOT,
    SLOT_CRC_COVERS,
    SLOT_OFFSETS,
    SLOTS_END,
)


@dataclass(frozen=True)
class SlotState:
    """One header slot as read, with the reasons (if any) it is not valid."""

    name: str
    offset: int
    fields: Any
    crc_ok: bool
    problems: tuple[Problem, ...]

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


def _range_problem(slot_name: str, base: int, what: str, offset: int, length: int, size: int) -> Problem | None:
    field = f"slot {slot_name} {what}_offset"
    at = SLOT.offset_of(f"{what}_offset", base=base)
    if offset < HEADER_BYTES:
        return ERRORS.problem(field, at, f">= {HEADER_BYTES} (after the header)", offset)
    if offset + length > size:
        return ERRORS.problem(f"slot {slot_name} {what} range", at, f"offset + length <= file size {size}",
                              f"{offset} + {length}")
    return None


def read_slot(source: Source, name: str) -> SlotState:
    """Read slot ``name`` ("A" or "B") and judge its validity against the file size."""
    base = SLOT_OFFSETS[name]
    raw = source.view(base, SLOT.size, f"slot {name}")
    fields = SLOT.unpack(raw)
    problems: list[Problem] = []
    computed = slot_crc(raw)
    crc_ok = computed == fields.slot_crc32
    if not crc_ok:
        problems.append(Problem.from_error(ERRORS.checksum_mismatch(
            f"slot {name} slot_crc32", base + SLOT_CRC_COVERS, f"0x{computed:08x}", f"0x{fields.slot_crc32:08x}")))
    if fields.payload_offset % PAYLOAD_ALIGN:
        problems.append(ERRORS.problem(f"slot {name} payload_offset", base + SLOT.offsets["payload_offset"],
                                       f"a multiple of {PAYLOAD_ALIGN}", fields.payload_offset))
    if fields.metadata_offset % METADATA_ALIGN:
        problems.append(ERRORS.problem(f"slot {name} metadata_offset", base + SLOT.offsets["metadata_offset"],
                                       f"a multiple of {METADATA_ALIGN}", fields.metadata_offset))
    for what, offset, length in (("payload", fields.payload_offset, fields.payload_length),
                                 ("metadata", fields.metadata_offset, fields.metadata_length)):
        problem = _range_problem(name, base, what, offset, length, source.size)
        if problem:
            problems.append(problem)
    if fields.hot_length and fields.hot_offset + fields.hot_length > source.size:
        problems.append(ERRORS.problem(f"slot {name} hot range", base + SLOT.offsets["hot_offset"],
                                       f"offset + length <= file size {source.size}",
                                       f"{fields.hot_offset} + {fields.hot_length}"))
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
        reasons = "; ".join(str(problem) for slot in slots for problem in slot.problems)
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


@names_its_file(lambda container: container.source.name)
class Container(ReaderBase):
    """A loaded ``.pycauset`` file: its metadata, the active slot and the matrix payload.

    ``array`` is a read-only zero-copy view of dense payloads (transposition
    applied as a view) and a dense array unpacked on first use for the packed
    layouts; ``values()`` also applies the view's conjugation and scalar.
    After ``close()`` every access raises ``ContainerClosedError``.
    """

    format = FORMAT_NAME
    closed_error = ContainerClosedError

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

    def __repr__(self) -> str:
        if self.closed:
            return "<pycauset Container, closed>"
        return (f"<pycauset Container {self.name!r} {self.matrix_type}/{self.data_type} shape={self.shape} "
                f"slot {self.active_slot} generation {self.generation}>")

    def _release(self) -> None:
        # Arrays handed out keep their pages alive until dropped.
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
        """The logical shape (after transposition): vectors are 1-D, a transposed vector is (1, n)."""
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
        if self._payload is None:  # a remote payload is fetched on first use
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

    # -- the Reader protocol -----------------------------------------------------------------

    def info(self) -> dict[str, Any]:
        """Both slots, the active one, the matrix identity and the metadata tree, JSON-friendly."""
        active = choose_active(self.slots)
        layout = self.layout
        shape = "x".join(map(str, self.shape))
        return {
            "format": self.format,
            "version": str(int(self.preamble.format_version)),
            "file_size": self.source.size,
            "summary": (f"{layout.matrix_type}/{layout.data_type} {shape} "
                        f"{'vector' if layout.is_vector else 'matrix'}, generation {self.generation} "
                        f"(slot {self.active_slot}), {len(self.metadata)} metadata keys"),
            "active_slot": self.active_slot,
            "generation": self.generation,
            "slots": {slot.name: _slot_facts(slot, active) for slot in self.slots},
            "matrix_type": layout.matrix_type,
            "data_type": layout.data_type,
            "shape": list(self.shape),
            "stored_shape": [layout.rows, layout.cols],
            "is_transposed": layout.is_transposed,
            "payload_layout": {"kind": layout.kind, "params": jsonable(layout.params),
                               **({"diagonal": layout.diagonal} if layout.kind == "raw_triangular" else {})},
            "payload_offset": self.payload_offset,
            "payload_length": self.payload_length,
            "metadata_offset": self.metadata_offset,
            "metadata_length": self.metadata_length,
            "metadata": jsonable(self.metadata),
        }

    def entries(self) -> list[dict[str, Any]]:
        """The matrix and each top-level metadata key, as rows for ``arrayio ls``."""
        rows: list[dict[str, Any]] = [{"name": "matrix", "type": f"{self.matrix_type}/{self.data_type}",
                                       "shape": list(self.shape), "nbytes": self.layout.nbytes()}]
        for key, value in self.metadata.items():
            rows.append({"name": f"metadata.{key}", "type": type(value).__name__, "shape": None, "nbytes": None})
        return rows

    def cat(self, name: str, numbers: bool = False) -> Iterator[str]:
        """Lines of entry ``name``: "matrix" (one row per line) or "metadata[.key[.key...]]"; a byte vector that
        is text prints as text unless ``numbers``."""
        value: Any = self.metadata
        if name == "matrix":
            matrix = self.values()
            yield from value_lines(matrix, numbers) if matrix.ndim == 1 else row_lines(matrix)
            return
        parts = name.split(".")
        if parts[0] != "metadata":
            raise KeyError(name)
        for part in parts[1:]:
            if not isinstance(value, dict) or part not in value:
                raise KeyError(name)
            value = value[part]
        yield from _tree_lines(value, ".".join(parts[1:]))

    def validate(self) -> list[Problem]:
        """Every problem found: both slots (CRC, alignment, ranges), reserved bytes, blocks, identity."""
        return source_problems(self.source)


def _tree_lines(value: Any, prefix: str) -> Iterator[str]:
    if isinstance(value, dict):
        if not value:
            yield f"{prefix} = {{}}"
        for key, item in value.items():
            yield from _tree_lines(item, f"{prefix}.{key}" if prefix else key)
    else:
        yield f"{prefix} = {jsonable(value)!r}" if isinstance(value, bytes) else f"{prefix} = {value!r}"


def jsonable(value: Any) -> Any:
    """Metadata as JSON-friendly values: bytes become {"bytes": n, "hex": first 32 bytes}."""
    if isinstance(value, dict):
        return {key: jsonable(item) for key, item in value.items()}
    if isinstance(value, list):
        return [jsonable(item) for item in value]
    if isinstance(value, bytes):
        return {"bytes": len(value), "hex": value[:32].hex() + ("..." if len(value) > 32 else "")}
    return value


def _slot_facts(slot: SlotState, active: SlotState | None) -> dict[str, Any]:
    facts: dict[str, Any] = {name: int(getattr(slot.fields, name)) for name in (
        "generation", "payload_offset", "payload_length", "metadata_offset", "metadata_length",
        "hot_offset", "hot_length", "slot_crc32")}
    facts.update(crc_ok=slot.crc_ok, valid=slot.valid, active=slot is active,
                 problems=[str(problem) for problem in slot.problems])
    return facts


def _reserved_problems(source: Source, slots: tuple[SlotState, SlotState]) -> list[Problem]:
    problems = []
    for slot in slots:
        if any(slot.fields.reserved):
            problems.append(ERRORS.problem(f"slot {slot.name} slot_reserved", slot.field_offset("reserved"),
                                           "68 zero bytes", bytes(slot.fields.reserved)))
    tail = np.frombuffer(source.view(SLOTS_END, HEADER_BYTES - SLOTS_END, "header tail"), np.uint8)
    if tail.any():
        first = SLOTS_END + int(np.flatnonzero(tail)[0])
        problems.append(ERRORS.problem("header reserved bytes 272..4095", first, "zero", "a non-zero byte"))
    return problems


def source_problems(source: Source) -> list[Problem]:
    """Every problem of the container in ``source``: preamble, both slots, blocks, identity, payload length.

    Works on files that do not load (no valid slot), so it says more than the load error.
    """
    try:
        check_preamble(source)
        slots = read_slots(source)
    except FormatError as error:
        return [Problem.from_error(error)]
    problems = [problem for slot in slots for problem in slot.problems]
    problems += _reserved_problems(source, slots)
    active = choose_active(slots)
    if active is None:
        return problems + [ERRORS.problem("header slots", SLOT_OFFSETS["A"], "a valid slot A or B",
                                          "none (no valid header slot: the file cannot be loaded)")]
    for slot in slots:
        if not slot.valid:
            continue
        label = "active" if slot is active else "inactive"
        try:
            metadata = read_block(source, slot)
        except FormatError as error:
            problems.append(Problem.from_error(error, f"{label} slot {slot.name}"))
            continue
        if slot is not active:
            continue
        try:
            layout = layout_from_metadata(metadata, int(slot.fields.payload_length),
                                          int(slot.fields.metadata_offset))
            check_payload_length(layout, int(slot.fields.payload_length), slot.field_offset("payload_length"))
        except ArrayIOError as error:
            problems.append(Problem.from_error(error))
        uuid = metadata.get("payload_uuid")
        if not isinstance(uuid, str) or not uuid:
            problems.append(ERRORS.problem("metadata['payload_uuid']", int(slot.fields.metadata_offset),
                                           "a non-empty string (pycauset.load requires it)", uuid))
    return problems




def load(path: Any, storage_options: dict | None = None) -> Container:
    """Open a ``.pycauset`` file (path, bytes, binary file, URL or fsspec file): header, metadata and a
    mapped payload, O(1); a remote payload is fetched on first use."""
    source = open_source(path, ERRORS, storage_options)
    return Container(source, source.name)


def read_typed_metadata(path: Any) -> dict[str, Any]:
    """The decoded metadata map of the active slot (slot A on equal generations)."""
    with open_source(path, ERRORS) as source, naming_file(source.name):
        check_preamble(source)
        return read_block(source, require_active(read_slots(source)))



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
    with open_source(path, ERRORS) as source, naming_file(source.name):
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
