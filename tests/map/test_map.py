"""arrayio map: the sections tile every file exactly, for demos, reference files and corrupt files."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from arrayio import Problem, bloscpack, bytemap, kdb
from arrayio.bytemap import Section, tile, tiling_errors

FORMATS = ("kastore", "kast", "bloscpack", "kdb", "pycauset")

# Kinds each format's demo must show (beyond the tiling itself).
EXPECTED_KINDS = {
    "kastore": {"header", "table", "keys", "array", "padding"},
    "kast": {"header", "table", "keys", "array", "padding"},
    "bloscpack": {"header", "metadata", "table", "reserved", "chunk", "checksum"},
    "kdb": {"header", "metadata", "steps", "record", "image", "table"},
    "pycauset": {"header", "reserved", "array", "metadata"},
}
RED = (0xd6, 0x27, 0x28)


def png_size(path: Path) -> tuple[int, int]:
    """(width, height) from a PNG's IHDR chunk."""
    head = Path(path).read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR"
    return struct.unpack(">II", head[16:24])


def assert_tiles(sections: list[dict], size: int) -> None:
    cursor = 0
    for section in sections:
        assert section["offset"] == cursor and section["length"] > 0, section
        assert section["end"] == section["offset"] + section["length"]
        cursor = section["end"]
    assert cursor == size


# --------------------------------------------------------------------------- through the real entry point

@pytest.mark.parametrize("name", FORMATS)
def test_cli_map_of_every_demo_tiles_the_file_and_draws(cli, demo_files, tmp_path, name):
    path = demo_files[name]
    png = tmp_path / f"{name}.png"
    result = cli("map", path, "--json", "--png", png)
    assert result.returncode == 0, result.stderr.decode()
    found = json.loads(result.stdout)
    assert found["format"] == name and found["size"] == path.stat().st_size
    assert_tiles(found["sections"], found["size"])
    assert found["stopped"] is None and found["problems"] == []
    kinds = {section["kind"] for section in found["sections"]}
    assert EXPECTED_KINDS[name] <= kinds and "unaccounted" not in kinds
    assert png_size(png) == bytemap.png_size(bytemap.map_file(path))


def test_cli_map_text_lists_sections(cli, demo_files):
    result = cli("map", demo_files["kastore"])
    assert result.returncode == 0, result.stderr.decode()
    lines = result.stdout.decode().splitlines()
    assert lines[0].endswith("bytes, 20 sections") and "demo.kas: kastore" in lines[0]
    assert lines[2].split() == ["0", "64", "header", "header"]
    assert any(line.split()[2:] == ["array", "float64/linspace"] for line in lines[3:])


@pytest.mark.parametrize("name", ["kastore", "bloscpack", "pycauset", "tskit"])
def test_cli_map_of_reference_files_tiles(cli, reference_files, name):
    path = reference_files[name]
    result = cli("map", path, "--json")
    assert result.returncode == 0, result.stderr.decode() + result.stdout.decode()
    found = json.loads(result.stdout)
    assert_tiles(found["sections"], path.stat().st_size)
    assert "unaccounted" not in {section["kind"] for section in found["sections"]}
    if name == "tskit":
        labels = {section["label"] for section in found["sections"] if section["kind"] == "array"}
        assert {"nodes/time", "edges/left", "individuals/flags"} <= labels


def corrupt(name: str, data: bytes) -> tuple[bytes, int]:
    """A copy of a demo file with one field broken, and the byte offset validate should name."""
    broken = bytearray(data)
    if name == "kastore":  # item 0 array_start
        at = 64 + 24
    elif name == "kast":  # item 0 data_offset
        at = 40 + 24
    elif name == "bloscpack":  # chunk 1's blosc header version
        with bloscpack.open(data) as reader:  # where the offsets table says (it follows the metadata's room)
            at = int(reader.offsets[1])
    elif name == "kdb":  # episode 1 index entry: actions_length
        index_offset = struct.unpack_from("<Q", data, 24)[0]
        at = index_offset + 64 + 24
    else:  # pycauset: the active metadata block's magic
        at = 4576
    broken[at] ^= 0x5A
    return bytes(broken), at


@pytest.mark.parametrize("name", FORMATS)
def test_cli_map_of_a_corrupt_file_marks_where_parsing_stopped(cli, demo_files, tmp_path, name):
    data, at = corrupt(name, demo_files[name].read_bytes())
    path = tmp_path / demo_files[name].name
    path.write_bytes(data)
    png = tmp_path / "corrupt.png"
    result = cli("map", path, "--json", "--png", png)
    assert result.returncode == 1, result.stderr.decode()
    found = json.loads(result.stdout)
    assert_tiles(found["sections"], len(data))
    assert found["stopped"]["offset"] == at
    assert at in [problem["offset"] for problem in found["problems"]]
    assert found["sections"][0]["kind"] == "header"
    # The problem is drawn in red at its byte offset.
    bytemap_ = bytemap.map_file(path)
    width, height = png_size(png)
    assert (width, height) == bytemap.png_size(bytemap_)
    pixels = np.asarray(Image.open(png).convert("RGB"))
    red = np.all(pixels == RED, axis=2)
    assert red.any()
    columns = np.flatnonzero(red.any(axis=0))
    rows = bytemap._rows_for(bytemap_)
    per_row = -(-len(data) // rows)
    expected_x = 16 + (at % per_row) / per_row * (width - 32)
    assert np.min(np.abs(columns - expected_x)) <= 3


def test_cli_map_errors_are_one_line(cli, tmp_path):
    missing = cli("map", tmp_path / "missing.kas")
    assert missing.returncode == 1 and b"missing.kas" in missing.stderr and b"Traceback" not in missing.stderr
    unknown = tmp_path / "x.bin"
    unknown.write_bytes(b"hello world")
    result = cli("map", unknown)
    assert result.returncode == 1 and b"not a file of any known format" in result.stderr
    forced = cli("map", unknown, "--format", "kastore", "--json")
    assert forced.returncode == 1
    found = json.loads(forced.stdout)
    assert found["sections"] == [{"offset": 0, "length": 11, "end": 11, "kind": "unaccounted",
                                  "label": "not parsed (parsing stopped at byte 0)"}]


# --------------------------------------------------------------------------- in process

@pytest.mark.parametrize("name", FORMATS)
def test_truncated_files_map_what_parses(demo_files, name):
    data = demo_files[name].read_bytes()
    for size in (0, 3, len(data) // 3, len(data) - 1):
        found = bytemap.map_source(_source(name, data[:size]), name)
        assert tiling_errors(found.sections, size) == []
        if name == "pycauset" and size == len(data) - 1:
            # Slot B's metadata now runs past the end, so the older slot A is the valid one and still parses.
            assert "slot B (invalid, generation 2)" in [section.label for section in found.sections]
            assert found.stop is None
        elif size:
            assert found.stop is not None and found.stop.problem.offset is not None, (name, size)


def _source(name: str, data: bytes):
    import importlib

    from arrayio._binary import Source
    errors = importlib.import_module(f"arrayio.{name}._errors").ERRORS
    return Source.open(data, errors)


def test_map_of_bytes_in_memory(demo_files):
    data = demo_files["kdb"].read_bytes()
    found = bytemap.map_file(data, check=False)
    assert found.format == "kdb" and tiling_errors(found.sections, len(data)) == []
    with kdb.open(demo_files["kdb"]) as reader:
        images = sum(len(reader.image_records(episode, frame)) for episode in range(len(reader))
                     for frame in range(reader.entry(episode).num_frames))
    assert sum(section.kind == "image" for section in found.sections) == images > 0


def test_kastore_trailing_bytes_are_their_own_section(demo_files, tmp_path):
    path = tmp_path / "extra.kas"
    path.write_bytes(demo_files["kastore"].read_bytes() + b"tail")
    found = bytemap.map_file(path)
    assert found.sections[-1] == Section(found.size - 4, 4, "trailing", "after header.file_size")


def test_pycauset_superseded_metadata_blocks_are_stale(tmp_path):
    from arrayio import pycauset

    path = tmp_path / "m.pycauset"
    pycauset.save(np.eye(3), path)
    pycauset.update_metadata(path, {"note": "one"})
    pycauset.update_metadata(path, {"note": "two"})
    found = bytemap.map_file(path)
    assert tiling_errors(found.sections, found.size) == [] and not found.problems
    assert [section.label for section in found.sections if section.kind == "stale"] == [
        "superseded metadata block header", "superseded metadata"] * 2


def test_tile_fills_holes_settles_overlaps_and_clips():
    sections, stop = tile([Section(10, 10, "array", "a"), Section(0, 4, "header"), Section(15, 10, "array", "b"),
                           Section(12, 2, "keys"), Section(28, 10, "chunk")], 30)
    assert [(s.offset, s.length, s.kind) for s in sections] == [
        (0, 4, "header"), (4, 6, "unaccounted"), (10, 10, "array"), (20, 5, "array"), (25, 3, "unaccounted"),
        (28, 2, "chunk")]
    assert stop is None and tiling_errors(sections, 30) == []
    assert tiling_errors(sections, 31) == ["the sections end at 30, the file at 31"]


def test_problem_offsets_take_problem_objects_and_skip_strings():
    problems = ["kastore: something at byte 12", Problem("bad", offset=40), Problem("somewhere", offset=None)]
    assert bytemap.problem_offsets(problems) == [(40, "bad")]


def test_upstream_kastore_vectors_map_and_tile(testdata):
    """kastore's own test vectors: valid files map without unaccounted bytes, malformed ones stop with a reason."""
    for path in sorted((testdata / "kastore").rglob("*.kas")):
        found = bytemap.map_file(path, "kastore")
        assert tiling_errors(found.sections, found.size) == [], path.name
        if path.parent.name == "v1":
            assert found.stop is None and not found.problems, path.name
            assert "unaccounted" not in {section.kind for section in found.sections}, path.name
        elif found.size:
            assert found.stop is not None and found.stop.problem.message.startswith("kastore:"), path.name


@pytest.mark.parametrize("name", FORMATS)
def test_a_source_read_in_ranges_maps_like_a_mapped_file(demo_files, name):
    """Through a file object (range reads, as remote sources are) the map is the same as through the mmap."""
    import io

    mapped = bytemap.map_file(demo_files[name], check=False)
    for check in (False, True):
        ranged = bytemap.map_file(io.BytesIO(demo_files[name].read_bytes()), check=check)
        assert ranged.format == name and ranged.sections == mapped.sections
