"""Issue 19 item 11: a JPEG record claiming 30000x30000 pixels in a 1.5 KB kdb, through every decode path."""

from __future__ import annotations

from pathlib import Path

import pytest
from hostile_run import PEAK_LIMIT_MB

pytest.importorskip("torch")

# An 8x8 JPEG whose frame header (SOF0) says side x side, in a record that says the same: libjpeg
# decodes the missing data as grey, so on main each image cost 2.8 GB and 16 s. With patch=False only
# the record claims the size (the JPEG's own header still says 8x8).
MAKE_BOMB = """
import struct
import numpy as np
from arrayio import kdb
from arrayio.kdb import EncodedImage
from arrayio.kdb._images import encode

def make_bomb(path, side, patch=True):
    jpeg = bytearray(encode(np.zeros((8, 8, 3), np.uint8), "jpeg", 90))
    if patch:
        struct.pack_into(">HH", jpeg, jpeg.find(b"\\xff\\xc0") + 5, side, side)
    with kdb.Writer(path) as writer:
        writer.add_episode(np.zeros((2, 2), np.float32), np.zeros((2, 1), np.float32),
                           images={"front": [EncodedImage(bytes(jpeg), "jpeg", side, side, 3)] * 2})
"""


@pytest.mark.parametrize("path", ["frame_dataset", "decode_batch", "read_frame"])
def test_jpeg_bomb_is_refused_before_the_pixels_are_allocated(hostile, tmp_path: Path, path: str):
    outcome = hostile(MAKE_BOMB + """
import sys, torch
from arrayio import LimitError
from arrayio.robot.torch import FrameDataset, collate, decode_batch
make_bomb(sys.argv[1], 30000)
try:
    if sys.argv[2] == "frame_dataset":
        FrameDataset(sys.argv[1], image_format="uint8")[0]
    elif sys.argv[2] == "decode_batch":
        packed = FrameDataset(sys.argv[1], decode="cuda")
        decode_batch(collate(packed.__getitems__([0, 1])), device="cpu", fallback=True)
    else:
        kdb.open(sys.argv[1]).read_frame(0, 0)
except LimitError as error:
    print(error.limit, error.size)
""", tmp_path / "bomb.kdb", path)
    assert outcome.returncode == 0, outcome.stderr
    assert outcome.stdout.split() == ["image_bytes", str(30000 * 30000 * 3)]
    assert outcome.peak_mb < PEAK_LIMIT_MB, outcome.peak_mb


def test_the_image_limit_can_be_raised(hostile, tmp_path: Path):
    # 2000x2000x3 = 12 MB from ~600 bytes: over the 1 MiB limit set in the environment, and once
    # raised in code the decode goes on to find that the JPEG's own header says 8x8.
    outcome = hostile(MAKE_BOMB + """
import sys
from arrayio import FormatError, LimitError, limits
from arrayio.robot.torch import FrameDataset
make_bomb(sys.argv[1], 2000, patch=False)
try:
    FrameDataset(sys.argv[1], image_format="uint8")[0]
except LimitError as error:
    print("refused", error.limit, error.value)
with limits.raised(image_bytes=64 << 20):
    try:
        FrameDataset(sys.argv[1], image_format="uint8")[0]
    except LimitError:
        print("still refused")
    except FormatError as error:
        print("decoded", "8x8" in str(error))
""", tmp_path / "bomb.kdb", env={"ARRAYIO_LIMITS": "image_bytes=1M"})
    assert outcome.returncode == 0, outcome.stderr
    assert outcome.stdout.splitlines() == [f"refused image_bytes {1 << 20}", "decoded True"]


def test_the_refusal_crosses_dataloader_workers_and_pickles(hostile, tmp_path: Path):
    outcome = hostile(MAKE_BOMB + """
import pickle, sys, torch
from arrayio import LimitError
from arrayio.robot.torch import FrameDataset
make_bomb(sys.argv[1], 30000)
loader = torch.utils.data.DataLoader(FrameDataset(sys.argv[1], image_format="uint8"), batch_size=2, num_workers=1)
try:
    next(iter(loader))
except LimitError as error:
    print("worker", "image_bytes" in str(error))
try:
    FrameDataset(sys.argv[1], image_format="uint8")[0]
except LimitError as error:
    copy = pickle.loads(pickle.dumps(error))
    print("pickled", type(copy).__name__, copy.limit, copy.size, str(copy) == str(error))
""", tmp_path / "bomb.kdb")
    assert outcome.returncode == 0, outcome.stderr
    assert outcome.stdout.splitlines() == ["worker True", f"pickled ImageTooLarge image_bytes {30000 * 30000 * 3} True"]
    assert outcome.peak_mb < PEAK_LIMIT_MB, outcome.peak_mb


def test_a_jpeg_header_that_disagrees_with_its_record_is_refused_before_nvjpeg():
    import struct

    import numpy as np

    from arrayio.kdb import ImageDecodeError
    from arrayio.kdb._images import check_jpeg_header, encode

    pytest.importorskip("simplejpeg")
    jpeg = bytearray(encode(np.zeros((8, 8, 3), np.uint8), "jpeg", 90))
    check_jpeg_header(bytes(jpeg), 8, 8, "image 0")
    struct.pack_into(">HH", jpeg, jpeg.find(b"\xff\xc0") + 5, 30000, 30000)
    with pytest.raises(ImageDecodeError, match="a JPEG header of 30000x30000"):
        check_jpeg_header(np.frombuffer(bytes(jpeg), np.uint8), 8, 8, "image 0")
