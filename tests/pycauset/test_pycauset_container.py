"""Our own round trips, the reference's storage test cases and the ones it lacks, and a fuzz corpus."""

from __future__ import annotations

import os
import random
import struct
import zlib

import numpy as np
import pytest

from arrayio import (
    ChecksumError,
    FormatError,
    TruncatedError,
    UnsupportedError,
    VersionError,
)
from arrayio import pycauset as ours
from arrayio.pycauset._records import SLOT, SLOT_OFFSETS
from arrayio.pycauset._writer import identity_metadata, pack_block, pack_slot, write_container
from arrayio.pycauset._matrices import Layout

DTYPES = ["float16", "float32", "float64", "complex64", "complex128", "int8", "int16", "int32", "int64",
          "uint8", "uint16", "uint32", "uint64", "bool"]


def sample(dtype: str, shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if dtype.startswith(("float", "complex")):
        values = rng.standard_normal(shape) * 100
        return (values + 1j * rng.standard_normal(shape) if dtype.startswith("complex") else values).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)


def slot(path, name):
    raw = path.read_bytes()[SLOT_OFFSETS[name]:SLOT_OFFSETS[name] + SLOT.size]
    return SLOT.unpack(raw)


def patch(path, offset, data):
    with open(path, "r+b") as handle:
        handle.seek(offset)
        handle.write(data)


def append(path, data) -> int:
    size = path.stat().st_size
    start = -(-size // 16) * 16
    with open(path, "ab") as handle:
        handle.write(bytes(start - size) + data)
    return start


def write_slot(path, name, generation, metadata_offset, metadata_length, *, like="A"):
    current = slot(path, like)
    patch(path, SLOT_OFFSETS[name], pack_slot(generation, current.payload_offset, current.payload_length,
                                              metadata_offset, metadata_length))


@pytest.fixture
def updated(tmp_path):
    """A float64 file after one update: slot A gen 1 (old), slot B gen 2 (new, active)."""
    path = tmp_path / "u.pycauset"
    ours.save(np.arange(12.0).reshape(3, 4), path, properties={"version": 1})
    ours.update_metadata(path, {"properties": {"version": 2}})
    return path


# --- round trips ---------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(0, 3), (1, 1), (5, 7), (3, 129), (0,), (1,), (65,)])
def test_round_trip(tmp_path, dtype, shape):
    array = sample(dtype, shape)
    path = tmp_path / "r.pycauset"
    ours.save(array, path)
    with ours.load(path) as container:
        assert container.array.dtype == array.dtype
        assert container.shape == array.shape
        assert np.array_equal(container.array, array)
        assert not container.array.flags.writeable
        assert container.generation == 1 and container.active_slot == "A"
    assert ours.validate(path) == []


@pytest.mark.parametrize("dtype", ["float64", "int32", "uint16"])
def test_dense_load_is_a_view_of_the_map(tmp_path, dtype):
    array = sample(dtype, (40, 30))
    path = tmp_path / "v.pycauset"
    ours.save(array, path)
    container = ours.load(path)
    assert container.source.is_mapped
    assert container.array.base is not None and not container.array.flags.owndata
    assert np.array_equal(container.packed, array)


def test_non_contiguous_and_big_endian_inputs(tmp_path):
    base = sample("float64", (20, 30))
    cases = [base[::2, ::3], base.astype(">f8"), np.asfortranarray(base), base.T, sample("bool", (9, 70))[:, ::2]]
    for index, array in enumerate(cases):
        path = tmp_path / f"{index}.pycauset"
        ours.save(array, path)
        assert np.array_equal(ours.load(path).array, array)


def test_rectangular_transposed_file_uses_stored_shape(tmp_path):
    array = np.asfortranarray(np.arange(6, dtype=np.int32).reshape(2, 3))
    path = tmp_path / "t.pycauset"
    ours.save(array, path)
    metadata = ours.read_typed_metadata(path)
    assert (metadata["rows"], metadata["cols"], metadata["view"]["is_transposed"]) == (3, 2, True)
    assert np.array_equal(ours.load(path).array, array)


def test_pycauset_style_logical_shape_without_params_is_recovered(tmp_path):
    base = np.arange(6, dtype=np.int32).reshape(2, 3)
    document = identity_metadata(Layout("INTEGER", "INT32", "raw_dense", 3, 2, {}, is_transposed=True))
    document["payload_layout"]["params"] = {}
    path = tmp_path / "p.pycauset"
    write_container(path, iter([base]), base.nbytes, document)
    assert np.array_equal(ours.load(path).array, base.T)


@pytest.mark.parametrize("n", [0, 1, 2, 5, 64, 65, 130])
def test_packed_round_trips(tmp_path, n):
    rng = np.random.default_rng(n)
    upper = np.triu(rng.standard_normal((n, n)), 1)
    upper_int = np.triu(rng.integers(-5, 5, (n, n)), 1)
    relation = np.triu(rng.random((n, n)) < 0.5, 1)
    sym = rng.standard_normal((n, n))
    cases = {
        "tri": (ours.triangular(upper), upper),
        "tri_diag": (ours.triangular(np.triu(sym), diagonal=True), np.triu(sym)),
        "tri_int": (ours.triangular(upper_int), upper_int),
        "causal": (ours.causal(relation), relation),
        "sym": (ours.symmetric(sym + sym.T), sym + sym.T),
        "anti": (ours.antisymmetric(upper - upper.T), upper - upper.T),
        "diag": (ours.diagonal(np.arange(float(n))), np.diag(np.arange(float(n)))),
    }
    for name, (packed, expected) in cases.items():
        path = tmp_path / f"{name}.pycauset"
        ours.save(packed, path)
        container = ours.load(path)
        assert container.matrix_type == packed.matrix_type
        assert np.array_equal(container.array, expected), name
        assert ours.validate(path) == [], name


def test_causal_bit_layout_matches_the_notes(tmp_path):
    relation = np.zeros((5, 5), dtype=bool)
    relation[0, 1] = relation[0, 4] = relation[1, 2] = relation[3, 4] = True
    packed = ours.causal(relation)
    assert packed.payload.tobytes() == bytes.fromhex("09" + "00" * 7 + "01" + "00" * 7 + "00" * 8 + "01" + "00" * 7)
    assert ours.causal(np.zeros((70, 70), dtype=bool)).payload.size == 592


def test_triangular_integer_rows_pad_to_8_bytes():
    dense = np.zeros((4, 4), dtype=np.int32)
    dense[0, 1], dense[0, 3], dense[1, 2] = 7, 9, 5
    assert ours.triangular(dense).payload.view("<i4").tolist() == [7, 0, 9, 0, 5, 0, 0, 0]


def test_dense_bit_stride_is_64_bytes(tmp_path):
    bits = np.zeros((3, 70), dtype=bool)
    bits[0, 0] = bits[1, 69] = True
    path = tmp_path / "b.pycauset"
    ours.save(bits, path)
    container = ours.load(path)
    assert container.payload_length == 192
    assert container.packed[64 + 8] == 0x20


@pytest.mark.parametrize("make", [
    lambda: ours.triangular(np.ones((3, 3))),
    lambda: ours.triangular(np.ones((2, 3))),
    lambda: ours.triangular(np.triu(np.full((3, 3), 2**40), 1)),
    lambda: ours.causal(np.ones((3, 3), dtype=bool)),
    lambda: ours.causal(np.triu(np.ones((3, 3)), 1)),
    lambda: ours.symmetric(np.triu(np.ones((3, 3)))),
    lambda: ours.antisymmetric(np.ones((3, 3))),
    lambda: ours.diagonal(np.ones((3, 3))),
])
def test_constructors_reject_what_they_cannot_store(make):
    with pytest.raises(UnsupportedError):
        make()


@pytest.mark.parametrize("bad", [np.zeros((2, 2, 2)), np.array(1.0), np.array(["a"]), np.zeros(3, dtype="datetime64[s]")])
def test_save_rejects_unsupported_arrays(tmp_path, bad):
    with pytest.raises(UnsupportedError):
        ours.save(bad, tmp_path / "x.pycauset")
    assert not list(tmp_path.iterdir())


def test_save_metadata_and_properties(tmp_path):
    path = tmp_path / "m.pycauset"
    ours.save(np.eye(2), path, properties={"is_identity": True, "dropped": None},
              metadata={"provenance": {"who": "test"}, "cached": {}})
    container = ours.load(path)
    assert container.properties == {"is_identity": True}
    assert container.metadata["provenance"] == {"who": "test"}
    for key in ("rows", "payload_uuid", "view"):
        with pytest.raises(UnsupportedError):
            ours.save(np.eye(2), path, metadata={key: 1})


# --- saving never writes through a live map ------------------------------------------------------

def test_save_over_a_loaded_file_leaves_the_loaded_array_intact(tmp_path):
    path = tmp_path / "live.pycauset"
    first = np.arange(2048 * 64, dtype=np.float64).reshape(2048, 64)
    ours.save(first, path)
    container = ours.load(path)
    view = container.array
    ours.save(np.zeros((10, 10)), path)
    assert np.array_equal(view, first)
    assert np.array_equal(ours.load(path).array, np.zeros((10, 10)))
    with pytest.raises(ValueError):
        view[0, 0] = 1.0


def test_update_never_touches_payload_or_active_slot(updated):
    before = updated.read_bytes()
    ours.update_metadata(updated, {"properties": {"version": 3}})
    after = updated.read_bytes()
    assert after[4096:4096 + 96] == before[4096:4096 + 96]
    assert after[SLOT_OFFSETS["B"]:SLOT_OFFSETS["B"] + 128] == before[SLOT_OFFSETS["B"]:SLOT_OFFSETS["B"] + 128]
    assert after[SLOT_OFFSETS["B"] + 128:len(before)] == before[SLOT_OFFSETS["B"] + 128:]
    assert ours.load(updated).active_slot == "A" and ours.load(updated).generation == 3


def test_update_merges_and_guards_identity(updated):
    ours.update_metadata(updated, {"properties": {"extra": "x"}, "provenance": {"k": [1, 2]}})
    metadata = ours.load(updated).metadata
    assert metadata["properties"] == {"version": 2, "extra": "x"}
    ours.update_metadata(updated, {"properties": {"extra": None}, "provenance": None})
    metadata = ours.load(updated).metadata
    assert metadata["properties"] == {"version": 2} and "provenance" not in metadata
    with pytest.raises(UnsupportedError):
        ours.update_metadata(updated, {"rows": 99})
    with pytest.raises(UnsupportedError):
        ours.update_metadata(updated, {"bad": 1 + 1j})
    ours.update_metadata(updated, {"rows": 3})
    assert ours.load(updated).generation == 5


# --- the reference's storage test cases ----------------------------------------------------------

def test_flipped_slot_byte_falls_back(updated):
    patch(updated, SLOT_OFFSETS["B"] + 3, b"\xff")
    container = ours.load(updated)
    assert container.active_slot == "A" and container.properties == {"version": 1}
    assert any("slot B slot_crc32" in str(problem) for problem in ours.validate(updated))


def test_garbage_appended_still_loads_and_updates(updated):
    append(updated, os.urandom(37))
    assert ours.load(updated).properties == {"version": 2}
    ours.update_metadata(updated, {"properties": {"version": 3}})
    assert ours.load(updated).properties == {"version": 3}


def test_newer_slot_pointing_at_bad_block_is_an_error(updated):
    block = bytearray(pack_block({"rows": 3}))
    block[-1] ^= 0xFF
    start = append(updated, bytes(block))
    write_slot(updated, "A", 3, start, len(block))
    with pytest.raises(ChecksumError, match="payload_crc32"):
        ours.load(updated)
    assert ours.validate(updated)


def test_both_slots_bad(updated):
    patch(updated, SLOT_OFFSETS["A"] + 1, b"\xee")
    patch(updated, SLOT_OFFSETS["B"] + 1, b"\xee")
    with pytest.raises(FormatError, match="no valid header slot"):
        ours.load(updated)
    assert ours.summarize_container(updated)["active_slot"] is None


def test_wrong_magic(updated):
    patch(updated, 0, b"NOTCAUSE")
    with pytest.raises(FormatError, match="preamble.magic at byte 0"):
        ours.load(updated)


def test_corrupt_block_magic(updated):
    patch(updated, slot(updated, "B").metadata_offset, b"XCMB")
    with pytest.raises(FormatError, match="block_magic"):
        ours.load(updated)


@pytest.mark.parametrize("field, offset, value, error", [
    ("format_version", 8, struct.pack("<I", 2), VersionError),
    ("endian", 12, b"\x02", FormatError),
    ("header_bytes", 13, struct.pack("<H", 512), FormatError),
    ("reserved0", 15, b"\x01", FormatError),
])
def test_preamble_fields(updated, field, offset, value, error):
    patch(updated, offset, value)
    with pytest.raises(error, match=field):
        ours.load(updated)


# --- the cases the reference lacks ---------------------------------------------------------------

@pytest.mark.parametrize("torn_from", [8, 32, 56, 60, 100])
def test_torn_slot_falls_back(updated, torn_from):
    old = updated.read_bytes()[SLOT_OFFSETS["A"]:SLOT_OFFSETS["A"] + 128]
    patch(updated, SLOT_OFFSETS["B"] + torn_from, old[torn_from:])
    container = ours.load(updated)
    if torn_from >= 60:
        assert container.active_slot == "B"  # only reserved bytes changed: the CRC still holds
    else:
        assert container.active_slot == "A" and container.properties == {"version": 1}


def test_truncation_at_every_section(updated):
    data = updated.read_bytes()
    new_block = slot(updated, "B").metadata_offset
    cuts = sorted({0, 5, 15, 16, 100, 271, 272, 4095, 4096, 4100, 4191, 4192, 4300, new_block,
                   new_block + 10, len(data) - 10, len(data) - 1})
    for cut in cuts:
        updated.write_bytes(data[:cut])
        try:
            container = ours.load(updated)
        except FormatError:
            assert cut < new_block, cut
            continue
        assert container.active_slot == "A" and container.properties == {"version": 1}, cut
        assert cut >= new_block


def test_equal_generations_slot_a_wins_everywhere(updated):
    a = slot(updated, "A")
    write_slot(updated, "B", 1, a.metadata_offset, a.metadata_length)
    b_block = pack_block({**ours.read_typed_metadata(updated), "properties": {"version": "B"}})
    start = append(updated, b_block)
    write_slot(updated, "B", 1, start, len(b_block))
    assert ours.load(updated).active_slot == "A"
    assert ours.read_typed_metadata(updated)["properties"] == {"version": 1}
    assert ours.summarize_container(updated)["active_slot"] == "A"
    assert ours.open(updated).info()["active_slot"] == "A"
    assert ours.update_metadata(updated, {"properties": {"version": 5}}) == 2
    assert slot(updated, "B").generation == 2 and ours.load(updated).properties == {"version": 5}


def test_slot_overlapping_header_is_invalid(updated):
    b = slot(updated, "B")
    patch(updated, SLOT_OFFSETS["B"], pack_slot(9, 0, b.payload_length, b.metadata_offset, b.metadata_length))
    assert ours.load(updated).active_slot == "A"
    assert any("payload_offset at byte 152: expected >= 4096" in str(p) for p in ours.validate(updated))


def test_forged_payload_length_is_an_error_and_old_quirk_is_accepted(updated):
    b = slot(updated, "B")
    for length, ok in ((1, False), (b.payload_length + 8, False), (b.payload_length + 64, True)):
        patch(updated, SLOT_OFFSETS["B"], pack_slot(2, b.payload_offset, length, b.metadata_offset,
                                                    b.metadata_length))
        if ok:
            assert np.array_equal(ours.load(updated).array, np.arange(12.0).reshape(3, 4))
        else:
            with pytest.raises(FormatError, match="payload_length"):
                ours.load(updated)


def test_bad_block_framing_cases(updated):
    b = slot(updated, "B")
    header_fields = {"block_version": (4, struct.pack("<I", 2), VersionError),
                     "encoding_version": (8, struct.pack("<I", 9), VersionError),
                     "reserved0": (12, b"\x01", FormatError),
                     "payload_length": (16, struct.pack("<Q", 1), FormatError),
                     "reserved1": (28, b"\x01", FormatError)}
    original = updated.read_bytes()
    for name, (offset, value, error) in header_fields.items():
        updated.write_bytes(original)
        patch(updated, b.metadata_offset + offset, value)
        with pytest.raises(error, match=name):
            ours.load(updated)
    updated.write_bytes(original)
    patch(updated, SLOT_OFFSETS["B"], pack_slot(2, b.payload_offset, b.payload_length, b.metadata_offset, 20))
    with pytest.raises(FormatError, match="metadata_length"):
        ours.load(updated)


@pytest.mark.parametrize("document, message", [
    ({"rows": 3}, "matrix_type"),
    ({"matrix_type": "NOPE", "data_type": "FLOAT64", "rows": 1, "cols": 1}, "matrix_type"),
    ({"matrix_type": "DENSE_FLOAT", "data_type": "INT8", "rows": 1, "cols": 1}, "data_type"),
    ({"matrix_type": "DENSE_FLOAT", "data_type": "FLOAT64", "rows": -1, "cols": 1}, "rows"),
    ({"matrix_type": "DENSE_FLOAT", "data_type": "FLOAT64", "rows": 2**63, "cols": 2**63}, "rows"),
    ({"matrix_type": "DENSE_FLOAT", "data_type": "FLOAT64", "rows": "3", "cols": 1}, "rows"),
    ({"matrix_type": "DENSE_FLOAT", "data_type": "FLOAT64", "rows": 1, "cols": 1,
      "payload_layout": {"kind": "raw_triangular"}}, "kind"),
    ({"matrix_type": "DENSE_FLOAT", "data_type": "FLOAT64", "rows": 1, "cols": 1,
      "payload_layout": {"kind": "raw_dense", "params": {"order": "column_major"}}}, "order"),
    ({"matrix_type": "CAUSAL", "data_type": "BIT", "rows": 4, "cols": 5}, "cols"),
    ({"matrix_type": "VECTOR", "data_type": "FLOAT64", "rows": 4, "cols": 2}, "cols"),
    ({"matrix_type": "TRIANGULAR_FLOAT", "data_type": "FLOAT64", "rows": 3, "cols": 3,
      "payload_layout": {"kind": "raw_triangular", "params": {"diagonal": 1}}}, "diagonal"),
    ({"matrix_type": "DENSE_FLOAT", "data_type": "FLOAT64", "rows": 10**9, "cols": 10**9}, "payload_length"),
])
def test_hostile_identity_keys(tmp_path, document, message):
    path = tmp_path / "h.pycauset"
    write_container(path, iter([bytes(8)]), 8, document)
    with pytest.raises(FormatError, match=message):
        ours.load(path)
    assert ours.validate(path)


def test_identity_unpack_is_bounded(tmp_path):
    path = tmp_path / "i.pycauset"
    write_container(path, iter([]), 0, {"matrix_type": "IDENTITY", "data_type": "FLOAT64", "rows": 10**6,
                                        "cols": 10**6, "payload_uuid": "x"})
    container = ours.load(path)
    assert container.shape == (10**6, 10**6)
    with pytest.raises(UnsupportedError, match="over the limit"):
        container.unpack()
    write_container(path, iter([]), 0, {"matrix_type": "IDENTITY", "data_type": "FLOAT64", "rows": 3,
                                        "cols": 3, "payload_uuid": "x"})
    assert np.array_equal(ours.load(path).array, np.eye(3))


def test_view_scalar_and_conjugation(tmp_path):
    array = np.array([[1 + 1j, 2], [3, 4 - 2j]])
    document = identity_metadata(Layout("DENSE_FLOAT", "COMPLEX_FLOAT64", "raw_dense", 2, 2, {"order": "row_major"}))
    document["view"] = {"is_transposed": False, "is_conjugated": True, "scalar": {"real": 2.0, "imag": 0.0}}
    path = tmp_path / "s.pycauset"
    write_container(path, iter([array]), array.nbytes, document)
    container = ours.load(path)
    assert np.array_equal(container.array, array)
    assert np.array_equal(container.values(), 2 * np.conj(array))


def test_load_from_bytes_and_file_objects(updated):
    data = updated.read_bytes()
    assert ours.load(data).properties == {"version": 2}
    with open(updated, "rb") as handle:
        assert np.array_equal(ours.load(handle).array, np.arange(12.0).reshape(3, 4))


# --- fuzz ----------------------------------------------------------------------------------------

def corpus(tmp_path) -> list[bytes]:
    files = []
    for index, matrix in enumerate([np.arange(12.0).reshape(3, 4), sample("bool", (5, 9)),
                                    ours.causal(np.triu(np.ones((9, 9), dtype=bool), 1)),
                                    ours.triangular(np.triu(np.ones((4, 4)), 1)), np.arange(5, dtype=np.int16)]):
        path = tmp_path / f"c{index}.pycauset"
        ours.save(matrix, path, properties={"n": index, "tags": ["a", "b"]})
        ours.update_metadata(path, {"provenance": {"i": index}})
        files.append(path.read_bytes())
    return files


def test_fuzz_only_format_errors_escape(tmp_path):
    rng = random.Random(20261122)
    files = corpus(tmp_path)
    target = tmp_path / "fuzz.pycauset"
    loaded = failed = 0
    for trial in range(400):
        data = bytearray(rng.choice(files))
        if trial % 3 == 0:
            data = data[:rng.randrange(len(data))]
        else:
            interesting = [rng.randrange(len(data)), rng.randrange(272), rng.randrange(4096, len(data))]
            for _ in range(rng.randint(1, 4)):
                data[rng.choice(interesting)] ^= 1 << rng.randrange(8)
        target.write_bytes(bytes(data))
        try:
            with ours.load(target) as container:
                container.array.sum()
                _ = container.metadata, container.values()
            ours.open(target).info()
            loaded += 1
        except FormatError:
            failed += 1
        assert isinstance(ours.validate(target), list)
    assert loaded and failed


def test_fuzz_block_bodies_with_valid_crc(tmp_path):
    rng = random.Random(7)
    base = tmp_path / "b.pycauset"
    ours.save(np.eye(3), base, properties={"k": [1, 2, {"x": "y"}]})
    original = base.read_bytes()
    a = slot(base, "A")
    payload = original[a.metadata_offset + 32:a.metadata_offset + a.metadata_length]
    for _ in range(300):
        body = bytearray(payload)
        for _ in range(rng.randint(1, 3)):
            body[rng.randrange(len(body))] = rng.randrange(256)
        header = struct.pack("<4sIIIQII", b"PCMB", 1, 1, 0, len(body), zlib.crc32(body), 0)
        data = bytearray(original)
        data[a.metadata_offset:] = header + body
        target = tmp_path / "f.pycauset"
        target.write_bytes(bytes(data))
        try:
            ours.load(target).unpack()
        except FormatError:
            pass


def test_truncated_error_names_the_field(tmp_path):
    path = tmp_path / "t.pycauset"
    path.write_bytes(b"PYCAUSET")
    with pytest.raises(TruncatedError, match="pycauset preamble"):
        ours.load(path)
