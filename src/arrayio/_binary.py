"""The shared binary layer: declared records, bounds-checked sources, an
aligned streaming writer and atomic writes (and the adler32/crc32 sums the
formats verify, zlib-ng's when it is installed).

Every format module builds on these four pieces instead of hand-writing
``struct`` offsets, bounds checks, padding loops or temp-file dances.
"""

from __future__ import annotations

import contextlib
import errno
import io
import mmap
import os
import stat
import struct
import tempfile
from collections import namedtuple
from pathlib import Path
from typing import IO, Any, BinaryIO, Callable, Generic, Iterable, Iterator, Sequence, TypeVar, Union, overload

import numpy as np

from ._interrupts import refuse_after_interrupt
from ._temporary import clear_leftovers, creation_mode, temp_prefix
from .errors import ErrorKinds, WriteError

try:  # zlib-ng's SIMD sums (optional, in the ``all`` extra): the same values, several times faster per byte
    from zlib_ng.zlib_ng import adler32, crc32
except ImportError:
    from zlib import adler32, crc32

__all__ = [
    "Record",
    "Source",
    "Writer",
    "atomic_write",
    "output_stream",
    "is_path",
    "fsync_dir",
    "write_at",
    "truncate_at",
    "fsync_file",
    "locked",
    "copy_range",
    "round_up",
    "read_exactly",
    "U64_MAX",
    "adler32",
    "crc32",
]

PathLike = Union[str, bytes, os.PathLike]
U64_MAX = 2**64 - 1

# Field codes of a Record: numpy-style little-endian scalars, "Ns" byte
# strings and "Nx" runs of reserved bytes (kept as bytes when named).
_SCALARS = {
    "u1": ("B", "u1"), "i1": ("b", "i1"),
    "<u2": ("H", "<u2"), "<i2": ("h", "<i2"),
    "<u4": ("I", "<u4"), "<i4": ("i", "<i4"),
    "<u8": ("Q", "<u8"), "<i8": ("q", "<i8"),
    "<f4": ("f", "<f4"), "<f8": ("d", "<f8"),
}


def round_up(value: int, alignment: int) -> int:
    """The smallest multiple of ``alignment`` that is >= ``value``."""
    return -(-value // alignment) * alignment


def is_path(target: Any) -> bool:
    """True for the things we treat as a file-system path (str, bytes, PathLike)."""
    return isinstance(target, (str, bytes, os.PathLike))


RecordTuple = TypeVar("RecordTuple", bound=tuple)


class Record(Generic[RecordTuple]):
    """A fixed-size little-endian record declared once as (field, type) pairs.

    From the declaration come ``pack``, ``unpack``/``read`` (a namedtuple of
    the named fields), ``read_array`` (a zero-copy numpy structured view of N
    consecutive records) and ``offset_of`` for error messages. ``tuple_type``
    (a ``typing.NamedTuple`` with the same field names) gives ``read`` a type
    that editors and mypy see; without it the namedtuple is made here.
    """

    @overload
    def __init__(self: Record[Any], name: str, fields: Sequence[tuple[str | None, str]],
                 size: int | None = None) -> None: ...

    @overload
    def __init__(self: Record[RecordTuple], name: str, fields: Sequence[tuple[str | None, str]],
                 size: int | None = None, *, tuple_type: type[RecordTuple]) -> None: ...

    def __init__(self, name: str, fields: Sequence[tuple[str | None, str]], size: int | None = None, *,
                 tuple_type: Any = None) -> None:
        self.name = name
        struct_codes = ["<"]
        names: list[str] = []
        formats: list[Any] = []
        offsets: list[int] = []
        self.offsets: dict[str, int] = {}
        self.widths: dict[str, int] = {}
        position = 0
        for field, code in fields:
            if code in _SCALARS:
                struct_code, dtype_code = _SCALARS[code]
                width = np.dtype(dtype_code).itemsize
            elif code.endswith(("s", "x")) and code[:-1].isdigit():
                width = int(code[:-1])
                named = field is not None
                struct_code = f"{width}s" if (code.endswith("s") or named) else f"{width}x"
                dtype_code = f"V{width}"
            else:
                raise ValueError(f"{name}: unknown field type {code!r}")
            if field is not None:
                self.offsets[field] = position
                self.widths[field] = width
                names.append(field)
                formats.append(dtype_code)
                offsets.append(position)
            struct_codes.append(struct_code)
            position += width
        if size is not None and size != position:
            raise ValueError(f"{name}: fields add up to {position} bytes, declared {size}")
        self.size = position
        self.fields = tuple(names)
        self._struct = struct.Struct("".join(struct_codes))
        if tuple_type is not None and tuple(tuple_type._fields) != tuple(names):
            raise ValueError(f"{name}: {tuple_type.__name__} has fields {tuple_type._fields}, declared {names}")
        self.tuple_type: Any = tuple_type or namedtuple(
            name.title().replace(" ", "").replace("-", ""), names)
        self.dtype = np.dtype({"names": names, "formats": formats, "offsets": offsets, "itemsize": position})
        self._field_dtypes = {field: np.dtype(dtype_code) for field, dtype_code in zip(names, formats)}
        # For hot loops over variable-length data: a plain tuple, no namedtuple, no bounds check
        # (struct.error past the end; the caller explains it).
        self.unpack_plain = self._struct.unpack_from

    def __repr__(self) -> str:
        return f"Record({self.name!r}, size={self.size})"

    def offset_of(self, field: str, base: int = 0, index: int = 0) -> int:
        """Absolute byte offset of ``field`` in record ``index`` of a table at ``base``."""
        return base + index * self.size + self.offsets[field]

    def pack(self, **values: Any) -> bytes:
        """Encode one record; fields not given are zero (or zero bytes)."""
        unknown = set(values) - set(self.fields)
        if unknown:
            raise TypeError(f"{self.name}: no fields {sorted(unknown)}")
        ordered = []
        for field in self.fields:
            value = values.get(field)
            if value is None:
                value = b"" if self._field_dtypes[field].kind == "V" else 0
            ordered.append(value)
        return self._struct.pack(*ordered)

    def field_unpacker(self, field: str) -> Any:
        """A fast ``unpack_from(buffer, offset)`` of one scalar field, taking the record's offset."""
        return struct.Struct("<" + self._field_dtypes[field].char).unpack_from

    def unpack(self, buffer: Any, offset: int = 0) -> RecordTuple:
        """Decode one record from ``buffer`` at ``offset`` (caller guarantees the length)."""
        return self.tuple_type._make(self._struct.unpack_from(buffer, offset))

    def read(self, source: "Source", offset: int) -> RecordTuple:
        """Decode one record from ``source`` at ``offset``, bounds-checked."""
        return self.unpack(source.view(offset, self.size, self.name))

    def read_array(self, source: "Source", offset: int, count: int, what: str | None = None) -> np.ndarray:
        """A read-only structured view of ``count`` records at ``offset``, bounds-checked."""
        what = what or f"{self.name} table ({count} entries)"
        return source.array(offset, count, self.dtype, what)

    def empty(self, count: int) -> np.ndarray:
        """A zeroed structured array of ``count`` records, to fill and write in one call."""
        return np.zeros(count, dtype=self.dtype)

    def nonzero_reserved(self, buffer: Any, offset: int = 0) -> list[str]:
        """Names of fields starting with ``reserved`` or ``padding`` that hold non-zero bytes."""
        record = self.unpack(buffer, offset)
        return [
            field
            for field in self.fields
            if field.startswith(("reserved", "padding")) and any(bytes(getattr(record, field)))
        ]


class Source:
    """A read-only, bounds-checked view over the bytes of a file or buffer.

    ``Source.open`` maps a local path (zero copy), wraps bytes-like data, or
    reads a seekable file object in ranges. Every access names what it reads,
    so a short file raises a TruncatedError that says which field ran out.
    """

    def __init__(self, data: Any, errors: ErrorKinds, *, name: str = "<buffer>", base: int = 0,
                 size: int | None = None, fileobj: IO[bytes] | None = None,
                 mapping: mmap.mmap | None = None) -> None:
        self.errors = errors
        self.name = name
        self._map = mapping if mapping is not None else (data if isinstance(data, mmap.mmap) else None)
        self._buffer = memoryview(data).cast("B")[base:].toreadonly() if data is not None else None
        self._file = fileobj
        self._base = base
        if size is None:
            size = len(self._buffer) if self._buffer is not None else 0
        self.size = size
        self.closed = False

    @classmethod
    def open(cls, target: Any, errors: ErrorKinds) -> "Source":
        """Map a str/PathLike path, wrap bytes-like data (bytes are data here, not a path), or read a
        seekable binary file object in ranges from its current position. URLs are the edge's
        business (``arrayio._edge.open_source``): here every string is a local path."""
        if isinstance(target, (bytes, bytearray, memoryview)):
            return cls(target, errors)
        if isinstance(target, (str, os.PathLike)):
            with open(target, "rb") as handle:
                return cls.from_fd(handle.fileno(), errors, name=os.fsdecode(target))
        if isinstance(target, np.ndarray):
            return cls(target.view(np.uint8).reshape(-1), errors)
        if hasattr(target, "read") and hasattr(target, "seek"):
            start = target.tell()
            end = target.seek(0, io.SEEK_END)
            target.seek(start)
            return cls(None, errors, name=getattr(target, "name", "<stream>"), base=start,
                       size=end - start, fileobj=target)
        raise TypeError(f"expected a path, bytes or a binary file object, got {type(target).__name__}")

    @classmethod
    def from_fd(cls, fd: int, errors: ErrorKinds, name: str = "<fd>", start: int = 0) -> "Source":
        """Map the file behind ``fd`` read-only; offsets count from byte ``start`` of the file.

        An empty file (or ``start`` at its end) becomes an empty buffer: mmap
        cannot map zero bytes.
        """
        length = os.fstat(fd).st_size
        if length <= start:
            return cls(b"", errors, name=name)
        mapping = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
        return cls(mapping, errors, name=name, base=start, mapping=mapping)

    def __enter__(self) -> "Source":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def buffer(self) -> memoryview | None:
        """The whole read-only buffer (None for ranged file objects); callers must have checked ranges."""
        return self._buffer

    @property
    def stats(self) -> Any:
        """Requests and bytes fetched (``requests``, ``bytes_fetched``) for remote sources; None for local ones."""
        return None

    def prefetch(self, ranges: Iterable[tuple[int, int]], gap: int = 0, *, together: bool = False) -> None:
        """Hint that the ``(offset, length)`` ranges are read next; remote sources fetch them together,
        ranges at most ``gap`` bytes apart in one request (``together``: all of them in one request where the
        server answers several ranges at once, for small ranges scattered over a big object)."""

    @property
    def is_mapped(self) -> bool:
        """True when views are zero-copy slices of a memory map."""
        return self._map is not None

    def close(self) -> None:
        """Release the map; views handed out keep their pages alive until dropped."""
        if self.closed:
            return
        self.closed = True
        self._buffer = None
        if self._map is not None:
            with contextlib.suppress(BufferError):
                self._map.close()
            self._map = None

    def check(self, offset: int, length: int, what: str) -> None:
        """Raise unless ``[offset, offset + length)`` lies inside the data (no overflow)."""
        if offset < 0 or length < 0 or offset > U64_MAX or length > U64_MAX:
            raise self.errors.invalid(what, offset, "an offset and length in 0..2**64-1",
                                      f"offset {offset}, length {length}")
        if offset + length > self.size:
            raise self.errors.truncated_at(what, offset, length, self.size)

    def view(self, offset: int, length: int, what: str) -> memoryview:
        """``length`` bytes at ``offset`` as a read-only memoryview (a copy for file objects)."""
        self.check(offset, length, what)
        if self._buffer is not None:
            return self._buffer[offset:offset + length]
        if self._file is None:
            raise ValueError("I/O operation on a closed source")
        self._file.seek(self._base + offset)
        data = self._file.read(length)
        if len(data) != length:
            raise self.errors.truncated_at(what, offset, length, offset + len(data))
        return memoryview(data)

    def views(self, ranges: Iterable[tuple[int, int]], what: str) -> list[memoryview]:
        """``view`` of each ``(offset, length)`` range, in order."""
        return [self.view(offset, length, what) for offset, length in ranges]

    def array(self, offset: int, count: int, dtype: Any, what: str) -> np.ndarray:
        """``count`` elements of ``dtype`` at ``offset``: a read-only numpy view, bounds-checked."""
        dtype = np.dtype(dtype)
        if count < 0 or count > U64_MAX:
            raise self.errors.invalid(what, offset, "an element count in 0..2**64-1", count)
        if self._buffer is None:
            data = self.view(offset, count * dtype.itemsize, what)
            return np.frombuffer(data, dtype=dtype, count=count)
        self.check(offset, count * dtype.itemsize, what)
        return np.frombuffer(self._buffer, dtype=dtype, count=count, offset=offset)


# -- the I/O seam ------------------------------------------------------------------------------
#
# Every write, fsync, truncate and rename a writer makes passes through ``_os_call``: the one place
# where an OS error becomes a WriteError naming the operation and the path, and the one place a
# test can make the N-th such call fail (``fault_hook``; tests/reliability/reliability_faults.py sets it).

fault_hook: Callable[[str, str], None] | None = None


def _os_call(operation: str, path: str, call: Callable[..., Any], *args: Any) -> Any:
    try:
        refuse_after_interrupt()
        if fault_hook is not None:
            fault_hook(operation, path)
        return call(*args)
    except WriteError:
        raise
    except OSError as error:
        raise _write_error_class(type(error))(operation, path, error) from error


_WRITE_ERROR_CLASSES: dict[type, type[WriteError]] = {}


def _write_error_class(kind: type) -> type[WriteError]:
    """WriteError, also of the OS error's own class (FileNotFoundError, IsADirectoryError ...)
    so that callers catching those still do."""
    if kind is OSError or issubclass(kind, WriteError):
        return WriteError
    if kind not in _WRITE_ERROR_CLASSES:
        _WRITE_ERROR_CLASSES[kind] = type(f"WriteError{kind.__name__}", (WriteError, kind),
                                          {"__module__": WriteError.__module__})
    return _WRITE_ERROR_CLASSES[kind]


def _describe_fd(fd: int) -> str:
    return f"<file descriptor {fd}>"


class GuardedFile(io.FileIO):
    """An unbuffered file whose writes and truncates go through the I/O seam, its errors naming ``path``."""

    def __init__(self, fd: int, path: str, closefd: bool = True) -> None:
        super().__init__(fd, "wb", closefd=closefd)
        self.target = path

    def write(self, data: Any) -> int:
        """Write through the seam; an OS error becomes a WriteError naming the path."""
        return _os_call("write", self.target, io.FileIO.write, self, data)

    def truncate(self, size: int | None = None) -> int:
        """Truncate through the seam."""
        return _os_call("truncate", self.target, io.FileIO.truncate, self, size)


def fsync_file(fd: int, path: str | None = None) -> None:
    """fsync ``fd``; a failure raises WriteError("fsync", path)."""
    _os_call("fsync", path or _describe_fd(fd), os.fsync, fd)


def truncate_at(fd: int, length: int, path: str | None = None) -> None:
    """Cut (or extend) the file behind ``fd`` to ``length`` bytes; a failure names the path."""
    _os_call("truncate", path or _describe_fd(fd), os.ftruncate, fd, length)


def _contiguous_bytes(array: np.ndarray) -> memoryview:
    return np.ascontiguousarray(array).data.cast("B")


class Writer:
    """Writes to a binary stream, tracking the position itself (pipes have none).

    Buffers go to the stream as memoryviews, never through an intermediate
    ``bytes``; ``pad_to`` aligns with zero bytes; ``reserve``/``patch`` let a
    format write a header placeholder and fill it in at the end (seekable
    streams only).
    """

    _ZEROS = bytes(4096)

    def __init__(self, stream: BinaryIO, position: int = 0) -> None:
        self.stream = stream
        self.position = position
        self._origin = None
        with contextlib.suppress(OSError, AttributeError, ValueError):
            if stream.seekable():
                self._origin = stream.tell() - position

    def write(self, data: Any) -> int:
        """Write a bytes-like object or numpy array (little-endian as given) without copying."""
        if isinstance(data, np.ndarray):
            view = _contiguous_bytes(data)
        else:
            view = memoryview(data).cast("B")
        remaining = view
        while remaining:
            written = self.stream.write(remaining)
            if written is None:
                # Raw streams return None when they would block; other file-likes
                # often return None after writing everything.
                if isinstance(self.stream, io.RawIOBase):
                    raise BlockingIOError("non-blocking streams are not supported")
                written = len(remaining)
            remaining = remaining[written:]
        self.position += len(view)
        return len(view)

    def write_array(self, array: np.ndarray, chunk_bytes: int = 1 << 24) -> int:
        """Write an array's elements little-endian; big-endian input is swapped in bounded chunks."""
        if array.dtype.byteorder != ">" or array.dtype.itemsize == 1:
            return self.write(array)
        little = array.dtype.newbyteorder("<")
        flat = array.reshape(-1)
        step = max(1, chunk_bytes // array.dtype.itemsize)
        total = 0
        for start in range(0, flat.size, step):
            total += self.write(flat[start:start + step].astype(little))
        return total

    def write_aligned_arrays(self, arrays: Iterable[np.ndarray], alignment: int,
                             small: int = 1 << 16, batch: int = 1 << 22) -> None:
        """Write arrays one after another, each little-endian at the next multiple of ``alignment``.

        Small arrays are joined into one write per ``batch`` bytes (one call
        instead of thousands); large ones go straight to the stream from the
        caller's memory.
        """
        paddings = [bytes(count) for count in range(alignment)]
        pieces: list[Any] = []
        staged = 0
        for array in arrays:
            padding = -(self.position + staged) % alignment
            if array.nbytes < small:
                if array.dtype.byteorder == ">":
                    array = array.astype(array.dtype.newbyteorder("<"))
                elif not array.flags.c_contiguous:
                    array = np.ascontiguousarray(array)
                pieces.append(paddings[padding])
                pieces.append(array)
                staged += padding + array.nbytes
                if staged >= batch:
                    self.write(b"".join(pieces))
                    pieces, staged = [], 0
            else:
                if pieces:
                    self.write(b"".join(pieces))
                    pieces, staged = [], 0
                self.zeros(padding)
                self.write_array(array)
        if pieces:
            self.write(b"".join(pieces))

    def zeros(self, count: int) -> None:
        """Write ``count`` zero bytes."""
        while count > 0:
            step = min(count, len(self._ZEROS))
            self.write(self._ZEROS[:step])
            count -= step

    def pad_to(self, alignment: int) -> int:
        """Write zero bytes up to the next multiple of ``alignment``; returns the new position."""
        self.zeros(round_up(self.position, alignment) - self.position)
        return self.position

    def reserve(self, length: int) -> int:
        """Write ``length`` zero bytes to patch later; returns their position."""
        position = self.position
        self.zeros(length)
        return position

    def patch(self, position: int, data: bytes) -> None:
        """Overwrite bytes written earlier at ``position`` and return to the end."""
        if self._origin is None:
            raise io.UnsupportedOperation("patching needs a seekable stream")
        self.stream.seek(self._origin + position)
        self.stream.write(data)
        self.stream.seek(self._origin + self.position)


def write_at(fd: int, offset: int, data: Any, sync: bool = True, path: str | None = None) -> None:
    """Write all of ``data`` at ``offset`` of the file behind ``fd`` (pwrite: the fd's position
    stays), then fsync unless ``sync`` is false. The step of an in-place crash-safe update;
    a failure raises WriteError naming ``path``."""
    name = path or _describe_fd(fd)
    view = memoryview(data).cast("B")
    while view:
        written = _os_call("write", name, os.pwrite, fd, view, offset)
        view = view[written:]
        offset += written
    if sync:
        fsync_file(fd, name)


def copy_range(source_fd: int, stream: BinaryIO, offset: int, length: int, path: str) -> None:
    """Copy ``length`` bytes at ``offset`` of ``source_fd`` to the same offset of ``stream`` in the
    kernel (copy_file_range: a reflink where the file system shares blocks), leaving ``stream``
    positioned after them. Falls back to read/write where the kernel cannot copy."""
    stream.flush()
    out_fd = stream.fileno()
    position = offset
    end = offset + length
    kernel_copy = getattr(os, "copy_file_range", None)  # Linux only
    while position < end:
        copied = 0
        if kernel_copy is not None:
            try:
                copied = _os_call("write", path, kernel_copy, source_fd, out_fd, end - position, position, position)
            except WriteError as error:
                if error.errno not in (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
                    raise
                kernel_copy = None
        if not copied:
            stream.seek(position)
            data = os.pread(source_fd, min(end - position, 1 << 24), position)
            if not data:
                raise WriteError("copy", path, OSError(errno.EIO, f"the file ended at byte {position}"))
            stream.write(data)
            stream.flush()
            copied = len(data)
        position += copied
    stream.seek(end)


# fsync of a directory is refused by some file systems; that is "unsupported", not a failure.
_DIRECTORY_FSYNC_UNSUPPORTED = {errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EBADF, errno.EACCES}


def fsync_dir(folder: PathLike) -> None:
    """fsync a directory so a rename inside it is durable.

    Skipped where the folder cannot be opened or the file system does not
    support it; a real failure (EIO, ENOSPC, ...) raises WriteError: the
    rename before it happened, but is not known to be durable.
    """
    name = os.fsdecode(folder)
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        _os_call("directory fsync", name, os.fsync, fd)
    except WriteError as error:
        if error.errno not in _DIRECTORY_FSYNC_UNSUPPORTED:
            raise
    finally:
        os.close(fd)


@contextlib.contextmanager
def locked(path: PathLike) -> Iterator[int]:
    """Hold an exclusive advisory lock (flock) on the file at ``path``; yields its fd (read-write).

    A second updater waits until the first has finished. When the file was
    replaced by a rename while we waited, the lock is taken again on the file
    now at ``path``, so every updater works on the current file. Read the file
    through another descriptor (``Source.open(path)``): a memory map dups the
    descriptor it maps, and a map kept alive (by an exception's traceback)
    would hold the lock past this block.
    """
    try:
        import fcntl
    except ImportError:  # not POSIX: updaters are not serialised there
        fcntl = None  # type: ignore[assignment]

    name = os.fsdecode(path)
    while True:
        fd = os.open(name, os.O_RDWR)
        if fcntl is None:
            break
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            current = os.stat(name)
            held = os.fstat(fd)
        except BaseException:
            os.close(fd)
            raise
        if (current.st_dev, current.st_ino) == (held.st_dev, held.st_ino):
            break
        os.close(fd)
    try:
        yield fd
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_folder(target: PathLike, replace: bool = False) -> Iterator[Path]:
    """A folder to build in place of ``target``: made beside it, renamed over it when the block ends
    without an error, removed on failure. An existing ``target`` is replaced only when ``replace``
    (the caller decided it may be: see ``arrayio._edge.open_output_folder``); it is moved aside
    first and removed after the new folder is in place. A symlink at ``target`` is replaced itself."""
    import shutil

    final = Path(os.fsdecode(target))
    final.parent.mkdir(parents=True, exist_ok=True)
    clear_leftovers(final)
    staging = Path(tempfile.mkdtemp(prefix=temp_prefix(final), suffix=".tmp", dir=final.parent))
    building = staging / final.name
    try:
        yield building
        if replace and (final.exists() or final.is_symlink()):
            # The old folder goes into the staging folder (one rename), so that it is removed with it.
            _os_call("rename", os.fspath(final), os.replace, final, staging / ".replaced")
        _os_call("rename", os.fspath(final), os.replace, building, final)
        fsync_dir(final.parent)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


@contextlib.contextmanager
def atomic_write(path: PathLike, buffering: int = -1) -> Iterator[BinaryIO]:
    """Write a new local file under ``path`` crash-safely: temp file in the same folder,
    flush, fsync, rename over the target, fsync the folder. On error the
    target is untouched and the temp file removed. (What a killed run left is cleared once per CLI run,
    by ``clear_leftovers``: scanning the folder on every write would make a write cost O(folder size).)

    A symlink at ``path`` is replaced itself, as rename(2) does: never followed, so a link planted
    in a shared folder cannot redirect the write. A replaced regular file keeps its permission bits.
    """
    name = os.fsdecode(path)
    target = Path(name)
    folder = target.parent
    try:
        existing = os.lstat(target)
        mode = stat.S_IMODE(existing.st_mode) if stat.S_ISREG(existing.st_mode) else creation_mode()
    except FileNotFoundError:
        mode = creation_mode()
    fd, temp_name = _os_call("create", name, lambda: tempfile.mkstemp(prefix=temp_prefix(target), suffix=".tmp",
                                                                      dir=folder))
    try:
        os.fchmod(fd, mode)
        with _guarded_stream(fd, name, buffering) as stream:
            yield stream
            stream.flush()
            fsync_file(stream.fileno(), name)
        _os_call("rename", name, os.replace, temp_name, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp_name)
        raise
    # Committed: the target is the new file. A failure from here on says the rename may not be durable.
    fsync_dir(folder)


@contextlib.contextmanager
def atomic_path(path: PathLike) -> Iterator[str]:
    """A free temporary name beside ``path`` for a writer that opens files by name (python-blosc2): what it
    wrote there is fsynced and renamed over ``path`` when the block ends without an error, removed otherwise."""
    target = Path(os.fsdecode(path))
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, temp_name = _os_call("create", os.fspath(target), lambda: tempfile.mkstemp(
        prefix=temp_prefix(target), suffix=".tmp", dir=target.parent))
    os.close(fd)
    os.unlink(temp_name)  # the writer creates the file itself
    try:
        yield temp_name
        fd = os.open(temp_name, os.O_RDONLY)
        try:
            fsync_file(fd, os.fspath(target))
        finally:
            os.close(fd)
        _os_call("rename", os.fspath(target), os.replace, temp_name, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp_name)
        raise
    fsync_dir(target.parent)


def _guarded_stream(fd: int, path: str, buffering: int = -1, closefd: bool = True) -> BinaryIO:
    """A binary write stream over ``fd`` whose OS calls pass the I/O seam (buffered unless 0)."""
    raw = GuardedFile(fd, path, closefd=closefd)
    if buffering == 0:
        return raw
    size = buffering if buffering > 1 else io.DEFAULT_BUFFER_SIZE
    return io.BufferedWriter(raw, size)


@contextlib.contextmanager
def output_stream(target: Any) -> Iterator[BinaryIO]:
    """A binary stream for a local path (atomic write), an int fd (left open) or a file object.

    A path naming a FIFO or a device is written into directly: renaming a
    file over it would replace the pipe instead of feeding it. URLs are the
    edge's business (``arrayio._edge.open_output``).
    """
    if is_path(target):
        path = os.fsdecode(target)
        try:
            special = not stat.S_ISREG(os.stat(path).st_mode)
        except FileNotFoundError:
            special = False
        if special:
            fd = _os_call("create", path, os.open, path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
            with _guarded_stream(fd, path) as stream:
                yield stream
        else:
            with atomic_write(path) as stream:
                yield stream
    elif isinstance(target, int) and not isinstance(target, bool):
        if target < 0:
            raise ValueError(f"invalid file descriptor {target}")
        with _guarded_stream(target, _describe_fd(target), buffering=0, closefd=False) as stream:
            yield stream
    elif hasattr(target, "write"):
        yield target
        with contextlib.suppress(AttributeError, OSError, ValueError):
            target.flush()
    else:
        raise TypeError(f"expected a path, file descriptor or binary file object, got {type(target).__name__}")


def _remaining_in_file(stream: Any) -> int | None:
    """Bytes left after the position of a regular file, or None for pipes and sockets."""
    try:
        fd = stream.fileno()
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None
        return max(0, info.st_size - stream.tell())
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return None


def read_exactly(stream: Any, length: int, errors: ErrorKinds, what: str, offset: int = 0,
                 prefix: bytes = b"") -> memoryview:
    """Read ``length`` bytes from a (possibly non-seekable) stream in linear time.

    Returns ``prefix`` followed by those bytes in one buffer. On a regular
    file the buffer is sized once from what the file holds; on a pipe it
    grows geometrically with what actually arrives, so a header that claims a
    huge length never makes us allocate more than the stream delivers. A
    short read raises TruncatedError naming ``what``.
    """
    remaining = _remaining_in_file(stream)
    first = min(length, remaining) if remaining is not None else min(length, 1 << 20)
    # np.empty, not bytearray: the bytes are about to be overwritten, so zero-filling
    # a gigabyte first would cost a third of the read.
    buffer = np.empty(len(prefix) + first, dtype=np.uint8)
    buffer[:len(prefix)] = np.frombuffer(prefix, dtype=np.uint8)
    filled = len(prefix)
    wanted = len(prefix) + length
    while filled < wanted:
        if filled == len(buffer):
            grown = np.empty(min(wanted, 2 * len(buffer)), dtype=np.uint8)
            grown[:filled] = buffer
            buffer = grown
        with buffer.data as whole:
            target = whole[filled:]
            if hasattr(stream, "readinto"):
                count = stream.readinto(target)
            else:
                chunk = stream.read(len(target))
                count = len(chunk) if chunk else 0
                target[:count] = chunk or b""
            target.release()
        if not count:
            raise errors.truncated_at(what, offset, length, offset + filled - len(prefix))
        filled += count
    return buffer.data


def release_pages(source: Source, offset: int, length: int) -> None:
    """Let the kernel drop the resident pages of ``[offset, offset + length)`` of a mapped source.

    The pages stay in the page cache and fault back in if touched again, so a
    reader streaming once through a large map keeps its resident set small.
    Only whole pages inside the range are dropped; a no-op for unmapped sources.
    """
    mapping = source._map
    if mapping is None or source.closed or length <= 0:
        return
    start = round_up(source._base + offset, mmap.PAGESIZE)
    stop = (source._base + offset + length) // mmap.PAGESIZE * mmap.PAGESIZE
    if stop > start:
        with contextlib.suppress(OSError, ValueError):
            mapping.madvise(mmap.MADV_DONTNEED, start, stop - start)
