"""Crafted bad files (every header and index field, truncation in every section, inconsistent
counts, bad images) and a fuzz run: only arrayio.FormatError subclasses may escape."""

from __future__ import annotations

import io
import random
import struct
import warnings
import zlib

import numpy as np
import pytest
from PIL import Image
from kdb_cases import GOLDEN, write_sample

from arrayio import kdb
from arrayio.errors import FormatError, TruncatedError
from arrayio.kdb._records import HEADER, INDEX_ENTRY

CODES = {1: "<B", 2: "<H", 4: "<I", 8: "<Q"}


def patched(data: bytes, record, field: str, value: int, base: int = 0, index: int = 0) -> bytes:
    """``data`` with one integer field of a record replaced."""
    offset = record.offset_of(field, base, index)
    out = bytearray(data)
    struct.pack_into(CODES[record.widths[field]], out, offset, value)
    return bytes(out)


def read_everything(target) -> None:
    """Touch every byte a reader can reach: header, index, metadata, steps, image records, pixels."""
    with kdb.open(target) as f:
        for position in range(len(f)):
            f.read_meta(position)
            steps = f.steps(position)
            np.asarray(steps["state"]).sum()
            for frame in range(len(steps)):
                f.frame_images(position, frame, None, "raise")
            f.frame_offset(position, len(steps))


@pytest.fixture(scope="module")
def rich(tmp_path_factory) -> bytes:
    """Three JPEG episodes with two cameras, as bytes."""
    return write_sample(tmp_path_factory.mktemp("kdb") / "rich.kdb", compress="jpeg").read_bytes()


def index_base(data: bytes) -> int:
    return HEADER.unpack(data, 0).index_offset


def header_cases(data: bytes) -> dict[str, bytes]:
    size = len(data)
    return {
        "empty file": b"",
        "3 bytes": data[:3],
        "63 bytes": data[:63],
        "bad magic": b"KINX" + data[4:],
        "zeroed header (writer never finished)": bytes(64) + data[64:],
        "major 1": patched(data, HEADER, "version_major", 1),
        "num_episodes too high": patched(data, HEADER, "num_episodes", 2),
        "num_episodes huge": patched(data, HEADER, "num_episodes", 2**64 - 1),
        "num_frames off by one": patched(data, HEADER, "num_frames", HEADER.unpack(data, 0).num_frames + 1),
        "index_offset inside header": patched(data, HEADER, "index_offset", 10),
        "index_offset past end": patched(data, HEADER, "index_offset", size),
        "index_offset huge": patched(data, HEADER, "index_offset", 2**64 - 1),
        "index_length not a multiple of 64": patched(data, HEADER, "index_length", 65),
        "index_length past end": patched(patched(data, HEADER, "index_length", 128), HEADER, "num_episodes", 2),
        "index_length huge": patched(data, HEADER, "index_length", 2**64 - 64),
        "index cut short": data[:-1],
        "index missing": data[:index_base(data)],
    }


def index_cases(data: bytes) -> dict[str, bytes]:
    base = index_base(data)
    entry = INDEX_ENTRY.unpack(data, base)
    size = len(data)

    def with_frames(frames: int) -> bytes:
        header_fixed = patched(data, HEADER, "num_frames", HEADER.unpack(data, 0).num_frames - entry.num_frames
                               + frames)
        return patched(header_fixed, INDEX_ENTRY, "num_frames", frames, base)

    cases = {
        "num_frames +1 (header consistent)": with_frames(entry.num_frames + 1),
        "num_frames huge (header consistent)": with_frames(2**32 - 1),
        "action_dim +1": patched(data, INDEX_ENTRY, "action_dim", entry.action_dim + 1, base),
        "state_dim huge": patched(data, INDEX_ENTRY, "state_dim", 65535, base),
        "actions_length -1": patched(data, INDEX_ENTRY, "actions_length", entry.actions_length - 1, base),
    }
    for section in ("actions", "images", "meta"):
        offset_field, length_field = f"{section}_offset", f"{section}_length"
        cases[f"{offset_field} inside header"] = patched(data, INDEX_ENTRY, offset_field, 8, base)
        cases[f"{offset_field} past end"] = patched(data, INDEX_ENTRY, offset_field, size - 1, base)
        cases[f"{offset_field} huge"] = patched(data, INDEX_ENTRY, offset_field, 2**64 - 1, base)
        cases[f"{offset_field} into the index"] = patched(data, INDEX_ENTRY, offset_field, base, base)
        if section != "actions":
            cases[f"{length_field} huge"] = patched(data, INDEX_ENTRY, length_field, 2**64 - 1, base)
    cases["meta_length 0 (truncated metadata)"] = patched(data, INDEX_ENTRY, "meta_length", 0, base)
    cases["meta_length 3 (truncated task)"] = patched(data, INDEX_ENTRY, "meta_length", 3, base)
    cases["meta_length 14 (truncated total_reward)"] = patched(data, INDEX_ENTRY, "meta_length", 14, base)
    cases["images_length 1 (truncated camera count)"] = patched(data, INDEX_ENTRY, "images_length", 1, base)
    cases["images_length -1 (truncated last image)"] = patched(data, INDEX_ENTRY, "images_length",
                                                              entry.images_length - 1, base)
    return cases


def golden_record_cases() -> dict[str, bytes]:
    """Inside the golden vector's blobs: strings, camera records, raw image sizes."""
    def poke(offset: int, raw: bytes) -> bytes:
        out = bytearray(GOLDEN)
        out[offset:offset + len(raw)] = raw
        return bytes(out)

    return {
        "embodiment length past the blob": poke(64, struct.pack("<H", 400)),
        "embodiment not UTF-8": poke(66, b"\xff"),
        "task not UTF-8": poke(69, b"\xc3"),
        "num_cameras huge": poke(114, struct.pack("<H", 65535)),
        "camera name length past the section": poke(116, struct.pack("<H", 900)),
        "camera name not UTF-8": poke(118, b"\xfe"),
        "image data_len past the section": poke(129, struct.pack("<I", 2**32 - 1)),
        "raw image smaller than w*h*c": poke(119, struct.pack("<I", 2)),
        "raw image width huge": poke(119, struct.pack("<I", 2**32 - 1)),
        "format byte says compressed for raw pixels": poke(128, b"\x01"),
    }


def corpus(rich_bytes: bytes) -> dict[str, bytes]:
    cases = {}
    for label, data in (("golden", GOLDEN), ("jpeg", rich_bytes)):
        for name, value in {**header_cases(data), **index_cases(data)}.items():
            cases[f"{label}: {name}"] = value
    cases.update({f"golden: {name}": value for name, value in golden_record_cases().items()})
    return cases


def test_corpus_is_large(rich):
    assert len(corpus(rich)) > 80


def test_every_crafted_file_raises_a_format_error(rich):
    failures = []
    for name, data in corpus(rich).items():
        try:
            read_everything(data)
        except FormatError as error:
            text = str(error)
            if not text.startswith("kdb") or "byte" not in text:
                failures.append(f"{name}: message lacks format or offset: {text}")
        except Exception as error:  # noqa: BLE001 - the point of the test
            failures.append(f"{name}: {type(error).__name__}: {error}")
        else:
            failures.append(f"{name}: no error")
    assert not failures, "\n".join(failures)


def test_validate_reports_every_crafted_file(rich):
    for name, data in corpus(rich).items():
        assert kdb.validate(data), name


def test_messages_name_field_episode_and_offset():
    base = 158
    data = patched(GOLDEN, INDEX_ENTRY, "actions_length", 33, base)
    with kdb.open(data) as f, pytest.raises(FormatError) as caught:
        f.read_meta(0)  # each entry is checked the first time its episode is touched
    text = str(caught.value)
    assert "episode 0 index.actions_length" in text and f"byte {base + 24}" in text and "34" in text
    with pytest.raises(TruncatedError) as caught:
        kdb.open(GOLDEN[:40])
    assert "header" in str(caught.value) and "64" in str(caught.value)


def test_bad_image_skip_warns_and_keeps_time_axis():
    out = bytearray(GOLDEN)
    out[128] = 1  # frame 0 raw pixels relabelled as compressed: undecodable
    with kdb.open(bytes(out), on_bad_image="skip") as f:
        with pytest.warns(RuntimeWarning, match=r"episode 0 frame 0 camera 'c'"):
            stacked, present = f.read_episode(0).images.stack("c")
        assert present.tolist() == [False, True]
        assert stacked[1].tolist() == [[[10, 20, 30]]]
    with kdb.open(bytes(out)) as f, pytest.raises(kdb.ImageDecodeError, match="episode 0 frame 0 camera 'c'"):
        f.read_frame(0, 0)


def test_tiny_image_claiming_huge_dimensions_is_refused_before_allocation():
    out = io.BytesIO()
    Image.new("RGB", (4, 4)).save(out, format="PNG")
    png = bytearray(out.getvalue())
    png[16:24] = struct.pack(">II", 8000, 8000)  # IHDR width/height, then a valid CRC
    png[29:33] = struct.pack(">I", zlib.crc32(bytes(png[12:29])))
    stream = io.BytesIO()
    with kdb.Writer(stream) as writer:
        writer.add_episode(np.zeros((1, 1)), np.zeros((1, 1)),
                           images={"c": [kdb.EncodedImage(bytes(png), "png", 8000, 8000, 3)]})
    with kdb.open(stream.getvalue()) as f, pytest.raises(kdb.ImageDecodeError, match="more than JPEG or PNG"):
        f.read_frame(0, 0)


@pytest.mark.parametrize("seed", range(3))
def test_fuzz_only_format_errors_escape(rich, seed):
    rng = random.Random(seed)
    sources = [GOLDEN, rich]
    for _ in range(120):
        data = bytearray(rng.choice(sources))
        mode = rng.random()
        if mode < 0.3:
            data = data[:rng.randrange(len(data) + 1)]
        else:
            for _ in range(rng.randint(1, 6)):
                position = rng.randrange(len(data))
                data[position] = rng.randrange(256) if mode < 0.8 else data[position] ^ (1 << rng.randrange(8))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                read_everything(bytes(data))
            except FormatError:
                pass
            problems = kdb.validate(bytes(data))
        assert isinstance(problems, list)


def test_unreadable_image_messages_name_no_memory_address():
    """Pillow names the in-memory buffer it was handed by address; the errors say what is wrong without it."""
    with pytest.raises(ValueError) as stated:
        kdb.EncodedImage(b"GIF8 but not an image", "png").with_dimensions()
    assert str(stated.value) == ("kdb: EncodedImage stated as png is not a readable image: cannot identify "
                                 "image file")
    from arrayio.kdb._images import decode

    with pytest.raises(ValueError) as decoded:
        decode(memoryview(b"GIF8 but not an image"), 4, 4, 3)
    assert str(decoded.value) == "UnidentifiedImageError: cannot identify image file"


def _image_tables(data: bytes) -> list:
    """Every episode's image table as lists, or the error opening the file or reading a table raised."""
    try:
        with kdb.open(data) as f:
            tables = []
            for position in range(len(f)):
                try:
                    tables.append({camera: column.tolist() for camera, column in f.image_table(position).items()})
                except FormatError as error:
                    tables.append(f"{type(error).__name__}: {error}")
            return tables
    except FormatError as error:
        return [f"{type(error).__name__}: {error}"]


def test_image_tables_walked_whole_equal_those_walked_frame_by_frame(rich, monkeypatch):
    """image_table walks an episode's section in one loop; where a record cannot be taken at face value it
    leaves the section to the reader's parser. Both give the same tables, and the same errors, everywhere."""
    from arrayio.kdb import _batch_reads

    twice = rich.replace(b"wrist", b"front", 1)  # frame 0 of episode 0: "front" twice, no "wrist"
    cases = {"rich": rich, "golden": GOLDEN, "a camera named twice in a frame": twice, **corpus(rich)}
    quick = {name: _image_tables(data) for name, data in cases.items()}
    monkeypatch.setattr(_batch_reads, "_section_records", lambda *args: None)
    assert quick == {name: _image_tables(data) for name, data in cases.items()}
    first, second = quick["rich"][0]["front"][:2], quick["a camera named twice in a frame"][0]
    assert second["front"][:2] == first and second["wrist"][0][1] == -1  # the first record counts; none for wrist
    assert sum(isinstance(tables[0], str) for tables in quick.values()) > 40  # the corpus's errors compared too
