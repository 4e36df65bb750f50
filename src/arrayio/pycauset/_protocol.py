"""The registry protocol for the pycauset container: info, validate, entries, cat, demo."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from .._binary import Source
from ..errors import ArrayIOError, FormatError
from ._container import (
    HEADER_BYTES,
    SLOTS_END,
    Container,
    check_preamble,
    choose_active,
    load,
    read_block,
    read_slots,
    save,
    update_metadata,
)
from ._errors import ERRORS, FORMAT_NAME
from ._layouts import check_payload_length, layout_from_metadata


def _jsonable(value: Any) -> Any:
    """Metadata as JSON-friendly values: bytes become {"bytes": n, "hex": first 32 bytes}."""
    if isinstance(value, dict):
        return {key: _jsonable(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_jsonable(item) for item in value]
    if isinstance(value, bytes):
        return {"bytes": len(value), "hex": value[:32].hex() + ("..." if len(value) > 32 else "")}
    return value


def _slot_facts(slot: Any, active: Any) -> dict[str, Any]:
    facts = {name: int(getattr(slot.fields, name)) for name in (
        "generation", "payload_offset", "payload_length", "metadata_offset", "metadata_length",
        "hot_offset", "hot_length", "slot_crc32")}
    facts.update(crc_ok=slot.crc_ok, valid=slot.valid, active=slot is active, problems=list(slot.problems))
    return facts


def info(path: Any) -> dict[str, Any]:
    """Both slots, the active one, the matrix identity and the metadata tree, JSON-friendly."""
    with load(path) as container:
        active = choose_active(container.slots)
        layout = container.layout
        shape = "x".join(map(str, container.shape))
        return {
            "summary": (f"{layout.matrix_type}/{layout.data_type} {shape} "
                        f"{'vector' if layout.is_vector else 'matrix'}, generation {container.generation} "
                        f"(slot {container.active_slot}), {len(container.metadata)} metadata keys"),
            "file_size": container.source.size,
            "format_version": int(container.preamble.format_version),
            "active_slot": container.active_slot,
            "generation": container.generation,
            "slots": {slot.name: _slot_facts(slot, active) for slot in container.slots},
            "matrix_type": layout.matrix_type,
            "data_type": layout.data_type,
            "shape": list(container.shape),
            "stored_shape": [layout.rows, layout.cols],
            "is_transposed": layout.is_transposed,
            "payload_layout": {"kind": layout.kind, "params": _jsonable(layout.params),
                               **({"diagonal": layout.diagonal} if layout.kind == "raw_triangular" else {})},
            "payload_offset": container.payload_offset,
            "payload_length": container.payload_length,
            "metadata_offset": container.metadata_offset,
            "metadata_length": container.metadata_length,
            "metadata": _jsonable(container.metadata),
        }


def _reserved_problems(source: Source, slots: Any) -> list[str]:
    problems = []
    for slot in slots:
        if any(slot.fields.reserved):
            problems.append(str(ERRORS.invalid(f"slot {slot.name} slot_reserved", slot.field_offset("reserved"),
                                               "68 zero bytes", bytes(slot.fields.reserved))))
    tail = np.frombuffer(source.view(SLOTS_END, HEADER_BYTES - SLOTS_END, "header tail"), np.uint8)
    if tail.any():
        first = SLOTS_END + int(np.flatnonzero(tail)[0])
        problems.append(str(ERRORS.invalid("header reserved bytes 272..4095", first, "zero", "a non-zero byte")))
    return problems


def validate(path: Any) -> list[str]:
    """Every problem found: preamble, both slots (CRC, alignment, ranges), blocks, identity, payload length."""
    with Source.open(path, ERRORS) as source:
        try:
            check_preamble(source)
            slots = read_slots(source)
        except FormatError as error:
            return [str(error)]
        problems = [problem for slot in slots for problem in slot.problems]
        problems += _reserved_problems(source, slots)
        active = choose_active(slots)
        if active is None:
            return problems + [f"{FORMAT_NAME}: no valid header slot: the file cannot be loaded"]
        for slot in slots:
            if not slot.valid:
                continue
            label = "active" if slot is active else "inactive"
            try:
                metadata = read_block(source, slot)
            except FormatError as error:
                problems.append(f"{error} ({label} slot {slot.name})")
                continue
            if slot is not active:
                continue
            try:
                layout = layout_from_metadata(metadata, int(slot.fields.payload_length),
                                              int(slot.fields.metadata_offset))
                check_payload_length(layout, int(slot.fields.payload_length), slot.field_offset("payload_length"))
            except ArrayIOError as error:
                problems.append(str(error))
            uuid = metadata.get("payload_uuid")
            if not isinstance(uuid, str) or not uuid:
                problems.append(str(ERRORS.invalid("metadata['payload_uuid']", int(slot.fields.metadata_offset),
                                                   "a non-empty string (pycauset.load requires it)", uuid)))
        return problems


def entries(path: Any) -> list[dict[str, Any]]:
    """The matrix and each top-level metadata key, as rows for ``arrayio ls``."""
    with load(path) as container:
        rows = [{"name": "matrix", "type": f"{container.matrix_type}/{container.data_type}",
                 "shape": "x".join(map(str, container.shape)), "bytes": container.layout.nbytes()}]
        for key, value in container.metadata.items():
            rows.append({"name": f"metadata.{key}", "type": type(value).__name__, "shape": "",
                         "bytes": ""})
        return rows


def _tree_lines(value: Any, prefix: str) -> Iterator[str]:
    if isinstance(value, dict):
        if not value:
            yield f"{prefix} = {{}}"
        for key, item in value.items():
            yield from _tree_lines(item, f"{prefix}.{key}" if prefix else key)
    else:
        yield f"{prefix} = {_jsonable(value)!r}" if isinstance(value, bytes) else f"{prefix} = {value!r}"


def cat(path: Any, name: str) -> Iterator[str]:
    """Lines of entry ``name``: "matrix" (one row per line) or "metadata[.key[.key...]]"."""
    with load(path) as container:
        if name == "matrix":
            matrix = container.values()
            if matrix.ndim == 1:
                for value in matrix.tolist():
                    yield str(value)
            else:
                for row in matrix:
                    yield " ".join(str(value) for value in row.tolist())
            return
        parts = name.split(".")
        if parts[0] != "metadata":
            raise KeyError(name)
        value: Any = container.metadata
        for part in parts[1:]:
            if not isinstance(value, dict) or part not in value:
                raise KeyError(name)
            value = value[part]
        yield from _tree_lines(value, ".".join(parts[1:]))


def open(path: Any, storage_options: dict | None = None) -> Container:  # noqa: A001 - the protocol's name
    """Open a ``.pycauset`` file (the same as :func:`load`)."""
    return load(path, storage_options)


def demo(folder: Path) -> Path:
    """Write a small matrix with properties, update its metadata once, read it back and check it."""
    path = Path(folder) / "demo.pycauset"
    matrix = np.arange(12, dtype=np.float64).reshape(3, 4) / 4
    save(matrix, path, properties={"is_demo": True})
    update_metadata(path, {"provenance": {"tool": "arrayio demo"}})
    with load(path) as container:
        if not np.array_equal(container.array, matrix) or container.generation != 2:
            raise RuntimeError("pycauset demo: the file did not read back equal")
        if container.metadata["provenance"] != {"tool": "arrayio demo"}:
            raise RuntimeError("pycauset demo: the metadata update did not read back")
    return path
