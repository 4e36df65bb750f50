"""The key -> 1-D array model that kastore and the KAST layout share.

Both formats store str keys -> 1-D arrays of the same ten dtypes; only their
bytes differ. This module holds everything above the byte layout: the dtype
table, the ``Store`` mapping, preparing a mapping for writing, decoding and
checking keys, vectorised packing checks, loading from a path / fd / file
object / pipe, and the rows the CLI prints. A format module supplies a
:class:`KeyedFormat` (its parser and its stream reader) and keeps its bytes.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import os
import stat
from collections import namedtuple
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, NamedTuple, overload

import numpy as np

from ._binary import Source, Writer, is_path
from ._edge import open_output, remote_source
from ._readers import ReaderBase, names_its_file, problems_of
from ._text import value_lines
from .errors import (
    ClosedError,
    ErrorKinds,
    FormatError,
    Problem,
    UnsupportedError,
    current_origin,
    naming_file,
    offsets_from,
)

__all__ = [
    "DTYPES", "ITEMSIZES", "ValueInfo", "UnsupportedDtypeError", "KeyDecodeError",
    "PY_ENGINE", "C_ENGINE", "ENGINES", "check_engine", "KeyedIndex", "KeyedFormat", "Prepared", "Store",
    "dtype_code", "prepare", "decode_keys", "running_starts", "first_failure", "aligned",
    "read_fixed", "load_store", "load_buffer", "entry_rows", "write_sample",
    "padding_problems", "sample_data", "KeyedHooks", "keyed_hooks", "map_store",
]

# Type code -> little-endian dtype; the code is the index (kastore's codes 0-9).
DTYPES = tuple(np.dtype(code) for code in ("i1", "u1", "<i2", "<u2", "<i4", "<u4", "<i8", "<u8", "<f4", "<f8"))
ITEMSIZES = np.array([dtype.itemsize for dtype in DTYPES], dtype=np.uint64)
_CODE_OF = {(dtype.kind, dtype.itemsize): code for code, dtype in enumerate(DTYPES)}



class ValueInfo(namedtuple("ValueInfo", ["dtype", "shape", "size"])):
    """dtype (its name, as kastore gives it), shape and size in bytes of one stored array."""

    __slots__ = ()

    def __str__(self) -> str:
        return f"dtype={self.dtype} shape={self.shape}, size={self.size}"


class UnsupportedDtypeError(UnsupportedError, KeyError):
    """An array of a dtype the format cannot store; a KeyError too, as kastore raises for it."""

    __str__ = Exception.__str__  # KeyError would quote the message


class KeyDecodeError(FormatError, UnicodeDecodeError):
    """A stored key that does not decode; a UnicodeDecodeError too, as kastore raises for it."""

    def __init__(self, message: str | None = None, *, cause: UnicodeDecodeError | None = None,
                 **parts: Any) -> None:
        FormatError.__init__(self, message, **parts)
        if cause is not None:
            self.encoding, self.object, self.start, self.end, self.reason = (
                cause.encoding, cause.object, cause.start, cause.end, cause.reason)

    __str__ = Exception.__str__


PY_ENGINE = "python"
C_ENGINE = "c"
ENGINES = (PY_ENGINE, C_ENGINE)


def check_engine(engine: Any) -> None:
    """Raise ValueError for an engine kastore does not know (both known engines run this code)."""
    if engine not in ENGINES:
        raise ValueError("unknown engine")

_frombuffer = np.frombuffer


def dtype_code(dtype: np.dtype) -> int | None:
    """The type code of ``dtype`` (either byte order), or None when unsupported."""
    return _CODE_OF.get((dtype.kind, dtype.itemsize))


@dataclass
class KeyedIndex:
    """What a format's parser found: keys in file order and where each array lies."""

    header: Any
    keys: list[str]
    types: list[int]
    starts: list[int]
    lengths: list[int]
    size: int


@dataclass(frozen=True)
class KeyedFormat:
    """A byte layout of the key -> array model.

    ``parse(source, key_encoding)`` checks the whole index and returns a
    KeyedIndex; ``read_store(stream)`` reads exactly one store's bytes from a
    stream (``no_store``, a FormatError that is an EOFError, at a clean end),
    for pipes and read_all. ``canonical_problems(store)`` lists what loads but
    is not canonical; ``header_facts`` names header fields ``info()`` shows;
    ``entries_sorted`` lists keys sorted (as ``kastore ls``) instead of in file order.
    """

    name: str
    errors: ErrorKinds
    closed_error: type[ClosedError]
    no_store: type[FormatError]
    header_size: int
    parse: Callable[[Source, str], KeyedIndex]
    read_store: Callable[[Any], memoryview]
    canonical_problems: Callable[["Store"], list[Problem]]
    header_facts: tuple[str, ...] = ()
    entries_sorted: bool = False

    def empty(self) -> FormatError:
        """The error for data that ends where a store should begin (also an EOFError)."""
        return self.no_store(
            f"{self.name}: header at byte {current_origin()}: expected a {self.header_size}-byte header, "
            "the data is empty (no store)",
            format=self.name, field="header", offset=0, expected=f"{self.header_size} bytes", found="0 bytes")


@dataclass
class Prepared:
    """A mapping checked for writing, as columns sorted by encoded key bytes."""

    keys: list[bytes]
    codes: np.ndarray
    lengths: np.ndarray
    arrays: list[np.ndarray]

    def __len__(self) -> int:
        return len(self.keys)

    @property
    def nbytes(self) -> np.ndarray:
        """Byte size of each array (uint64)."""
        return self.lengths * ITEMSIZES[self.codes]


@names_its_file(lambda store: store._source.name, naming_itself=("__getitem__",))
class Store(ReaderBase, Mapping):
    """A read-only mapping of key -> 1-D numpy array, in file order.

    Arrays are read-only numpy views of the mapped file (or of the in-memory
    buffer), made on first access. Use as a context manager or call
    ``close()``; every access after close raises the format's StoreClosedError
    (an ``arrayio.ClosedError``), arrays already handed out stay valid.
    """

    def __init__(self, source: Source, layout: KeyedFormat, key_encoding: str = "utf-8") -> None:
        self._source = source
        self._layout = layout
        self._origin = current_origin()
        try:
            index = layout.parse(source, key_encoding)
        except BaseException:
            source.close()
            raise
        self.header = index.header
        self.file_size = index.size
        self._keys = index.keys
        # key -> (dtype, element count, byte offset): everything a lookup needs, built once.
        self._locations = dict(zip(index.keys, zip([DTYPES[code] for code in index.types], index.lengths,
                                                   index.starts)))
        self._arrays: dict[str, np.ndarray] = {}
        self._buffer = source.buffer

    @property
    def format(self) -> str:  # type: ignore[override]
        """The registry name of the byte layout ("kastore", "kast")."""
        return self._layout.name

    @property
    def closed_error(self) -> type[ClosedError]:  # type: ignore[override]
        """The format's StoreClosedError."""
        return self._layout.closed_error

    def _release(self) -> None:
        self._source.close()

    def __getitem__(self, key: str) -> np.ndarray:
        array = self._arrays.get(key)
        if array is None:
            dtype, count, offset = self._locations[key]
            buffer = self._buffer
            if buffer is None:  # a source read in ranges
                with naming_file(self._source.name):
                    array = self._source.array(offset, count, dtype, f"array {key!r}")
            else:
                # The parser checked every array range against the store, so no second check here.
                array = _frombuffer(buffer, dtype, count, offset)
            self._arrays[key] = array
        return array

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    def __contains__(self, key: object) -> bool:
        return key in self._locations

    @overload
    def info(self) -> dict[str, Any]: ...

    @overload
    def info(self, key: str) -> ValueInfo: ...

    def info(self, key: str | None = None) -> dict[str, Any] | ValueInfo:
        """Without ``key``: facts about the store (the Reader protocol). With ``key``: dtype, shape
        and size in bytes of ``key``'s array, without touching its data (kastore's ``Store.info``)."""
        if key is not None:
            dtype, count, _offset = self._locations[key]
            return ValueInfo(dtype.name, (count,), count * dtype.itemsize)
        rows = entry_rows(self)
        total = sum(row["nbytes"] for row in rows)
        size = self._source.size
        return {
            "format": self.format,
            "version": f"{self.header.version_major}.{self.header.version_minor}",
            "file_size": size,
            "summary": f"{len(rows)} keys, {total} bytes of array data",
            "num_keys": len(rows),
            **{field: int(getattr(self.header, field)) for field in self._layout.header_facts},
            "store_size": self.file_size,
            "trailing_bytes": size - self.file_size,
            "items": rows,
        }

    def entries(self) -> list[dict[str, Any]]:
        """Rows for ``arrayio ls``: key, dtype, shape, size in bytes."""
        rows = entry_rows(self)
        return sorted(rows, key=lambda row: row["name"]) if self._layout.entries_sorted else rows

    def validate(self) -> list[Problem]:
        """What loads but is not canonical, then the problems of any stores concatenated after this one."""
        with offsets_from(self._origin):
            return self._layout.canonical_problems(self) + _trailing_problems(self)

    def cat(self, key: str, numbers: bool = False) -> Iterator[str]:
        """The values of ``key``, one per line (as ``kastore dump`` prints them), text bytes as text unless
        ``numbers``; KeyError when absent."""
        yield from value_lines(self[key], numbers)

    def extent(self, key: str) -> tuple[int, int]:
        """Byte offset (from the store's start) and byte length of ``key``'s array."""
        dtype, count, offset = self._locations[key]
        return offset, count * dtype.itemsize

    @property
    def layout_name(self) -> str:
        """The name of the byte layout behind this store ("kastore", "kast")."""
        return self._layout.name

    @property
    def source(self) -> Source:
        """The bounds-checked bytes behind the store (for validators)."""
        return self._source

    def __repr__(self) -> str:
        if self.closed:
            return f"<{self.closed_as[1]}.Store closed>"
        return f"<{self._layout.name}.Store {len(self._keys)} keys, {self.file_size} bytes>"


def _trailing_problems(store: Store) -> list[Problem]:
    """Bytes after the store must be further complete stores (concatenated, as streams write them)."""
    source, layout = store.source, store._layout
    problems: list[Problem] = []
    end, index = store.file_size, 0
    while end < source.size:
        index += 1
        where = f"store {index} (concatenated after store {index - 1}, from byte {current_origin() + end} on)"
        try:
            with offsets_from(current_origin() + end):
                data = source.view(end, source.size - end, f"store {index}")
                with Store(Source(data, layout.errors), layout) as following:
                    problems += [problem.within(where) for problem in layout.canonical_problems(following)]
                    end += following.file_size
        except FormatError as error:
            return problems + [Problem.from_error(error, where)]
    return problems


# --------------------------------------------------------------------------- checks used by the parsers

def running_starts(lengths: np.ndarray, start: int) -> np.ndarray:
    """Start offsets of items packed back to back from ``start`` (an exclusive cumulative sum)."""
    starts = np.empty(lengths.size, dtype=np.uint64)
    if lengths.size:
        starts[0] = start
        np.cumsum(lengths[:-1], dtype=np.uint64, out=starts[1:])
        starts[1:] += np.uint64(start)
    return starts


def aligned(offsets: np.ndarray, alignment: int) -> np.ndarray:
    """``offsets`` rounded up to multiples of ``alignment`` (uint64, no Python loop)."""
    step = np.uint64(alignment)
    return (offsets + (step - np.uint64(1))) // step * step


def first_failure(checks: list[tuple[np.ndarray, Callable[[int], Exception]]]) -> Exception | None:
    """The error for the lowest item index failing any vectorised check (ties: list order)."""
    best_index, best = None, None
    for bad, describe in checks:
        hits = np.flatnonzero(bad)
        if hits.size and (best_index is None or hits[0] < best_index):
            best_index, best = int(hits[0]), describe
    if best is None:
        return None
    assert best_index is not None  # set together with best
    return best(best_index)


def decode_keys(area: bytes, lengths: list[int], area_offset: int, key_encoding: str, errors: ErrorKinds,
                separator: int = 0, decode_error: type[KeyDecodeError] = KeyDecodeError) -> list[str]:
    """Decode keys packed in ``area`` (each followed by ``separator`` extra bytes); unique, decodable.

    The common case runs as two comprehensions; only a failure walks the keys
    one by one, to name the first bad item and its byte offset.
    """
    starts = list(itertools.accumulate((length + separator for length in lengths), initial=0))
    try:
        keys = [area[start:start + length].decode(key_encoding) for start, length in zip(starts, lengths)]
    except UnicodeDecodeError:
        keys = None
    if keys is not None and len(set(keys)) == len(keys):
        return keys
    seen: dict[str, int] = {}
    for index, (start, length) in enumerate(zip(starts, lengths)):
        raw = area[start:start + length]
        try:
            key = raw.decode(key_encoding)
        except UnicodeDecodeError as error:
            raise decode_error(format=errors.format, field=f"item {index} key",
                               offset=area_offset + start + error.start, expected=f"a {key_encoding} key",
                               found=raw, cause=error) from None
        if key in seen:
            raise errors.invalid(f"item {index} key", area_offset + start, "unique keys",
                                 f"{key!r}, already the key of item {seen[key]}")
        seen[key] = index
    return list(seen)


# --------------------------------------------------------------------------- loading from anything

def _regular_file_fd(file: Any) -> int | None:
    """The fd behind ``file`` when its bytes are a regular file's own bytes, so mapping it is right.

    Only raw fds and the io module's own file objects qualify: gzip, bz2, lzma
    and similar wrappers also have ``fileno()``, but it names the compressed file.
    """
    try:
        if isinstance(file, int):
            fd = file
        elif isinstance(file, io.FileIO) or (isinstance(file, (io.BufferedReader, io.BufferedRandom))
                                            and isinstance(file.raw, io.FileIO)):
            fd = file.fileno()
        else:
            return None
        return fd if stat.S_ISREG(os.fstat(fd).st_mode) else None
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return None


def _position(stream: Any) -> int:
    """The stream's position, for error offsets (0 where it has none)."""
    try:
        return stream.tell() if stream.seekable() else 0
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return 0


def read_fixed(stream: Any, layout: KeyedFormat, what: str) -> bytes:
    """The header of the next store; the layout's no-store error (an EOFError) at a clean end of stream."""
    size, errors = layout.header_size, layout.errors
    head = bytearray()
    while len(head) < size:
        chunk = stream.read(size - len(head))
        if not chunk:
            break
        head += chunk
    if not head:
        raise layout.empty()
    if len(head) < size:
        raise errors.truncated_at(what, 0, size, len(head))
    return bytes(head)


def _from_stream(layout: KeyedFormat, stream: Any, key_encoding: str) -> Store:
    name = getattr(stream, "name", None)
    name = name if isinstance(name, str) else "<stream>"
    with offsets_from(_position(stream)):
        return Store(Source(layout.read_store(stream), layout.errors, name=name), layout, key_encoding)


def _mapped_at_position(layout: KeyedFormat, fd: int, start: int, key_encoding: str) -> Store:
    with offsets_from(start):
        return Store(Source.from_fd(fd, layout.errors, start=start), layout, key_encoding)


def load_store(layout: KeyedFormat, file: Any, read_all: bool, key_encoding: str,
               storage_options: dict | None = None) -> Store:
    """Load one store from a path, fd or binary file object, as zero-copy as the source allows.

    Regular files are mapped from the current position unless ``read_all``;
    everything else (pipes, sockets, BytesIO, read_all) reads exactly one
    store's bytes. A file position is left at the end of the store, so
    successive calls walk through concatenated stores. URLs and fsspec files
    are read in ranges: the index at open, each array when looked up.
    """
    remote = remote_source(file, layout.errors, storage_options)
    if remote is not None:
        return Store(remote, layout, key_encoding)
    # A store read from a stream fails before it has a Source to be named by.
    name = os.fsdecode(file) if is_path(file) else getattr(file, "name", None)
    with naming_file(name if isinstance(name, str) else None):
        return _load_local_store(layout, file, read_all, key_encoding)


def _load_local_store(layout: KeyedFormat, file: Any, read_all: bool, key_encoding: str) -> Store:
    if is_path(file):
        path = os.fsdecode(file)
        with io.open(path, "rb") as handle:
            if read_all or _regular_file_fd(handle) is None:  # FIFOs and devices are streams
                return _from_stream(layout, handle, key_encoding)
            return Store(Source.from_fd(handle.fileno(), layout.errors, name=path), layout, key_encoding)
    if isinstance(file, bool) or not (isinstance(file, int) or hasattr(file, "read")):
        raise TypeError(f"{layout.name}: expected a path, file descriptor or binary file object, "
                        f"got {type(file).__name__}")
    if isinstance(file, int):
        if file < 0:
            raise ValueError(f"{layout.name}: invalid file descriptor {file}")
        if not read_all and _regular_file_fd(file) is not None:
            start = os.lseek(file, 0, os.SEEK_CUR)
            store = _mapped_at_position(layout, file, start, key_encoding)
            os.lseek(file, start + store.file_size, os.SEEK_SET)
            return store
        with os.fdopen(file, "rb", buffering=0, closefd=False) as stream:
            return _from_stream(layout, stream, key_encoding)
    fd = _regular_file_fd(file)
    if fd is not None and not read_all and hasattr(file, "seek"):
        if hasattr(file, "flush"):
            file.flush()
        start = file.tell()
        store = _mapped_at_position(layout, fd, start, key_encoding)
        file.seek(start + store.file_size)
        return store
    return _from_stream(layout, file, key_encoding)


def keyed_loaders(layout: KeyedFormat, default_key_encoding: str) -> tuple[Callable[..., Store],
                                                                          Callable[..., Store]]:
    """``load`` and ``loads`` of a keyed layout (kastore's arguments; both engines read the same way)."""

    def load(file: Any, read_all: bool = False, key_encoding: str = default_key_encoding,
             engine: str = PY_ENGINE, storage_options: dict | None = None) -> Store:
        """Load a store from a path (zero-copy map), fd, binary file object, URL or fsspec file.

        ``engine`` is kastore's argument (both engines read the same way here); a URL is read in
        ranges (the index at open, each array when looked up), with ``storage_options`` passed to fsspec.
        """
        check_engine(engine)
        return load_store(layout, file, read_all, key_encoding, storage_options)

    def loads(encoded_data: Any, key_encoding: str = default_key_encoding) -> Store:
        """Load the first store in a bytes-like buffer; arrays are views of the buffer."""
        return load_buffer(layout, encoded_data, key_encoding)

    return load, loads


def load_buffer(layout: KeyedFormat, buffer: Any, key_encoding: str) -> Store:
    """The first store in a bytes-like buffer; arrays are views of the caller's buffer."""
    return Store(Source(memoryview(buffer), layout.errors), layout, key_encoding)


# --------------------------------------------------------------------------- writing

def prepare(data: Any, key_encoding: str, format_name: str) -> Prepared:
    """Check and encode a mapping for writing: sorted by encoded key bytes, unique, non-empty,
    1-D arrays of the ten supported dtypes (kept as given: no copy)."""
    if not isinstance(data, Mapping):
        raise TypeError(f"{format_name}: data must be a mapping of str -> 1-D array, not {type(data).__name__}")
    keys: list[bytes] = []
    codes: list[int] = []
    arrays: list[np.ndarray] = []
    ndarray = np.ndarray
    for key, value in data.items():
        if not isinstance(key, str):
            raise TypeError(f"{format_name}: keys must be str, got {type(key).__name__} {key!r}")
        encoded = key.encode(key_encoding)
        if not encoded:
            raise ValueError(f"{format_name}: empty keys are not allowed")
        if type(value) is ndarray:
            array = value
        else:
            try:
                array = np.asarray(value)
            except (ValueError, TypeError) as error:
                raise ValueError(f"{format_name}: key {key!r}: cannot make an array of "
                                 f"{type(value).__name__}: {error}") from None
        if array.ndim != 1:
            raise ValueError(f"{format_name}: key {key!r}: arrays must be 1-D, got shape {array.shape}")
        dtype = array.dtype
        code = _CODE_OF.get((dtype.kind, dtype.itemsize))
        if code is None:
            raise UnsupportedDtypeError(f"{format_name}: key {key!r}: unsupported dtype {array.dtype}; supported are "
                                   "int8/16/32/64, uint8/16/32/64, float32 and float64")
        keys.append(encoded)
        codes.append(code)
        arrays.append(array)
    order = sorted(range(len(keys)), key=keys.__getitem__)
    keys = [keys[index] for index in order]
    arrays = [arrays[index] for index in order]
    for left, right in zip(keys, keys[1:]):
        if left == right:
            raise ValueError(f"{format_name}: duplicate key {left.decode(key_encoding)!r} "
                             f"after {key_encoding} encoding")
    return Prepared(keys, np.array(codes, dtype=np.uint8)[order],
                    np.fromiter((array.size for array in arrays), dtype=np.uint64, count=len(arrays)), arrays)


# --------------------------------------------------------------------------- what the CLI shows

Layout = tuple[bytes, np.ndarray, bytes]


def keyed_writers(format_name: str, plan: Callable[[Prepared], Layout], alignment: int,
                  default_key_encoding: str) -> tuple[Callable[..., None], Callable[..., bytes]]:
    """``dump`` and ``dumps`` of a keyed layout whose ``plan`` gives the header, table and keys area bytes.

    The plan is made (and every key checked against what the layout can hold)
    before the output is opened; the arrays follow the keys area, each at the
    next multiple of ``alignment``.
    """

    def write(stream: Any, prepared: Prepared, layout: Layout) -> None:
        header, table, keys_area = layout
        writer = Writer(stream)
        writer.write(header)
        writer.write(table)
        writer.write(keys_area)
        writer.write_aligned_arrays(prepared.arrays, alignment)

    def dump(data: Mapping, file: Any, key_encoding: str = default_key_encoding, engine: str = PY_ENGINE, *,
             storage_options: dict | None = None) -> None:
        """Write ``data`` (str -> 1-D array) to a path (atomically), URL, fd or binary file object.

        An existing file is replaced, as ``kastore.dump`` does (``arrayio convert`` asks for ``--force``
        instead); ``storage_options`` apply to URLs.
        """
        check_engine(engine)
        prepared = prepare(data, key_encoding, format_name)
        layout = plan(prepared)
        with open_output(file, storage_options) as stream:
            write(stream, prepared, layout)

    def dumps(data: Mapping, key_encoding: str = default_key_encoding) -> bytes:
        """The bytes of the store of ``data`` (str -> 1-D array)."""
        prepared = prepare(data, key_encoding, format_name)
        layout = plan(prepared)
        stream = io.BytesIO()
        write(stream, prepared, layout)
        return stream.getvalue()

    return dump, dumps


def entry_rows(store: Store) -> list[dict]:
    """Rows (name, dtype, shape, nbytes) for the keys of an open store."""
    rows = []
    for key in store:
        value = store.info(key)
        rows.append({"name": key, "dtype": value.dtype, "shape": list(value.shape),
                     "nbytes": value.size})
    return rows




def padding_problems(store: Store, keys_end: int) -> list[Problem]:
    """Non-zero bytes in the alignment gaps before each array (keys_end: where the first gap starts)."""
    problems = []
    source = store.source
    previous_end = keys_end
    for index, key in enumerate(store):
        start, length = store.extent(key)
        if any(bytes(source.view(previous_end, start - previous_end, f"padding before item {index}'s array"))):
            problems.append(store._layout.errors.problem(f"padding before item {index}'s array", previous_end,
                                                         "zero bytes"))
        previous_end = start + length
    return problems


def map_store(found: Any, layout: KeyedFormat, header_record: Any, table_record: Any, fields: TableFields,
              labels: tuple[str, str, str, str]) -> None:
    """Place a store's parts on a byte map (``found``, a ``bytemap.Collector``): header, table, keys,
    arrays with their padding, trailing bytes. ``labels`` are the table, keys, trailing and table
    entry labels (``{count}`` is filled in); a store the parser rejects gets :func:`map_as_written`'s
    best effort, then the error goes on to the collector, which marks where parsing stopped."""
    source = found.source
    entry_size = table_record.size
    try:
        index = layout.parse(source, "utf-8")
    except EOFError:  # an empty file: nothing to place
        return
    except FormatError:
        with contextlib.suppress(FormatError):
            map_as_written(found, header_record, table_record, layout.header_size, fields, labels[3])
        raise
    count = len(index.keys)
    table_end = layout.header_size + entry_size * count
    keys_end = table_end + sum(len(key.encode("utf-8")) + fields.key_terminator for key in index.keys)
    table_label, keys_label, trailing_label = (label.format(count=count) for label in labels[:3])
    found.add(0, layout.header_size, "header", "header")
    found.add(layout.header_size, entry_size * count, "table", table_label)
    found.add(table_end, keys_end - table_end, "keys", keys_label)
    found.packed(keys_end, ((start, length * DTYPES[code].itemsize, key) for key, code, start, length
                            in zip(index.keys, index.types, index.starts, index.lengths)), "array")
    found.add(index.size, source.size - index.size, "trailing", trailing_label)


@dataclass(frozen=True)
class TableFields:
    """Where a keyed layout's table says each key and array lie: field names of its header and entry records."""

    count: str
    key_start: str
    key_length: str
    code: str
    array_start: str
    array_length: str
    key_terminator: int = 0


def map_as_written(found: Any, header_record: Any, table_record: Any, table_offset: int, fields: TableFields,
                   label: str) -> None:
    """Best effort for a store the reader rejects: the header, and whatever table entries, keys and arrays
    lie inside the file (``label`` names the entries)."""
    source = found.source
    header = header_record.read(source, 0)
    found.add(0, header_record.size, "header", "header")
    declared = int(getattr(header, fields.count))
    count = min(declared, max(0, source.size - table_offset) // table_record.size)
    entries = table_record.read_array(source, table_offset, count)
    found.add(table_offset, table_record.size * count, "table", f"{count} of {declared} {label}")
    for position in range(count):
        entry = entries[position]
        key_start, key_bytes = int(entry[fields.key_start]), int(entry[fields.key_length]) + fields.key_terminator
        if key_start + key_bytes <= source.size:
            found.add(key_start, key_bytes, "keys", f"key {position}")
        code, array_start = int(entry[fields.code]), int(entry[fields.array_start])
        if code < len(DTYPES):
            array_bytes = int(entry[fields.array_length]) * DTYPES[code].itemsize
            if array_start + array_bytes <= source.size:
                found.add(array_start, array_bytes, "array", f"array {position}")


class KeyedHooks(NamedTuple):
    """The registry hooks of a key -> array format (kastore and kast share them: only load and dump differ)."""

    open: Callable[..., Store]
    validate: Callable[[Any], list[Problem]]
    demo: Callable[[Any], Any]
    save: Callable[[Any, Any, dict], None]


def keyed_hooks(load: Callable[..., Store], loads: Callable[[Any], Store], dump: Callable[[Any, Any], None],
                demo_name: str) -> KeyedHooks:
    """open/validate/info/entries/cat/demo of the format whose ``load``, ``loads`` and ``dump`` are given."""

    def open(path: Any, storage_options: dict | None = None) -> Store:  # noqa: A001 - the registry protocol name
        """Open the file: a zero-copy map of a path, ranged reads of a URL (``storage_options`` go to fsspec),
        or the store in a bytes-like object (``load`` takes ``bytes`` as a path, as the reference does)."""
        if isinstance(path, (bytearray, memoryview)) or (isinstance(path, bytes) and b"\0" in path):
            return loads(path)
        return load(path, storage_options=storage_options)

    def validate(path: Any) -> list[Problem]:
        """Every problem: load errors, unsorted keys, non-zero reserved/padding bytes, bad trailing bytes."""
        return problems_of(open, path)

    def demo(folder: Any) -> Any:
        """Write a sample store of all ten dtypes, load it back and check every array."""
        return write_sample(dump, load, Path(folder) / demo_name)

    def save(values: Any, path: Any, attributes: dict) -> None:
        """Write a mapping of key -> 1-D array of the array model (``arrayio convert``)."""
        dump(values, path)

    return KeyedHooks(open, validate, demo, save)


def write_sample(dump: Callable[[Any, Any], None], load: Callable[[Any], Store], path: Any) -> Any:
    """Write the sample mapping with ``dump``, read it back with ``load`` and check every array."""
    data = sample_data()
    dump(data, path)
    with load(path) as store:
        if set(store) != set(data) or not all(np.array_equal(store[key], data[key]) for key in data):
            raise FormatError(f"{store.layout_name} demo: the store read back differs from what was written")
    return path


def sample_data() -> dict[str, np.ndarray]:
    """A small mapping covering all ten dtypes, for the demos."""
    data = {str(dtype.newbyteorder("=")): np.arange(5, dtype=dtype) for dtype in DTYPES}
    data["float64/linspace"] = np.linspace(0.0, 1.0, 11)
    return data
