"""Reading tszip files: the zip directory, the Zarr v2 metadata of every column, and chunks on demand.

A reader is a read-only mapping of column path (``nodes/time``) -> 1-D array,
decoded when looked up: each chunk member is Blosc-decoded (its header's
sizes checked against the array's metadata before any memory is taken),
delta filters undone, and chunks zarr left out (all fill value) filled in.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._binary import Source
from .._edge import open_source
from .._readers import ReaderBase, names_its_file
from ..errors import FormatError, Problem, UnsupportedError
from ._errors import ERRORS, TszipClosedError
from ._records import FORMAT_NAME, FORMAT_VERSION
from ._zip import Directory, Member, member_bytes, read_directory

# An array may declare at most this many bytes per byte of the file (chunks of fill value are left out of
# a tszip file, and Blosc compresses constant runs about 250 times): a limit a caller can raise.
DEFAULT_EXPANSION = 1024
_BLOSC_HEADER = 16
_METADATA_NAMES = (".zarray", ".zattrs", ".zgroup")
_CODECS = ("blosc", "zlib")
# A member's local header, name and extra field take at most this much before its data (names are short
# column paths); members whose ranges lie closer than _GAP_BYTES are fetched in one request over a URL.
_LOCAL_SLACK = 512
_GAP_BYTES = 256 << 10


@dataclass(frozen=True)
class Column:
    """One Zarr v2 array of the file: shape, chunking, dtype, codecs and fill value (from its ``.zarray``)."""

    path: str
    length: int
    chunk: int
    dtype: np.dtype
    compressor: dict | None
    filters: tuple[dict, ...]
    fill_value: Any

    @property
    def nchunks(self) -> int:
        """Chunks along the one dimension."""
        return -(-self.length // self.chunk) if self.length else 0

    @property
    def nbytes(self) -> int:
        """Bytes of the decoded column."""
        return self.length * self.dtype.itemsize

    def describe(self) -> str:
        """The codec chain in words: ``delta > blosc zstd clevel 9 shuffle``."""
        parts = [str(item.get("id")) for item in self.filters]
        if self.compressor is not None:
            options = {key: value for key, value in self.compressor.items() if key not in ("id", "blocksize")}
            parts.append(" ".join([str(self.compressor.get("id"))] +
                                  [f"{key} {value}" if key != "cname" else str(value) for key, value in
                                   options.items()]))
        return " > ".join(parts) or "none"


def _json_member(source: Source, member: Member) -> Any:
    text = member_bytes(source, member)
    try:
        return json.loads(text)
    except ValueError as error:
        raise ERRORS.invalid(f"member {member.name!r}", member.local_offset, "JSON metadata", str(error)) from None


def _column(path: str, meta: Any, member: Member) -> Column:
    """Check a ``.zarray`` document and describe its column; anything else is a FormatError naming the field."""
    def bad(field: str, expected: str, found: Any) -> FormatError:
        return ERRORS.invalid(f"{member.name} {field}", member.local_offset, expected, found)

    if not isinstance(meta, dict) or meta.get("zarr_format") != 2:
        raise bad("zarr_format", "2", meta.get("zarr_format") if isinstance(meta, dict) else type(meta).__name__)
    shape, chunks = meta.get("shape"), meta.get("chunks")
    if not (isinstance(shape, list) and len(shape) == 1 and isinstance(shape[0], int) and shape[0] >= 0):
        raise bad("shape", "one non-negative length (a 1-D column)", shape)
    if not (isinstance(chunks, list) and len(chunks) == 1 and isinstance(chunks[0], int) and chunks[0] > 0):
        raise bad("chunks", "one positive chunk length", chunks)
    try:
        dtype = np.dtype(meta.get("dtype"))
    except (TypeError, ValueError):
        raise bad("dtype", "a numeric dtype", meta.get("dtype")) from None
    if dtype.kind not in "iufb" or dtype.hasobject:
        raise bad("dtype", "a numeric dtype", meta.get("dtype"))
    if meta.get("order", "C") != "C":
        raise bad("order", "C", meta.get("order"))
    compressor = meta.get("compressor")
    if compressor is not None and (not isinstance(compressor, dict) or compressor.get("id") not in _CODECS):
        raise UnsupportedError(f"tszip: column {path!r} uses compressor {compressor!r}; arrayio decodes "
                               f"{', '.join(_CODECS)} or none")
    filters = meta.get("filters") or []
    if not isinstance(filters, list) or any(not isinstance(item, dict) or item.get("id") != "delta"
                                            for item in filters):
        raise UnsupportedError(f"tszip: column {path!r} uses filters {filters!r}; arrayio undoes delta only")
    fill = meta.get("fill_value")
    return Column(path, shape[0], chunks[0], dtype, compressor, tuple(filters), 0 if fill is None else fill)


@names_its_file(lambda reader: reader._source.name)
class TszipFile(ReaderBase):
    """A tszip file: ``reader["nodes/time"]`` decodes one column; ``attributes`` are the root's."""

    format = FORMAT_NAME
    closed_error = TszipClosedError

    def __init__(self, source: Source, max_expansion: int = DEFAULT_EXPANSION) -> None:
        self._source = source
        try:
            self.directory: Directory = read_directory(source)
            self._members = self.directory.latest()
            wanted = [member for name, member in self._members.items() if name.endswith(_METADATA_NAMES)]
            source.prefetch([(member.local_offset, _LOCAL_SLACK + member.compressed_size) for member in wanted],
                            gap=_GAP_BYTES)
            if ".zattrs" not in self._members:
                raise ERRORS.invalid("member '.zattrs'", None, "the root attributes of a tszip file", "no such member")
            self.attributes = _json_member(source, self._members[".zattrs"])
            self._check_format()
            self.columns: dict[str, Column] = {}
            for name, member in self._members.items():
                if name == ".zarray" or name.endswith("/.zarray"):
                    path = name[:-len("/.zarray")] if "/" in name else ""
                    self.columns[path] = _column(path, _json_member(source, member), member)
        except BaseException:
            source.close()
            raise
        self.max_bytes = max(1 << 20, max_expansion * source.size)

    def _check_format(self) -> None:
        attributes = self.attributes
        member = self._members[".zattrs"]
        if not isinstance(attributes, dict) or attributes.get("format_name") != FORMAT_NAME:
            found = attributes.get("format_name") if isinstance(attributes, dict) else type(attributes).__name__
            raise ERRORS.invalid(".zattrs format_name", member.local_offset, FORMAT_NAME, found)
        version = attributes.get("format_version")
        if not (isinstance(version, list) and version and isinstance(version[0], int)):
            raise ERRORS.invalid(".zattrs format_version", member.local_offset, "[major, minor]", version)
        ERRORS.check_version(".zattrs format_version", member.local_offset, FORMAT_VERSION[0], version[0])

    def _release(self) -> None:
        self._source.close()

    @property
    def source(self) -> Source:
        """The bounds-checked bytes behind the file."""
        return self._source

    @property
    def version(self) -> str:
        """The tszip format version, ``major.minor``."""
        return ".".join(str(part) for part in self.attributes["format_version"])

    def __iter__(self) -> Iterator[str]:
        return iter(self.columns)

    def __len__(self) -> int:
        return len(self.columns)

    def __contains__(self, path: object) -> bool:
        return path in self.columns

    def chunk_member(self, path: str, index: int) -> Member | None:
        """The zip member of chunk ``index`` of column ``path`` (None: zarr left it out, all fill value)."""
        return self._members.get(f"{path}/{index}" if path else str(index))

    def stored_bytes(self, path: str) -> int:
        """Compressed bytes of the column's chunks in the file."""
        members = (self.chunk_member(path, index) for index in range(self.columns[path].nchunks))
        return sum(member.compressed_size for member in members if member is not None)

    def prefetch(self, paths: list[str]) -> None:
        """Over a URL, fetch the chunks of the columns ``paths`` (nearby ones in one request) before reading them."""
        members = (self.chunk_member(path, index) for path in paths for index in range(self.columns[path].nchunks))
        self._source.prefetch([(member.local_offset, _LOCAL_SLACK + member.compressed_size)
                               for member in members if member is not None], gap=_GAP_BYTES)

    def read_chunk(self, path: str, index: int, check_crc: bool = False) -> np.ndarray:
        """Chunk ``index`` of column ``path``, decoded (the last one cut to the column's length)."""
        column = self.columns[path]
        if not 0 <= index < column.nchunks:
            raise IndexError(f"tszip: column {path!r} has {column.nchunks} chunks, not {index}")
        count = min(column.chunk, column.length - index * column.chunk)
        member = self.chunk_member(path, index)
        if member is None:
            return np.full(count, column.fill_value, dtype=column.dtype)
        data = member_bytes(self._source, member, check_crc)
        values = np.frombuffer(_decode(column, member, data), dtype=column.dtype)
        for item in reversed(column.filters):
            values = np.cumsum(values, dtype=np.dtype(item.get("dtype", column.dtype.str)))
        return values[:count]

    def __getitem__(self, path: str) -> np.ndarray:
        column = self.columns[path]
        if column.nbytes > self.max_bytes:
            raise ERRORS.invalid(f"{path}/.zarray shape", None,
                                 f"at most {self.max_bytes} decoded bytes (max_expansion x the file size; raise "
                                 "max_expansion to read it)", f"{column.nbytes} bytes")
        out = np.empty(column.length, dtype=column.dtype)
        self.prefetch([path])
        for index in range(column.nchunks):
            start = index * column.chunk
            out[start:start + column.chunk] = self.read_chunk(path, index)
        out.flags.writeable = False
        return out

    def info(self) -> dict[str, Any]:
        """The root attributes (tszip's format version, sequence length, provenance) and one row per column."""
        rows = self.entries()
        stored = sum(row["stored_bytes"] for row in rows)
        decoded = sum(row["nbytes"] for row in rows)
        return {
            "format": FORMAT_NAME,
            "version": self.version,
            "file_size": self._source.size,
            "summary": f"{len(rows)} columns: {decoded} bytes of values in {stored} bytes of chunks",
            "attributes": self.attributes,
            "members": len(self.directory.members),
            "columns": rows,
        }

    def entries(self) -> list[dict[str, Any]]:
        """Rows for ``arrayio ls``: column path, dtype, length, chunks, codecs, decoded and stored bytes."""
        return [{"name": path, "dtype": column.dtype.name, "shape": [column.length], "chunks": column.nchunks,
                 "codecs": column.describe(), "nbytes": column.nbytes, "stored_bytes": self.stored_bytes(path)}
                for path, column in self.columns.items()]

    def validate(self) -> list[Problem]:
        """Every member's CRC-32, then every chunk of every column decoded."""
        problems = []
        latest = set(self._members.values())
        for member in self.directory.members:
            if member not in latest:
                continue
            try:
                member_bytes(self._source, member, check_crc=True)
            except FormatError as error:
                problems.append(Problem.from_error(error))
        for path, column in self.columns.items():
            for index in range(column.nchunks):
                try:
                    self.read_chunk(path, index)
                except (FormatError, UnsupportedError) as error:
                    problems.append(Problem.from_error(error))
        return problems


def _decode(column: Column, member: Member, data: bytes) -> bytes:
    """The chunk's raw bytes: its header's sizes are checked against the chunk's before decoding."""
    expected = column.chunk * column.dtype.itemsize
    compressor = column.compressor
    if compressor is None:
        decoded = data
    elif compressor["id"] == "blosc":
        import blosc

        if len(data) < _BLOSC_HEADER:
            raise ERRORS.truncated_at(f"Blosc header of {member.name!r}", member.local_offset, _BLOSC_HEADER,
                                      member.local_offset + len(data))
        nbytes = int.from_bytes(data[4:8], "little")
        cbytes = int.from_bytes(data[12:16], "little")
        if nbytes != expected or cbytes != len(data):
            raise ERRORS.invalid(f"Blosc header of {member.name!r}", member.local_offset,
                                 f"nbytes {expected} (a chunk of {column.chunk} x {column.dtype.itemsize} bytes), "
                                 f"cbytes {len(data)}", f"nbytes {nbytes}, cbytes {cbytes}")
        try:
            decoded = blosc.decompress(data)
        except Exception as error:  # noqa: BLE001 - python-blosc raises bare RuntimeError/ValueError
            raise ERRORS.invalid(f"chunk {member.name!r}", member.local_offset, "a Blosc chunk", str(error)) from None
    else:
        import zlib

        inflater = zlib.decompressobj()
        try:
            decoded = inflater.decompress(data, expected)
        except zlib.error as error:
            raise ERRORS.invalid(f"chunk {member.name!r}", member.local_offset, "a zlib stream", str(error)) from None
    if len(decoded) != expected:
        raise ERRORS.invalid(f"chunk {member.name!r}", member.local_offset, f"{expected} decoded bytes",
                             len(decoded))
    return decoded


def load(target: Any, storage_options: dict | None = None, max_expansion: int = DEFAULT_EXPANSION) -> TszipFile:
    """Open a tszip file from a path, bytes, a URL (read in ranges) or a file object."""
    return TszipFile(open_source(target, ERRORS, storage_options), max_expansion)


def chunk_count(length: int, chunk: int) -> int:
    """Chunks of ``chunk`` elements covering ``length`` (for writers)."""
    return math.ceil(length / chunk) if length else 0
