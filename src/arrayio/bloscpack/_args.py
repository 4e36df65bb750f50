"""The argument objects of bloscpack (``BloscArgs``, ``BloscpackArgs``, ``MetadataArgs``) and chunking.

They are dict-like with attribute access, like the reference's: unknown keys raise ``KeyError``,
deleting a key raises ``NotImplementedError``. Values are checked when a pack uses them.
"""

from __future__ import annotations

import operator
import pprint
from collections.abc import Mapping, MutableMapping
from typing import Any, Callable, Iterator, TypeVar, Union

import blosc

from ._errors import ChunkingException, NoSuchCodec, NoSuchSerializer
from ._records import (
    MAX_BUFFERSIZE,
    MAX_CHUNKS,
    MAX_CLEVEL,
    MAX_META_SIZE,
    MAX_TYPESIZE,
    METADATA_SERIALIZERS,
    MIN_CLEVEL,
    check_metadata_codec,
    checksum_named,
    reverse_pretty,
)

__all__ = [
    "BloscArgs",
    "BloscpackArgs",
    "MetadataArgs",
    "DEFAULT_CHUNK_SIZE",
    "calculate_nchunks",
    "resolve_max_app_chunks",
    "check_range",
]

DEFAULT_CHUNK_SIZE = "1M"
SizeRule = Union[int, Callable[[int], int]]


def _ten_times(count: int) -> int:
    return 10 * count


def check_range(name: str, value: Any, low: int, high: int) -> int:
    """``value`` when it is an int in ``low..high``; TypeError or ValueError naming ``name`` otherwise."""
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise TypeError(f"bloscpack: {name} must be an int, not {type(value).__name__}")
    value = operator.index(value)
    if not low <= value <= high:
        raise ValueError(f"bloscpack: {name} must be in {low}..{high}, found {value}")
    return value


ArgsT = TypeVar("ArgsT", bound="_Args")


class _Args(MutableMapping):
    """A fixed set of keys with defaults, readable as items or attributes."""

    _defaults: dict[str, Any] = {}

    def __init__(self, **values: Any) -> None:
        unknown = set(values) - set(self._defaults)
        if unknown:
            # A TypeError, as bloscpack's keyword-only constructors raise for an unknown argument.
            raise TypeError(f"{type(self).__name__} has no keys {sorted(unknown)}; keys: {list(self._defaults)}")
        for key, default in self._defaults.items():
            object.__setattr__(self, key, values.get(key, default))

    def __getitem__(self, key: str) -> Any:
        if key not in self._defaults:
            raise KeyError(key)
        return getattr(self, key)

    def __setitem__(self, key: str, value: Any) -> None:
        if key not in self._defaults:
            raise KeyError(key)
        object.__setattr__(self, key, value)

    def __setattr__(self, key: str, value: Any) -> None:
        self[key] = value

    def __delitem__(self, key: str) -> None:
        raise NotImplementedError(f"{type(self).__name__} keys cannot be deleted")

    def __iter__(self) -> Iterator[str]:
        return iter(self._defaults)

    def __len__(self) -> int:
        return len(self._defaults)

    def __repr__(self) -> str:
        shown = ", ".join(f"{key}={value!r}" for key, value in self.items())
        return f"{type(self).__name__}({shown})"

    def __str__(self) -> str:
        return pprint.pformat(dict(self))

    def pformat(self, indent: int = 4) -> str:
        """The class name, then one ``key: value`` line per key, indented (as bloscpack prints them)."""
        pad = " " * indent
        return f"{type(self).__name__}:\n{pad}" + f"\n{pad}".join(f"{key}: {value!r}" for key, value in self.items())

    def copy(self) -> Any:
        """A shallow copy (the caller's object is left alone)."""
        return type(self)(**self)

    @classmethod
    def coerce(cls: type[ArgsT], value: Mapping | None) -> ArgsT:
        """An instance from None (defaults), an instance, or a plain dict of its keys."""
        if value is None:
            return cls()
        if isinstance(value, cls):
            return value
        return cls(**dict(value))


class BloscArgs(_Args):
    """How each chunk is compressed: typesize, clevel, shuffle (bool or 0/1/2) and codec name."""

    typesize: int
    clevel: int
    shuffle: bool | int
    cname: str
    _defaults = {"typesize": 8, "clevel": 7, "shuffle": True, "cname": "blosclz"}

    def checked(self) -> "BloscArgs":
        """Self, after checking every value against what python-blosc accepts."""
        check_range("typesize", self.typesize, 1, MAX_TYPESIZE)
        check_range("clevel", self.clevel, MIN_CLEVEL, MAX_CLEVEL)
        if self.shuffle not in (True, False, blosc.NOSHUFFLE, blosc.SHUFFLE, blosc.BITSHUFFLE):
            raise ValueError(f"bloscpack: shuffle must be True/False or 0, 1, 2, found {self.shuffle!r}")
        if self.cname not in blosc.compressor_list():
            raise NoSuchCodec(f"bloscpack: codec {self.cname!r} is not available; "
                              f"this python-blosc has {', '.join(blosc.compressor_list())}")
        return self

    def with_typesize(self, typesize: int) -> "BloscArgs":
        """A copy with another typesize (the caller's object is left alone)."""
        return BloscArgs(**{**self, "typesize": typesize})


class BloscpackArgs(_Args):
    """Container options: the offsets table, the chunk checksum and room for appended chunks."""

    offsets: bool
    checksum: str
    max_app_chunks: SizeRule
    _defaults = {"offsets": True, "checksum": "adler32", "max_app_chunks": _ten_times}

    def __init__(self, **values: Any) -> None:
        super().__init__(**values)
        if self.checksum is None:
            self.checksum = "None"  # bloscpack spells "no checksum" as the string from the start

    def checked(self) -> "BloscpackArgs":
        """Self, after checking the values (``checksum=None`` becomes ``'None'``)."""
        if not isinstance(self.offsets, bool):
            raise TypeError(f"bloscpack: offsets must be a bool, not {type(self.offsets).__name__}")
        self.checksum = checksum_named(self.checksum).name
        return self


class MetadataArgs(_Args):
    """How the metadata is stored: serializer, checksum, codec (opportunistic zlib), level, room."""

    magic_format: bytes | str
    meta_checksum: str | None
    meta_codec: str
    meta_level: int
    max_meta_size: SizeRule
    _defaults = {"magic_format": b"JSON", "meta_checksum": "adler32", "meta_codec": "zlib",
                 "meta_level": 6, "max_meta_size": _ten_times}

    def checked(self) -> "MetadataArgs":
        """Self, after checking every value."""
        magic = self.magic_format.encode() if isinstance(self.magic_format, str) else self.magic_format
        if magic not in METADATA_SERIALIZERS:
            raise NoSuchSerializer(f"bloscpack: metadata serializer {self.magic_format!r} does not exist; use b'JSON'")
        self.magic_format = magic
        self.meta_checksum = checksum_named(self.meta_checksum).name
        check_metadata_codec(self.meta_codec)
        check_range("meta_level", self.meta_level, MIN_CLEVEL, MAX_CLEVEL)
        return self

    def effective_max_meta_size(self, meta_size: int) -> int:
        """The bytes to allocate for metadata of ``meta_size`` serialized bytes."""
        return _apply_size_rule("max_meta_size", self.max_meta_size, meta_size, MAX_META_SIZE)


def _apply_size_rule(name: str, rule: SizeRule, count: int, high: int) -> int:
    if callable(rule):
        value = rule(count)
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"bloscpack: {name} callable returned {type(value).__name__}, not an int")
        if value < 0:
            raise ValueError(f"bloscpack: {name} callable returned a negative number ({value})")
        return value
    if isinstance(rule, bool) or not isinstance(rule, int):
        raise TypeError(f"bloscpack: {name} must be an int or a callable, not {type(rule).__name__}")
    return check_range(name, rule, 0, high)


def resolve_max_app_chunks(offsets: bool, nchunks: int, max_app_chunks: SizeRule) -> int:
    """The number of spare offset slots: 0 without offsets or with unknown nchunks, else clamped."""
    check_range("nchunks", nchunks, -1, MAX_CHUNKS)
    if not offsets or nchunks == -1:
        return 0
    value = _apply_size_rule("max_app_chunks", max_app_chunks, nchunks, MAX_CHUNKS)
    return min(value, MAX_CHUNKS - nchunks)


def calculate_nchunks(size: int, chunk_size: int | str = DEFAULT_CHUNK_SIZE) -> tuple[int, int, int]:
    """(nchunks, chunk_size, last_chunk) for ``size`` bytes; a chunk size above ``size`` is cut to it."""
    if size < 0:
        raise ValueError(f"bloscpack: the input size must not be negative, found {size}")
    if size == 0:
        return 1, 0, 0
    if isinstance(chunk_size, str):
        chunk_size = reverse_pretty(chunk_size)
    chunk_size = check_range("chunk_size", chunk_size, 1, MAX_BUFFERSIZE)
    chunk_size = min(chunk_size, size)
    nchunks, remainder = divmod(size, chunk_size)
    if remainder:
        nchunks += 1
    if nchunks > MAX_CHUNKS:
        raise ChunkingException(f"bloscpack: {nchunks} chunks is more than the format allows ({MAX_CHUNKS})")
    return nchunks, chunk_size, remainder or chunk_size
