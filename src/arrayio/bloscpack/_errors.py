"""The exceptions of arrayio.bloscpack: the reference package's names, placed in arrayio's hierarchy.

Code written for bloscpack 0.16.0 keeps catching what it caught (``ChecksumMismatch`` is still a
``RuntimeError``, ``NoSuchCodec`` still a ``ValueError``); code written for arrayio catches
``FormatError`` for every malformed file and ``UnsupportedError`` for every request we refuse.
"""

from __future__ import annotations

from ..errors import (
    ArrayIOError,
    ChecksumError,
    ClosedError,
    ErrorKinds,
    FormatError,
    UnsupportedError,
    VersionError,
    VersionTooNewError,
    VersionTooOldError,
)

__all__ = [
    "ERRORS",
    "FileNotFound",
    "FileClosedError",
    "NoSuchChecksum",
    "NoSuchCodec",
    "NoSuchSerializer",
    "ChunkingException",
    "ChunkSizeTypeSizeMismatch",
    "ChecksumMismatch",
    "FormatVersionMismatch",
    "ChecksumLengthMismatch",
    "NoMetadataFound",
    "NoChangeInMetadata",
    "MetadataSectionTooSmall",
    "NonUniformTypesize",
    "NotEnoughSpace",
    "OffsetsRequired",
    "NotANumpyArray",
    "ObjectNumpyArrayRejection",
]


class FileNotFound(ArrayIOError, IOError):
    """A file named on the command line does not exist (or an output exists without --force)."""


class FileClosedError(ClosedError):
    """The ``BloscpackFile`` was closed; nothing can be read through it any more."""


class NoSuchChecksum(UnsupportedError):
    """A checksum name that is not one of the nine bloscpack knows."""


class NoSuchCodec(UnsupportedError):
    """A Blosc codec or metadata codec this installation cannot use."""


class NoSuchSerializer(UnsupportedError):
    """A metadata serializer other than JSON."""


class ChunkingException(UnsupportedError):
    """The requested chunking is impossible (too many chunks)."""


class ChunkSizeTypeSizeMismatch(UnsupportedError):
    """An ndarray's chunk size is not a multiple of its itemsize."""


class ChecksumMismatch(ChecksumError, RuntimeError):
    """A chunk or metadata digest does not match the stored bytes."""


class FormatVersionMismatch(VersionError, RuntimeError):
    """The file's format version is not 3."""


class FormatVersionTooOld(FormatVersionMismatch, VersionTooOldError):
    """The file's format version is below 3."""


class FormatVersionTooNew(FormatVersionMismatch, VersionTooNewError):
    """The file's format version is above 3."""


class ChecksumLengthMismatch(UnsupportedError, RuntimeError):
    """A metadata rewrite asked for a checksum of another digest length."""


class NoMetadataFound(UnsupportedError, RuntimeError):
    """The file has no metadata section to rewrite."""


class NoChangeInMetadata(UnsupportedError, RuntimeError):
    """A metadata rewrite would write the metadata already stored."""


class MetadataSectionTooSmall(UnsupportedError, RuntimeError):
    """The stored metadata does not fit the space allocated for it."""


class NonUniformTypesize(UnsupportedError, RuntimeError):
    """Appending needs a typesize and the file does not record one."""


class OffsetsRequired(UnsupportedError, RuntimeError):
    """Appending needs an offsets table (bloscpack raises a plain RuntimeError here)."""


class NotEnoughSpace(UnsupportedError, RuntimeError):
    """Appending needs more chunks than the offsets table has room for (max_app_chunks)."""


class NotANumpyArray(FormatError, RuntimeError):
    """The file holds bytes, not an ndarray (its metadata lacks ``container: numpy``)."""


class ObjectNumpyArrayRejection(UnsupportedError, RuntimeError):
    """Object dtypes hold pointers, not data, and cannot be stored."""


ERRORS = ErrorKinds(
    "bloscpack",
    checksum=ChecksumMismatch,
    too_old=FormatVersionTooOld,
    too_new=FormatVersionTooNew,
)
