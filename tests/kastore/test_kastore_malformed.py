"""Crafted bad files: every one raises a kastore FormatError naming format, field and byte offset,
and nothing else escapes (notes §1.5, §1.6, §2.1)."""

from __future__ import annotations

import io
import os
import random
import re
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

import arrayio
import arrayio.kast
import arrayio.kastore as kastore
from kastore_cases import (D_ARRAY_LEN, D_ARRAY_START, D_KEY_LEN, D_KEY_START, D_TYPE, FILE_SIZE, NUM_ITEMS,
                           VERSION_MAJOR, VERSION_MINOR, all_types, canonical_problem, craft, descriptor,
                           field_offset, header, read_everything, with_u8, with_u16, with_u32, with_u64)

BASE_DATA = {
    "alpha": np.arange(3, dtype=np.int8),
    "beta": np.arange(5, dtype=np.float64),
    "delta": np.arange(7, dtype=np.uint16),
    "gamma": np.array([], dtype=np.int32),
    "zeta": np.arange(2, dtype=np.uint64),
}
BASE = kastore.dumps(BASE_DATA)
COUNT = len(BASE_DATA)
U64_MAX = 2**64 - 1


def _loads(raw: bytes, read_all: bool, tmp: Path) -> dict:
    with kastore.loads(raw) as store:
        return read_everything(store)


def _bytesio(raw: bytes, read_all: bool, tmp: Path) -> dict:
    with kastore.load(io.BytesIO(raw), read_all=read_all) as store:
        return read_everything(store)


def _path(raw: bytes, read_all: bool, tmp: Path) -> dict:
    target = tmp / "case.kas"
    target.write_bytes(raw)
    with kastore.load(target, read_all=read_all) as store:
        return read_everything(store)


def _fd(raw: bytes, read_all: bool, tmp: Path) -> dict:
    target = tmp / "case_fd.kas"
    target.write_bytes(raw)
    fd = os.open(target, os.O_RDONLY)
    try:
        with kastore.load(fd, read_all=read_all) as store:
            return read_everything(store)
    finally:
        os.close(fd)


MODES = [(loader, read_all) for loader in (_loads, _bytesio, _path, _fd) for read_all in (False, True)]


def check_format_error(error: BaseException, raw: bytes) -> None:
    """The error is one of ours and its message says format, field and byte offset."""
    assert isinstance(error, arrayio.FormatError), repr(error)
    assert isinstance(error, kastore.KastoreException), repr(error)
    message = error.message
    assert message.startswith("kastore"), message
    assert str(error) == (f"{error.file}: {message}" if error.file else message)
    assert "at byte" in message, message
    assert error.field, message
    assert error.offset is not None and 0 <= error.offset <= max(len(raw), 64), message


def expect_rejected(raw: bytes, tmp: Path, expected: type = kastore.FileFormatError, modes=MODES) -> list[str]:
    """Load ``raw`` every way; each must raise ``expected`` (a FormatError). Returns the messages."""
    messages = []
    for loader, read_all in modes:
        try:
            loader(raw, read_all, tmp)
        except expected as error:
            check_format_error(error, raw)
            assert error.file == (str(tmp / "case.kas") if loader is _path else None), error  # fds, bytes: no name
            messages.append(error.message)
        except BaseException as error:  # noqa: BLE001 - the point is to report anything else
            pytest.fail(f"{loader.__name__} read_all={read_all}: {type(error).__name__}: {error}")
        else:
            pytest.fail(f"{loader.__name__} read_all={read_all}: loaded a malformed store")
    return messages


def expect_loads(raw: bytes, tmp: Path, modes=MODES) -> list[dict]:
    return [loader(raw, read_all, tmp) for loader, read_all in modes]


def check_by_model(raw: bytes, tmp: Path) -> None:
    """Accept exactly what the independent model of the rules accepts."""
    if canonical_problem(raw) is None:
        expect_loads(raw, tmp)
    else:
        expect_rejected(raw, tmp, arrayio.FormatError)


def test_model_accepts_the_base_file():
    assert canonical_problem(BASE) is None
    assert canonical_problem(kastore.dumps({})) is None
    assert canonical_problem(kastore.dumps(all_types(3))) is None


# --------------------------------------------------------------------------- truncation

@pytest.mark.parametrize("length", range(1, 64))
def test_truncated_header(tmp_path, length):
    expect_rejected(BASE[:length], tmp_path)


def test_every_prefix_is_rejected(tmp_path):
    for length in range(64, len(BASE)):
        messages = expect_rejected(BASE[:length], tmp_path, modes=MODES[:6])
        assert messages


def test_every_prefix_with_file_size_patched_is_rejected(tmp_path):
    for length in range(64, len(BASE)):
        expect_rejected(with_u64(BASE[:length], FILE_SIZE, length), tmp_path, modes=MODES[:6])


def test_empty_input_is_end_of_file(tmp_path):
    for loader, read_all in MODES:
        with pytest.raises(EOFError) as caught:
            loader(b"", read_all, tmp_path)
        # Also a FormatError (the clean end of a stream of stores is still not a store), worded as kast's.
        assert isinstance(caught.value, kastore.FileFormatError) and isinstance(caught.value, kastore.NoStoreError)
        assert caught.value.message == "kastore: header at byte 0: expected a 64-byte header, the data is empty (no store)"
        assert (caught.value.field, caught.value.offset) == ("header", 0)
    with pytest.raises(arrayio.kast.NoStoreError) as caught:
        arrayio.kast.loads(b"")
    assert caught.value.message == "kast: header at byte 0: expected a 40-byte header, the data is empty (no store)"


def test_truncation_message_names_the_store(tmp_path):
    message = expect_rejected(BASE[:-1], tmp_path)[0]
    assert "file_size" in message or "store" in message


# --------------------------------------------------------------------------- header fields

@pytest.mark.parametrize("delta", [-2, -1, 1, 1024])
@pytest.mark.parametrize("data", [{}, BASE_DATA, all_types(4)], ids=["empty", "base", "all_types_4"])
def test_file_size_off(tmp_path, data, delta):
    raw = kastore.dumps(data)
    bad = with_u64(raw, FILE_SIZE, len(raw) + delta) + bytes(max(delta, 0))
    expect_rejected(bad, tmp_path)


@pytest.mark.parametrize("value", [0, 1, 63, U64_MAX, 2**63])
def test_file_size_absurd(tmp_path, value):
    expect_rejected(with_u64(BASE, FILE_SIZE, value), tmp_path)


@pytest.mark.parametrize("value", [0, COUNT - 1, COUNT + 1, 2**31, 2**32 - 1])
def test_num_items_wrong(tmp_path, value):
    expect_rejected(with_u32(BASE, NUM_ITEMS, value), tmp_path)


def test_bad_magic(tmp_path):
    for index in range(8):
        expect_rejected(with_u8(BASE, index, BASE[index] ^ 0x20), tmp_path, modes=MODES[:4])
    expect_rejected(bytes(8) + BASE[8:], tmp_path)


def test_not_a_kastore_file(tmp_path):
    expect_rejected(b"x" * 1024, tmp_path)


def test_major_zero_is_too_old(tmp_path):
    expect_rejected(with_u16(BASE, VERSION_MAJOR, 0), tmp_path, kastore.VersionTooOldError)


@pytest.mark.parametrize("major", [2, 3, 4, 5, 100, 65535])
def test_major_above_one_is_too_new(tmp_path, major):
    messages = expect_rejected(with_u16(BASE, VERSION_MAJOR, major), tmp_path, kastore.VersionTooNewError)
    assert str(major) in messages[0]


@pytest.mark.parametrize("minor", [1, 7, 65535])
def test_any_minor_loads(tmp_path, minor):
    for data in expect_loads(with_u16(BASE, VERSION_MINOR, minor), tmp_path):
        assert sorted(data) == sorted(BASE_DATA)


def test_trailing_garbage_loads(tmp_path):
    for data in expect_loads(BASE + b"garbage" * 100, tmp_path):
        for key, value in BASE_DATA.items():
            np.testing.assert_array_equal(data[key], value)


def test_trailing_bytes_are_reported_by_validate(tmp_path):
    # The same rule as kast: what follows the store must be further complete stores.
    path = tmp_path / "trailing.kas"
    path.write_bytes(BASE + b"junk")
    (problem,) = kastore.validate(path)
    start = len(BASE)
    assert str(problem) == (f"store 1 (concatenated after store 0, from byte {start} on): kastore: header at byte "
                            f"{start}: expected 64 bytes (up to byte {start + 64}), the data ends at byte {start + 4}")
    assert problem.offset == start and problem.field == "header"
    path.write_bytes(BASE + BASE + kastore.dumps({}))
    assert kastore.validate(path) == []
    unsorted = craft([(INT8, b"b", b"\x01"), (INT8, b"a", b"\x02")])
    path.write_bytes(BASE + unsorted)
    (problem,) = kastore.validate(path)
    assert str(problem).startswith(f"store 1 (concatenated after store 0, from byte {start} on): kastore: item 1 key")
    assert problem.offset == start + 64 + 2 * 64 + 1  # file offset of the second key


# --------------------------------------------------------------------------- descriptor fields

FIELDS = {"key_start": D_KEY_START, "key_len": D_KEY_LEN, "array_start": D_ARRAY_START, "array_len": D_ARRAY_LEN}


def _field_values(original: int, file_size: int) -> list[int]:
    values = {0, 1, 63, 64, file_size - 1, file_size, file_size + 1, 2**31, 2**32, 2**32 - 1, 2**62, 2**63,
              2**63 - 1, 2**64 - 8, U64_MAX, original - 8, original - 1, original + 1, original + 8,
              U64_MAX - original + 1}
    return sorted(value % 2**64 for value in values if value % 2**64 != original)


@pytest.mark.parametrize("field", list(FIELDS))
@pytest.mark.parametrize("index", range(COUNT))
def test_descriptor_field_out_of_range(tmp_path, index, field):
    offset = field_offset(index, FIELDS[field])
    original = int.from_bytes(BASE[offset:offset + 8], "little")
    for value in _field_values(original, len(BASE)):
        bad = with_u64(BASE, offset, value)
        if canonical_problem(bad) is None:
            # e.g. array_len + 1 of a short int8 array still ends before the next aligned start.
            expect_loads(bad, tmp_path, modes=MODES[:2])
            continue
        messages = expect_rejected(bad, tmp_path, modes=MODES[:6])
        assert re.search(r"item \d+ |file_size", messages[0]), messages[0]


@pytest.mark.parametrize("field", list(FIELDS))
def test_u64_overflow_in_last_descriptor(tmp_path, field):
    offset = field_offset(COUNT - 1, FIELDS[field])
    expect_rejected(with_u64(BASE, offset, U64_MAX), tmp_path)


def test_array_start_plus_len_wraps_64_bits(tmp_path):
    # array_start + array_len * itemsize == 2**64 + (the real end): wraps to a plausible value in C.
    index = COUNT - 1
    _, _, _, start, length = descriptor(BASE, index)
    bad = with_u64(BASE, field_offset(index, D_ARRAY_LEN), length + 2**61)  # uint64: 2**61 * 8 == 2**64
    expect_rejected(bad, tmp_path)
    bad = with_u64(BASE, field_offset(index, D_ARRAY_START), 2**64 - 8)  # + 16 bytes wraps to 8
    expect_rejected(bad, tmp_path)


def test_key_start_plus_len_wraps_64_bits(tmp_path):
    _, key_start, key_len, _, _ = descriptor(BASE, 0)
    expect_rejected(with_u64(BASE, field_offset(0, D_KEY_LEN), U64_MAX - key_start + 2), tmp_path)


def test_misaligned_and_overpadded_array(tmp_path):
    index = 1  # "beta": float64
    _, _, _, start, length = descriptor(BASE, index)
    misaligned = with_u64(with_u64(BASE, field_offset(index, D_ARRAY_START), start + 1),
                          field_offset(index, D_ARRAY_LEN), length - 1)
    expect_rejected(misaligned, tmp_path)
    overpadded = with_u64(with_u64(BASE, field_offset(index, D_ARRAY_START), start + 8),
                          field_offset(index, D_ARRAY_LEN), length - 1)
    expect_rejected(overpadded, tmp_path)


@pytest.mark.parametrize("code", [10, 11, 20, 255])
@pytest.mark.parametrize("index", [0, COUNT - 1])
def test_bad_type_code(tmp_path, index, code):
    messages = expect_rejected(with_u8(BASE, field_offset(index, D_TYPE), code), tmp_path)
    assert f"item {index}" in messages[0]
    assert "type" in messages[0]
    assert f"at byte {field_offset(index, D_TYPE)}" in messages[0]


def test_error_offsets_point_at_the_field(tmp_path):
    offset = field_offset(2, D_KEY_START)
    messages = expect_rejected(with_u64(BASE, offset, descriptor(BASE, 2)[1] + 1), tmp_path, modes=MODES[:1])
    assert f"at byte {offset}" in messages[0], messages[0]
    assert "item 2" in messages[0]
    offset = field_offset(3, D_ARRAY_START)
    messages = expect_rejected(with_u64(BASE, offset, descriptor(BASE, 3)[3] + 8), tmp_path, modes=MODES[:1])
    assert "item 3" in messages[0] and f"at byte {offset}" in messages[0], messages[0]


# --------------------------------------------------------------------------- keys

INT8 = 0


def test_lone_empty_key(tmp_path):
    raw = craft([(INT8, b"", b"\x01\x02")])
    messages = expect_rejected(raw, tmp_path)
    assert "item 0" in messages[0]


@pytest.mark.parametrize("position", [0, 1, 2])
def test_empty_key_among_others(tmp_path, position):
    keys = [b"a", b"b"]
    keys.insert(position, b"")
    raw = craft([(INT8, key, b"\x07") for key in keys])
    messages = expect_rejected(raw, tmp_path)
    assert f"item {position}" in messages[0]


@pytest.mark.parametrize("keys", [[b"a", b"a"], [b"a", b"b", b"a"], [b"same", b"same", b"x"]])
def test_duplicate_keys(tmp_path, keys):
    raw = craft([(INT8, key, bytes([index])) for index, key in enumerate(keys)])
    messages = expect_rejected(raw, tmp_path)
    assert "unique" in messages[0] or "duplicate" in messages[0]
    first = keys.index(keys[-1] if keys.count(keys[-1]) > 1 else keys[0])
    second = keys.index(keys[first], first + 1)
    assert f"item {first}" in messages[0] and f"item {second}" in messages[0], messages[0]


@pytest.mark.parametrize("key", [b"\xff", b"ab\xc3", b"\xed\xa0\x80", b"\x80abc"])
def test_invalid_utf8_key(tmp_path, key):
    raw = craft([(INT8, b"a", b"\x01"), (INT8, key, b"\x02")])
    messages = expect_rejected(raw, tmp_path)
    assert "item 1" in messages[0]


def test_unsorted_keys_load_in_file_order_but_do_not_validate(tmp_path):
    raw = craft([(INT8, b"b", b"\x01"), (INT8, b"a", b"\x02\x03")])
    for data in expect_loads(raw, tmp_path):
        assert list(data) == ["b", "a"]
        assert data["a"].tolist() == [2, 3]
    path = tmp_path / "unsorted.kas"
    path.write_bytes(raw)
    with kastore.load(path) as store:
        assert list(store) == ["b", "a"]
    problems = kastore.validate(path)
    assert len(problems) == 1 and "sorted" in str(problems[0]), problems
    assert str(problems[0]).startswith("kastore") and "at byte" in str(problems[0])
    assert problems[0].field == "item 1 key" and isinstance(problems[0].offset, int)
    assert arrayio.validate(path) == problems


@pytest.mark.parametrize("where", ["header", "type", "descriptor", "padding"])
def test_nonzero_reserved_bytes_load_but_do_not_validate(tmp_path, where):
    items = [(INT8, b"a", b"\x01"), (INT8, b"b", b"\x02")]
    options = {"header": {"header_reserved": b"\x01" * 40}, "type": {"type_reserved": b"\x02" * 7},
               "descriptor": {"item_reserved": b"\x03" * 24}, "padding": {"padding": 0xAA}}[where]
    raw = craft(items, **options)
    assert canonical_problem(raw) is None
    for data in expect_loads(raw, tmp_path):
        assert data["a"].tolist() == [1] and data["b"].tolist() == [2]
    path = tmp_path / "reserved.kas"
    path.write_bytes(raw)
    problems = kastore.validate(path)
    assert problems, where
    assert all(str(problem).startswith("kastore") and "at byte" in str(problem) for problem in problems), problems
    assert all(isinstance(problem.offset, int) for problem in problems), problems
    assert craft(items) == kastore.dumps({"a": np.array([1], np.int8), "b": np.array([2], np.int8)})
    clean = tmp_path / "clean.kas"
    clean.write_bytes(craft(items))
    assert kastore.validate(clean) == []


# --------------------------------------------------------------------------- fuzz

def _mutations(rng: random.Random, raw: bytes) -> bytes:
    choice = rng.randrange(4)
    if choice == 0:
        return raw[:rng.randrange(len(raw))]
    out = bytearray(raw)
    if choice == 1:
        for _ in range(rng.randint(1, 4)):
            out[rng.randrange(len(out))] ^= 1 << rng.randrange(8)
    elif choice == 2:
        offset = rng.randrange(0, len(raw) - 8)
        value = rng.choice([0, 1, U64_MAX, 2**63, 2**32, len(raw), rng.getrandbits(64), rng.randrange(len(raw))])
        out[offset:offset + 8] = value.to_bytes(8, "little")
    else:
        offset = 64 + 64 * rng.randrange(max(1, header(raw)[3])) + rng.choice([0, 8, 16, 24, 32])
        if offset + 8 <= len(out):
            out[offset:offset + 8] = (int.from_bytes(out[offset:offset + 8], "little")
                                      + rng.choice([-8, -1, 1, 8, 2**63])).to_bytes(9, "little", signed=True)[:8]
    return bytes(out)


def test_fuzz_only_format_errors_escape(tmp_path):
    rng = random.Random(20261122)
    samples = [BASE, kastore.dumps(all_types(3)), kastore.dumps({"k": np.arange(100, dtype=np.int32)}),
               kastore.dumps({f"{i}é": np.arange(i, dtype=np.float32) for i in range(12)})]
    checked = 0
    for round_ in range(400):
        raw = _mutations(rng, rng.choice(samples))
        modes = MODES if round_ % 10 == 0 else MODES[:4]
        for loader, read_all in modes:
            try:
                loader(raw, read_all, tmp_path)
            except EOFError:
                assert raw == b""
            except arrayio.FormatError as error:
                check_format_error(error, raw)
                assert canonical_problem(raw) is not None, (raw.hex(), str(error))
            except BaseException as error:  # noqa: BLE001
                pytest.fail(f"{loader.__name__} read_all={read_all}: {type(error).__name__}: {error} "
                            f"on {raw.hex()}")
            else:
                assert canonical_problem(raw) is None, (raw.hex(), canonical_problem(raw))
            checked += 1
    assert checked >= 1600


def test_fuzz_validate_never_crashes(tmp_path):
    rng = random.Random(7)
    path = tmp_path / "fuzz.kas"
    for _ in range(200):
        raw = _mutations(rng, BASE)
        path.write_bytes(raw)
        problems = kastore.validate(path)
        assert isinstance(problems, list)
        if canonical_problem(raw) is not None:
            assert problems


# --------------------------------------------------------------------------- allocation guard

HUGE_HEADERS = {
    "num_items": with_u32(kastore.dumps({}), NUM_ITEMS, 2**32 - 1),
    "file_size": with_u64(kastore.dumps({}), FILE_SIZE, U64_MAX),
    "both": with_u64(with_u32(kastore.dumps({}), NUM_ITEMS, 2**32 - 1), FILE_SIZE, U64_MAX),
    "file_size_2**40": with_u64(kastore.dumps({}), FILE_SIZE, 2**40),
}


@pytest.mark.parametrize("name", list(HUGE_HEADERS))
def test_huge_header_claims_allocate_nothing(tmp_path, name):
    raw = HUGE_HEADERS[name]
    assert len(raw) == 64
    tracemalloc.start()
    try:
        expect_rejected(raw, tmp_path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 10 * 2**20, peak


def test_huge_header_through_a_pipe_allocates_little(tmp_path):
    raw = HUGE_HEADERS["file_size"]
    read_end, write_end = os.pipe()
    os.write(write_end, raw)
    os.close(write_end)
    tracemalloc.start()
    try:
        with pytest.raises(kastore.FileFormatError):
            kastore.load(read_end, read_all=True)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        os.close(read_end)
    assert peak < 10 * 2**20, peak


def test_fuzz_second_store_errors_have_file_offsets(tmp_path):
    rng = random.Random(3)
    first = kastore.dumps(all_types(2))
    path = tmp_path / "two.kas"

    def after_first(opener, read_all):
        source = opener()
        try:
            kastore.load(source, read_all=read_all).close()
            with kastore.load(source, read_all=read_all) as store:
                read_everything(store)
        finally:
            if isinstance(source, int):
                os.close(source)
            else:
                source.close()

    openers = [lambda: io.BytesIO(path.read_bytes()), lambda: open(path, "rb"),
               lambda: os.open(path, os.O_RDONLY)]
    for _ in range(200):
        raw = _mutations(rng, BASE)
        data = first + raw
        path.write_bytes(data)
        for opener in openers:
            for read_all in (False, True):
                try:
                    after_first(opener, read_all)
                except EOFError:
                    assert raw == b""
                except arrayio.FormatError as error:
                    assert canonical_problem(raw) is not None
                    assert len(first) <= error.offset <= len(data), (error.offset, str(error))
                    assert f"at byte {error.offset}" in str(error), str(error)
                else:
                    assert canonical_problem(raw) is None
