"""kdb's exception names (as in the Rust kinodb), subclassing arrayio's hierarchy."""

from __future__ import annotations

from ..errors import (
    ArrayIOError,
    ClosedError,
    ErrorKinds,
    FormatError,
    LimitError,
    TruncatedError,
    VersionTooNewError,
)
from ._records import FORMAT_NAME


class KinoError(FormatError):
    """A malformed .kdb file (the reference's ``KinoError``)."""


class BadMagic(KinoError):
    """The file does not start with ``KINO``."""


class UnexpectedEof(KinoError, TruncatedError):
    """A header, index, blob or image runs past the end of its range (``TooShort``/``UnexpectedEof``)."""


class UnsupportedVersion(KinoError, VersionTooNewError):
    """The file's major version is newer than 0."""


class InvalidUtf8(KinoError):
    """A name in the metadata blob or an image record is not UTF-8."""


class ImageDecodeError(KinoError):
    """A stored image could not be decoded (or its raw size does not match its dimensions)."""


class MissingImage(KinoError, KeyError):
    """A frame has no image of a camera that other frames of its episode (or the dataset) have: the
    file is damaged, and code that catches KeyError for a missing camera still does."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""

    @classmethod
    def at(cls, where: str, camera: str) -> MissingImage:
        """The error for ``where`` ("episode 0 frame 1") lacking an image of ``camera``."""
        return cls(f"kdb: {where} has no image of camera {camera!r}", format=FORMAT_NAME,
                   field=f"{where} image records", found=f"no {camera!r}")


class ImageTooLarge(LimitError, ImageDecodeError):
    """An image record claims more pixels than its stored bytes can decode to, beyond the image_bytes
    limit: a LimitError naming the limit, and an ImageDecodeError (``on_bad_image="skip"`` skips it)."""


class FileClosedError(ClosedError):
    """The ``KdbFile`` was closed; nothing can be read through it any more."""


class EpisodeNotFound(ArrayIOError, IndexError):
    """An episode position outside ``0 .. len(file) - 1``."""


class EpisodeIdNotFound(ArrayIOError, KeyError):
    """No episode carries the requested episode id."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


ERRORS = ErrorKinds(FORMAT_NAME, format_error=KinoError, truncated=UnexpectedEof, too_new=UnsupportedVersion)
