"""The batch JPEG header check (what the GPU loader runs on every packed batch before nvJPEG sizes its output
from the headers) refuses what the one-image check refuses, names the image, and lets real encoders through."""

from __future__ import annotations

import io
import re
import struct

import numpy as np
import pytest

from arrayio.kdb import ImageDecodeError, ImageTooLarge, check_image_records, check_jpeg_header, check_jpeg_headers
from arrayio.kdb._images import encode

pytest.importorskip("simplejpeg")  # the one-image check the batch check is held against


def _jpeg(pixels: np.ndarray, kind: int) -> bytes:
    from PIL import Image

    image, out = Image.fromarray(pixels), io.BytesIO()
    if kind == 0:
        return encode(pixels, "jpeg", 90)
    if kind == 1:
        image.save(out, "JPEG", progressive=True)
    elif kind == 2:
        exif = Image.Exif()
        exif[0x0112] = 1
        image.save(out, "JPEG", exif=exif.tobytes())
    elif kind == 3:
        image.convert("L").save(out, "JPEG", optimize=True)
    else:
        image.save(out, "JPEG", restart_marker_rows=1, subsampling=0)
    return out.getvalue()


def _packed(pieces: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    starts = np.zeros(len(pieces) + 1, np.int64)
    np.cumsum([len(piece) for piece in pieces], out=starts[1:])
    return np.frombuffer(b"".join(pieces), np.uint8), starts


def _verdict(check, *args) -> str | None:
    try:
        check(*args)
    except ImageDecodeError as error:
        return str(error)
    return None


def _one_at_a_time(flat: np.ndarray, starts: np.ndarray, widths, heights) -> None:
    for slot, (start, end) in enumerate(zip(starts[:-1].tolist(), starts[1:].tolist())):
        check_jpeg_header(flat[start:end], int(widths[slot]), int(heights[slot]), f"image {slot}", start)


def test_jpegs_of_several_encoders_pass_the_batch_check():
    rng = np.random.default_rng(1)
    sizes = [(int(rng.integers(8, 90)), int(rng.integers(8, 90))) for _ in range(40)]
    pieces = [_jpeg(rng.integers(0, 255, (height, width, 3), np.uint8), number % 5)
              for number, (width, height) in enumerate(sizes)]
    flat, starts = _packed(pieces)
    check_jpeg_headers(flat, starts, [w for w, _ in sizes], [h for _, h in sizes])
    swapped = [(h, w) if w != h else (w + 1, h) for w, h in sizes]
    with pytest.raises(ImageDecodeError, match="image 0 at byte 0:"):
        check_jpeg_headers(flat, starts, [w for w, _ in swapped], [h for _, h in swapped])


@pytest.mark.parametrize("layout", ["one encoder", "several encoders"])
def test_the_batch_check_refuses_what_the_one_image_check_refuses(layout: str):
    """Random bytes changed in the headers of one image of a batch (the first one too: its layout is the one the
    others are compared with): wherever the one-image check refuses, the batch check refuses the same image in
    the same words. It may refuse more: a frame header of another size that libjpeg cannot read past."""
    rng = np.random.default_rng(7)
    kinds = [0] * 12 if layout == "one encoder" else [number % 5 for number in range(12)]
    pieces = [_jpeg(rng.integers(0, 255, (24, 32, 3), np.uint8), kind) for kind in kinds]
    widths, heights = [32] * len(pieces), [24] * len(pieces)
    refused = stricter = 0
    for _ in range(300):
        target = int(rng.choice([0, int(rng.integers(0, len(pieces)))]))
        changed = bytearray(pieces[target])
        frame = re.search(rb"\xff[\xc0-\xc3]", changed).start()  # half the changes land in the frame header
        for _ in range(int(rng.integers(1, 4))):
            at = int(rng.integers(frame, frame + 9)) if rng.random() < 0.5 else int(rng.integers(2, 700))
            changed[min(at, len(changed) - 1)] = int(rng.integers(0, 256))
        flat, starts = _packed([*pieces[:target], bytes(changed), *pieces[target + 1:]])
        one = _verdict(_one_at_a_time, flat, starts, widths, heights)
        batch = _verdict(check_jpeg_headers, flat, starts, widths, heights)
        if one is not None:
            refused += 1
            assert batch == one
        elif batch is not None:
            stricter += 1
            assert f"image {target} at byte" in batch and "a JPEG header of" in batch
    assert refused >= 50 and stricter < refused  # the mutations reach the frame header often enough to test something


def test_a_frame_header_of_another_size_is_refused_naming_its_image():
    pieces = [encode(np.zeros((8, 8, 3), np.uint8), "jpeg", 90) for _ in range(10)]
    bomb = bytearray(pieces[7])
    struct.pack_into(">HH", bomb, bomb.find(b"\xff\xc0") + 5, 30000, 30000)
    flat, starts = _packed([*pieces[:7], bytes(bomb), *pieces[8:]])
    with pytest.raises(ImageDecodeError, match=r"image 107 at byte \d+: .*a JPEG header of 30000x30000"):
        check_jpeg_headers(flat, starts, [8] * 10, [8] * 10, first=100)


def test_a_second_frame_header_of_another_size_is_refused():
    """libjpeg stops at a second frame header (so the one-image check lets it through); a decoder that reads
    the last one would size its output from pixels nobody checked."""
    jpeg = encode(np.zeros((8, 8, 3), np.uint8), "jpeg", 90)
    at = jpeg.find(b"\xff\xc0")
    frame = bytearray(jpeg[at:at + 2 + int.from_bytes(jpeg[at + 2:at + 4], "big")])
    struct.pack_into(">HH", frame, 5, 4000, 4000)
    twice = jpeg[:at] + jpeg[at:at + len(frame)] + bytes(frame) + jpeg[at + len(frame):]
    flat, starts = _packed([jpeg, twice])
    assert _verdict(_one_at_a_time, flat, starts, [8, 8], [8, 8]) is None
    with pytest.raises(ImageDecodeError, match=r"image 1 at byte \d+: .*a JPEG header of 4000x4000"):
        check_jpeg_headers(flat, starts, [8, 8], [8, 8])


def test_a_jpeg_the_walk_cannot_follow_goes_to_the_one_image_check():
    jpeg = encode(np.zeros((8, 8, 3), np.uint8), "jpeg", 90)
    filled = jpeg[:2] + b"\xff\xff" + jpeg[2:]  # fill bytes before a marker: legal, and left to libjpeg
    flat, starts = _packed([jpeg, filled, jpeg[:3]])
    check_jpeg_headers(flat, starts, [8, 8, 8], [8, 8, 8])
    with pytest.raises(ImageDecodeError, match=r"image 1 at byte \d+: .*a JPEG header of 8x8"):
        check_jpeg_headers(flat, starts, [8, 9, 8], [8, 8, 8])


def test_the_records_check_refuses_the_first_record_that_cannot_be_right():
    widths, heights, channels = np.full(6, 4), np.full(6, 4), np.full(6, 3)
    lengths, compressed, offsets = np.full(6, 48), np.zeros(6, bool), np.arange(6) * 100
    check_image_records(widths, heights, channels, lengths, compressed, offsets, "front")
    lengths[4] = 47
    lengths[5] = 1
    with pytest.raises(ImageDecodeError, match="front data_len") as raised:
        check_image_records(widths, heights, channels, lengths, compressed, offsets, "front")
    assert raised.value.offset == 400
    widths[2], heights[2], compressed[2], lengths[2] = 30000, 30000, True, 100
    with pytest.raises(ImageTooLarge) as raised:
        check_image_records(widths, heights, channels, lengths, compressed, offsets, "front")
    assert raised.value.offset == 200
