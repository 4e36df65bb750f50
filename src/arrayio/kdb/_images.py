"""Camera images: the caller's explicit encodings, JPEG/PNG encode and lazy decode.

The writer never sniffs bytes to decide whether an image is compressed (the
reference does, and mislabels raw pixels that start like a JPEG); callers give
raw pixel arrays or :class:`EncodedImage` values that state their encoding.
On read, a non-zero format byte means "compressed" and the codec is told apart
by its magic number, as the spec says. JPEG goes through simplejpeg when it is
installed (several times faster for small frames), everything else through
Pillow.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import limits
from ._errors import ImageDecodeError, ImageTooLarge

try:
    import simplejpeg
except ImportError:  # optional: Pillow decodes JPEG too, only slower
    simplejpeg = None

JPEG_MAGIC = b"\xff\xd8\xff"
ENCODINGS = ("jpeg", "png")
_PILLOW_MODES = {1: "L", 3: "RGB", 4: "RGBA"}
_PILLOW_FORMATS = {"jpeg": "JPEG", "png": "PNG"}
# Deflate cannot shrink data more than ~1032:1 and baseline JPEG far less, so a compressed image
# claiming more pixels than this many times its stored size (and more than the image_bytes limit)
# is refused before a pixel buffer is allocated: a 200-byte file cannot make us allocate gigabytes.
MAX_EXPANSION = 1100


@dataclass(frozen=True)
class EncodedImage:
    """Already-compressed image bytes with their encoding stated ("jpeg" or "png").

    ``width``, ``height`` and ``channels`` go into the image record; when left
    out they are read from the image's own header (not its pixels).
    """

    data: bytes
    encoding: str
    width: int | None = None
    height: int | None = None
    channels: int | None = None

    def __post_init__(self) -> None:
        if self.encoding not in ENCODINGS:
            raise ValueError(f"kdb: EncodedImage.encoding must be one of {ENCODINGS}, got {self.encoding!r}")

    def with_dimensions(self) -> EncodedImage:
        """This image with width, height and channels filled in from its header."""
        if None not in (self.width, self.height, self.channels):
            return self
        from PIL import Image, UnidentifiedImageError

        stream = io.BytesIO(self.data)
        try:
            with Image.open(stream) as image:
                found = (image.format or "").lower()
                width, height = image.size
                channels = len(image.getbands())
        except (UnidentifiedImageError, OSError, ValueError) as error:
            raise ValueError(f"kdb: EncodedImage stated as {self.encoding} is not a readable image: "
                             f"{_pillow_said(error, stream)}") from None
        if found != self.encoding:
            raise ValueError(f"kdb: EncodedImage stated as {self.encoding} holds {found or 'unknown'} data")
        return EncodedImage(self.data, self.encoding, width if self.width is None else self.width,
                            height if self.height is None else self.height,
                            channels if self.channels is None else self.channels)


def encode(pixels: np.ndarray, encoding: str, quality: int) -> bytes:
    """Compress an (H, W, C) uint8 array as JPEG (C = 1 or 3) or PNG (C = 1, 3 or 4)."""
    channels = pixels.shape[2]
    if encoding == "jpeg" and simplejpeg is not None:
        colorspace = "GRAY" if channels == 1 else "RGB"
        return simplejpeg.encode_jpeg(np.ascontiguousarray(pixels), quality=quality, colorspace=colorspace)
    from PIL import Image

    image = Image.fromarray(np.ascontiguousarray(pixels[:, :, 0] if channels == 1 else pixels))  # L, RGB or RGBA
    out = io.BytesIO()
    options = {"quality": quality} if encoding == "jpeg" else {"compress_level": 1}
    image.save(out, format=_PILLOW_FORMATS[encoding], **options)
    return out.getvalue()


def can_encode(encoding: str, channels: int) -> bool:
    """Whether ``encoding`` can hold images with ``channels`` channels."""
    return channels in ((1, 3) if encoding == "jpeg" else (1, 3, 4))


def decode(data: memoryview, width: int, height: int, channels: int) -> np.ndarray:
    """Decode JPEG/PNG bytes to an (H, W, C) uint8 array, C = ``channels`` when it is 1, 3 or 4 else 3.

    The image's own header must agree with the record's width and height
    (checked before any pixel buffer is allocated). Raises ValueError for bytes
    no codec can read or dimensions that disagree.
    """
    head = bytes(data[:4])
    if head.startswith(JPEG_MAGIC) and simplejpeg is not None and channels in (1, 3):
        try:
            found_height, found_width = simplejpeg.decode_jpeg_header(data)[:2]
            _check_size(found_width, found_height, width, height, channels, len(data))
            return simplejpeg.decode_jpeg(data, colorspace="GRAY" if channels == 1 else "RGB")
        except ValueError:
            raise
        except Exception as error:  # simplejpeg reports libjpeg failures as several types
            raise ValueError(f"{type(error).__name__}: {error}") from None
    from PIL import Image

    stream = io.BytesIO(data)
    try:
        with Image.open(stream) as image:
            _check_size(image.size[0], image.size[1], width, height, channels, len(data))
            pixels = np.asarray(image.convert(_PILLOW_MODES.get(channels, "RGB")))
    except ValueError:
        raise
    except Exception as error:  # Pillow raises many types (OSError, SyntaxError, DecompressionBombError...)
        raise ValueError(f"{type(error).__name__}: {_pillow_said(error, stream)}") from None
    return pixels.reshape(pixels.shape[0], pixels.shape[1], -1)


def _pillow_said(error: Exception, stream: io.BytesIO) -> str:
    """Pillow's message without the buffer it names by address ("<_io.BytesIO object at 0x...>"), which
    nobody reading the error can look up."""
    return str(error).replace(f" {stream!r}", "")


def decode_jpeg_into(data: Any, out: np.ndarray) -> bool:
    """Decode JPEG ``data`` straight into ``out`` (H, W, 1 or 3) with simplejpeg. False when that cannot
    be done (no simplejpeg, not a JPEG, another size, a damaged file): :func:`decode` then says why."""
    if simplejpeg is None or out.shape[2] not in (1, 3):
        return False
    try:
        return simplejpeg.decode_jpeg(data, colorspace="GRAY" if out.shape[2] == 1 else "RGB",
                                      buffer=out).shape == out.shape
    except Exception:  # noqa: BLE001 - simplejpeg reports libjpeg failures as several types; decode() names them
        return False


def check_decoded_size(width: int, height: int, channels: int, stored: int, compressed: bool, what: str,
                       offset: int | None = None) -> None:
    """Refuse an image record whose pixels cannot come from its ``stored`` bytes, before any pixel buffer:
    raw pixels must be exactly the stored bytes; JPEG/PNG may expand 1100:1, beyond that only up to the
    ``image_bytes`` limit (LimitError)."""
    if not compressed:
        if width * height * channels != stored:
            raise ImageDecodeError(format="kdb", field=f"{what} data_len", offset=offset,
                                   expected=f"width*height*channels = {width * height * channels} raw bytes",
                                   found=stored)
        return
    decoded = width * height * (channels if channels in (1, 3, 4) else 3)
    if decoded > MAX_EXPANSION * stored:
        limits.check("image_bytes", decoded, f"{what}: {width}x{height} pixels from {stored} stored bytes (more "
                     f"than JPEG or PNG can compress to, {MAX_EXPANSION}:1)", format="kdb", offset=offset,
                     error=ImageTooLarge)


def check_records(widths: Any, heights: Any, channels: Any, lengths: Any, compressed: Any, offsets: Any,
                  what: str) -> None:
    """:func:`check_decoded_size` over arrays of image records (a batch's, before its pixels are allocated):
    the arithmetic for all records at once, the scalar check (and its error) for the first that fails."""
    width, height, count, length = (np.asarray(column, np.int64) for column in (widths, heights, channels, lengths))
    packed = np.asarray(compressed, bool)
    raw_wrong = ~packed & (width * height * count != length)
    decoded = width * height * np.where((count == 1) | (count == 3) | (count == 4), count, 3)  # np.isin: 30x the cost
    expands = packed & (decoded > MAX_EXPANSION * length)
    starts = np.asarray(offsets)
    for row in np.flatnonzero(raw_wrong | expands).tolist():  # expansion past 1100:1 fails only past the limit
        check_decoded_size(int(width[row]), int(height[row]), int(count[row]), int(length[row]), bool(packed[row]),
                           what, int(starts[row]))


def check_jpeg_header(data: Any, width: int, height: int, what: str, offset: int | None = None) -> None:
    """Refuse JPEG bytes whose own header disagrees with their record's width and height: a decoder that
    sizes its output from the header (nvJPEG) must not be handed more pixels than were checked."""
    if simplejpeg is None:
        return
    try:
        found_height, found_width = simplejpeg.decode_jpeg_header(data)[:2]
    except Exception:  # noqa: BLE001 - an unreadable header: the decoder will say so in its own words
        return
    if (found_width, found_height) != (width, height):
        raise ImageDecodeError(format="kdb", field=what, offset=offset, expected=f"a {width}x{height} JPEG (its "
                               "record)", found=f"a JPEG header of {found_width}x{found_height}")


def _check_size(found_width: int, found_height: int, width: int, height: int, channels: int, stored: int) -> None:
    if (found_width, found_height) != (width, height):
        raise ValueError(f"the encoded image is {found_width}x{found_height}, its record says {width}x{height}")
    check_decoded_size(width, height, channels, stored, True, "image")


# The JPEG markers that start a frame header (SOF0-SOF15 but DHT, JPG and DAC) and those without a length.
_FRAME_MARKERS = np.isin(np.arange(256), [*range(0xC0, 0xC4), *range(0xC5, 0xC8), *range(0xC9, 0xCC),
                                         *range(0xCD, 0xD0)])
_BARE_MARKERS = np.isin(np.arange(256), [0x01, *range(0xD0, 0xD8)])
_LOST_MARKERS = np.isin(np.arange(256), [0xD8, 0xD9, 0xFF])  # a second image start, an end, a fill byte
_START_OF_SCAN = 0xDA
_HEADER_SEGMENTS = 64  # segments walked before the scan; a JPEG with more goes to the one-image check


def check_jpeg_headers(flat: np.ndarray, starts: np.ndarray, widths: Any, heights: Any, first: int = 0) -> None:
    """:func:`check_jpeg_header` for the JPEGs ``flat[starts[i]:starts[i + 1]]`` all at once (one packed
    batch), in a few array operations instead of a header parse per image. A frame header whose size
    disagrees with the record is refused (naming image ``first + i``), wherever it lies before the scan; a
    JPEG that cannot be followed to its scan (fill bytes, a damaged length, no frame header) goes to the
    one-image check."""
    flat = np.asarray(flat, np.uint8).reshape(-1)
    starts = np.asarray(starts, np.int64)
    begins, ends = starts[:-1], np.minimum(starts[1:], len(flat))
    width, height = np.asarray(widths, np.int64), np.asarray(heights, np.int64)
    found = np.full((len(begins), 2), -1, np.int64)  # a frame header's width and height that are not the record's
    unsure = np.ones(len(begins), bool)  # not yet followed to its scan
    if len(begins):
        _check_laid_out_like_first(flat, begins, ends, width, height, found, unsure)
        _walk_in_step(flat, begins, ends, width, height, found, unsure)
    wrong = found[:, 0] >= 0  # whatever follows it: nvJPEG may size its output from that header
    for slot in np.flatnonzero(wrong | unsure).tolist():
        what, offset = f"image {first + slot}", int(starts[slot])
        if not wrong[slot]:
            check_jpeg_header(flat[offset:int(ends[slot])], int(width[slot]), int(height[slot]), what, offset)
            continue
        raise ImageDecodeError(format="kdb", field=what, offset=offset, expected=f"a {int(width[slot])}x"
                               f"{int(height[slot])} JPEG (its record)",
                               found=f"a JPEG header of {found[slot, 0]}x{found[slot, 1]}")


def _segments(data: np.ndarray) -> list[int] | None:
    """Where one JPEG's markers lie, from the first after its start to its scan; None if it cannot be followed."""
    marks: list[int] = []
    position = 2
    while position + 4 <= len(data) and len(marks) < _HEADER_SEGMENTS:
        marker = int(data[position + 1])
        if data[position] != 0xFF or _LOST_MARKERS[marker]:
            return None
        marks.append(position)
        if marker == _START_OF_SCAN:
            return marks
        length = 0 if _BARE_MARKERS[marker] else (int(data[position + 2]) << 8) | int(data[position + 3])
        if not _BARE_MARKERS[marker] and length < 2:
            return None
        position += 2 + length
    return None


def _check_laid_out_like_first(flat: np.ndarray, begins: np.ndarray, ends: np.ndarray, width: np.ndarray,
                               height: np.ndarray, found: np.ndarray, unsure: np.ndarray) -> None:
    """The images of one encoder share a header layout: those whose markers and segment lengths lie where the
    first image's do are followed by following the first image once, their frame headers read in one gather."""
    template = flat[begins[0]:ends[0]]
    marks = _segments(template)
    if marks is None:
        return
    layout = (np.asarray(marks)[:, None] + np.arange(4)).reshape(-1)  # each marker and its length
    frames = [mark for mark in marks if _FRAME_MARKERS[template[mark + 1]]]
    if not frames:
        return
    fits = np.flatnonzero(ends - begins >= max(int(layout[-1]) + 1, frames[-1] + 9))
    alike = fits[(flat[begins[fits, None] + layout] == template[layout]).all(axis=1)]
    for frame in frames:
        _note_size(flat, begins[alike] + frame, alike, width, height, found)
    unsure[alike] = False


def _walk_in_step(flat: np.ndarray, begins: np.ndarray, ends: np.ndarray, width: np.ndarray, height: np.ndarray,
                  found: np.ndarray, unsure: np.ndarray) -> None:
    """Follow the segments of every image still ``unsure`` in step, one segment of each per round."""
    position = begins + 2  # past the start-of-image marker
    framed = np.zeros(len(begins), bool)
    walking = np.flatnonzero(unsure & (position + 4 <= ends))
    for _ in range(_HEADER_SEGMENTS):
        if not walking.size:
            break
        at, end = position[walking], ends[walking]
        marker = flat[at + 1]
        frame, bare = _FRAME_MARKERS[marker], _BARE_MARKERS[marker]
        length = (flat[at + 2].astype(np.int64) << 8) | flat[at + 3]
        lost = (flat[at] != 0xFF) | _LOST_MARKERS[marker] | (frame & (at + 9 > end)) | (~bare & (length < 2))
        sized = frame & ~lost
        _note_size(flat, at[sized], walking[sized], width, height, found)
        framed[walking[sized]] = True
        scanned = walking[~lost & (marker == _START_OF_SCAN)]
        unsure[scanned] = ~framed[scanned]
        position[walking] = at + np.where(bare, 2, 2 + length)
        walking = walking[~lost & (marker != _START_OF_SCAN) & (position[walking] + 4 <= end)]


def _note_size(flat: np.ndarray, at: np.ndarray, rows: np.ndarray, width: np.ndarray, height: np.ndarray,
               found: np.ndarray) -> None:
    """Note the size in the frame headers at ``at`` of images ``rows`` where it is not their record's."""
    size = np.stack([(flat[at + 7].astype(np.int64) << 8) | flat[at + 8],
                     (flat[at + 5].astype(np.int64) << 8) | flat[at + 6]], axis=1)
    other = ((size[:, 0] != width[rows]) | (size[:, 1] != height[rows])) & (found[rows, 0] < 0)
    found[rows[other]] = size[other]
