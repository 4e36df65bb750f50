"""The array model every view reads: groups and arrays whose chunks are referencable or computed.

Each format describes what a file holds once, in its own package
(``<format>/_tree.py``: ``tree(reader) -> Group``); the zarr store, dask
arrays, kerchunk references, ``arrayio convert`` and the VirtualiZarr /
xarray views are written once against this model and never name a format.

A chunk of an :class:`Array` is always readable through ``read(coords)``
(the chunk's region of the array, short at the edges). Where the file holds
the chunk as bytes that a codec chain decodes (raw little-endian values, a
Blosc1 frame), ``reference(coords)`` gives that byte range as a
:class:`ChunkRef`: other tools may then read the chunk in place. Where it
does not (packed triangles, JPEG frames, values made from metadata),
``reference`` gives None and the chunk is *computed*.

The model imports numpy only: no zarr, no dask. The file's path or URL is not
in the tree's data; :func:`tree_of` wraps the chunk reads so that a damaged
chunk met by any view names the file, as the reader's own methods do.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from .errors import UnsupportedError, naming_file

__all__ = [
    "MAX_CHUNK_BYTES",
    "Array",
    "ChunkRef",
    "Group",
    "blosc_codecs",
    "bytes_codecs",
    "check_dtype",
    "jsonable",
    "rows_per_chunk",
    "tree_of",
]

# Whole-array values (uncompressed keys, matrix payloads, episode columns) are cut into row blocks
# of at most this many bytes: one chunk is what a view holds in memory at once.
MAX_CHUNK_BYTES = 64 << 20

Coords = tuple[int, ...]


@dataclass(frozen=True)
class ChunkRef:
    """Where a chunk lies in the source file: ``length`` bytes at ``offset`` that decode through the
    array's codecs to the full-size chunk."""

    offset: int
    length: int


def bytes_codecs(dtype: np.dtype) -> tuple[dict, ...]:
    """The Zarr v3 codec chain of raw C-order values of ``dtype`` (in its byte order)."""
    if dtype.itemsize > 1:
        return ({"name": "bytes", "configuration": {"endian": "big" if dtype.byteorder == ">" else "little"}},)
    return ({"name": "bytes", "configuration": {}},)


def blosc_codecs(dtype: np.dtype) -> tuple[dict, ...]:
    """The Zarr v3 codec chain of a Blosc1 frame of C-order values of ``dtype`` (in its byte order).

    Decoding reads the compressor, level and shuffle from the frame's own header;
    the values here are only what an encoder would use.
    """
    blosc = {"name": "blosc", "configuration": {"cname": "lz4", "clevel": 5, "shuffle": "shuffle",
                                                "typesize": dtype.itemsize, "blocksize": 0}}
    return (*bytes_codecs(dtype), blosc)


_STRING_CODECS = ({"name": "vlen-utf8", "configuration": {}},)


def _default_fill(dtype: np.dtype) -> Any:
    if dtype.kind == "b":
        return False
    if dtype.kind == "c":
        return [0.0, 0.0]
    if dtype.kind == "f":
        return 0.0
    return 0


@dataclass(eq=False)
class Array:
    """One array: shape, dtype, a regular chunk grid, and how each chunk is read (and where it lies).

    ``read(coords)`` returns the chunk's region (short at the edges).
    ``reference(coords)`` gives the chunk's :class:`ChunkRef` when it is
    referencable through ``codecs``, None when it is computed; ``reference=None``
    on the array: every chunk is computed. ``release(coords)`` lets the kernel
    drop the mapped pages a chunk was read from (one pass through a large file
    keeps a small resident set). ``strings``: values are Python strings.
    ``stored(coords)``: the referenced bytes of a referencable chunk, checked
    the way the format checks them (a digest); without it a view reads the
    ChunkRef's range of the file itself. ``why_computed`` says, for the views
    that list what they leave out, why chunks without a reference have none.
    ``read_rows(low, high)``, where given: rows ``low..high`` of the first axis
    (every other axis whole, so only for a grid of one chunk across them) in
    one call, the chunks' bytes fetched together and decoded straight into
    one array: how a view reads a run of chunks as one task.
    """

    shape: tuple[int, ...]
    dtype: np.dtype
    chunks: tuple[int, ...]
    dimension_names: tuple[str, ...]
    attributes: dict
    read: Callable[[Coords], np.ndarray]
    reference: Callable[[Coords], ChunkRef | None] | None = None
    codecs: tuple[dict, ...] = ()
    fill_value: Any = None
    strings: bool = False
    release: Callable[[Coords], None] | None = None
    stored: Callable[[Coords], Any] | None = None
    why_computed: str = "its values are made from the file's bytes, not stored as a byte range a codec decodes"
    read_rows: Callable[[int, int], np.ndarray] | None = None

    def __post_init__(self) -> None:
        self.dtype = np.dtype(object) if self.strings else np.dtype(self.dtype)
        if not self.codecs:
            self.codecs = _STRING_CODECS if self.strings else bytes_codecs(self.dtype)
        if self.fill_value is None:
            self.fill_value = "" if self.strings else _default_fill(self.dtype)

    @property
    def grid(self) -> tuple[int, ...]:
        """Number of chunks along each axis."""
        return tuple(-(-size // chunk) for size, chunk in zip(self.shape, self.chunks))

    @property
    def nchunks(self) -> int:
        """Number of chunks in the grid."""
        return math.prod(self.grid)

    @property
    def chunk_nbytes(self) -> int:
        """Bytes of one full-size chunk once decoded."""
        return math.prod(self.chunks) * self.dtype.itemsize

    def region(self, coords: Coords) -> tuple[slice, ...]:
        """The part of the array chunk ``coords`` covers (clipped at the edges)."""
        return tuple(slice(index * chunk, min((index + 1) * chunk, size))
                     for index, chunk, size in zip(coords, self.chunks, self.shape))

    def chunk_reference(self, coords: Coords) -> ChunkRef | None:
        """The chunk's byte range in the file, or None where it is computed."""
        return None if self.reference is None else self.reference(coords)

    def full_chunk(self, coords: Coords) -> np.ndarray:
        """The chunk at full size (edge chunks padded with the fill value), little-endian, C order."""
        block = np.asarray(self.read(coords))
        if self.strings:
            return block
        if block.shape != self.chunks:
            padded = np.zeros(self.chunks, dtype=block.dtype)
            padded[tuple(slice(0, size) for size in block.shape)] = block
            block = padded
        if block.dtype.byteorder == ">":
            block = block.astype(block.dtype.newbyteorder("<"))
        return np.ascontiguousarray(block)

    def metadata(self) -> dict:
        """The array's Zarr v3 ``zarr.json``."""
        data_type = "string" if self.strings else self.dtype.name
        return {"zarr_format": 3, "node_type": "array", "shape": list(self.shape), "data_type": data_type,
                "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(self.chunks)}},
                "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
                "fill_value": self.fill_value, "codecs": [dict(codec) for codec in self.codecs],
                "attributes": self.attributes, "dimension_names": list(self.dimension_names)}


@dataclass(eq=False)
class Group:
    """A group: attributes and named children (groups or arrays).

    ``children`` may be any mapping: a format with very many arrays gives a
    lazy one that makes each child when asked, so a walk holds one at a time.
    """

    attributes: dict = field(default_factory=dict)
    children: Mapping[str, Group | Array] = field(default_factory=dict)

    def find(self, path: str) -> Group | Array | None:
        """The node at ``path`` (``a/b/c``; empty for this group), or None."""
        node: Group | Array = self
        for name in path.split("/") if path else []:
            if not isinstance(node, Group):
                return None
            child = node.children.get(name)
            if child is None:
                return None
            node = child
        return node

    def metadata(self) -> dict:
        """The group's Zarr v3 ``zarr.json``."""
        return {"zarr_format": 3, "node_type": "group", "attributes": self.attributes}

    def walk(self, prefix: str = "") -> Iterator[tuple[str, Group | Array]]:
        """(path, node) for this group and everything below it, parents first."""
        yield prefix, self
        for name, child in self.children.items():
            path = f"{prefix}/{name}" if prefix else name
            if isinstance(child, Group):
                yield from child.walk(path)
            else:
                yield path, child

    def arrays(self) -> Iterator[tuple[str, Array]]:
        """(path, array) of every array below this group."""
        for path, node in self.walk():
            if isinstance(node, Array):
                yield path, node


# --------------------------------------------------------------------------- helpers formats share

_ZARR_DTYPES = frozenset(np.dtype(code) for code in (
    "bool", "i1", "u1", "<i2", "<u2", "<i4", "<u4", "<i8", "<u8", "<f2", "<f4", "<f8", "<c8", "<c16"))


def check_dtype(dtype: np.dtype, what: str) -> np.dtype:
    """``dtype`` in little-endian order; UnsupportedError when the model has no data type for it."""
    little = dtype.newbyteorder("<") if dtype.byteorder == ">" else dtype
    if little not in _ZARR_DTYPES:
        raise UnsupportedError(f"arrayio: {what} has dtype {dtype}, which the array model (Zarr v3) has no "
                               "data type for")
    return little


def rows_per_chunk(row_bytes: int, limit: int | None = None) -> int:
    """Rows of ``row_bytes`` bytes that fit in a chunk of ``limit`` bytes (MAX_CHUNK_BYTES by default); at least one."""
    return max(1, (MAX_CHUNK_BYTES if limit is None else limit) // max(1, row_bytes))


def jsonable(value: Any) -> Any:
    """A metadata value as JSON: bytes become {"base64": ...}, complex [real, imag], numpy scalars Python."""
    if isinstance(value, dict):
        return {str(key): jsonable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(item) for item in value]
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"base64": base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, complex):
        return [value.real, value.imag]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


def tree_of(reader: Any) -> Group:
    """The tree of an open arrayio reader, as its format's spec describes it; a FormatError that a chunk read
    raises names the reader's file."""
    from ._registry import spec_for

    return naming_tree(spec_for(reader.format).tree(reader), getattr(reader, "file_name", None))


# What reads the file's bytes; ``release`` only drops pages.
_READS = ("read", "reference", "stored", "read_rows")


def naming_tree(group: Group, file: str | None) -> Group:
    """``group`` whose arrays' reads name ``file`` in the FormatErrors they raise; made as each node is asked
    for, so a lazy tree stays lazy."""
    return group if not file else replace(group, children=_NamingChildren(group.children, file))


class _NamingChildren(Mapping[str, "Group | Array"]):
    def __init__(self, children: Mapping[str, Group | Array], file: str) -> None:
        self._children = children
        self._file = file

    def __getitem__(self, name: str) -> Group | Array:
        node = self._children[name]
        if isinstance(node, Group):
            return naming_tree(node, self._file)
        reads: dict[str, Any] = {part: _named_read(call, self._file) for part in _READS
                                 if (call := getattr(node, part)) is not None}
        return replace(node, **reads)

    def __iter__(self) -> Iterator[str]:
        return iter(self._children)

    def __len__(self) -> int:
        return len(self._children)


def _named_read(read: Callable[..., Any], file: str) -> Callable[..., Any]:
    def named(*args: Any) -> Any:
        with naming_file(file):
            return read(*args)
    return named
