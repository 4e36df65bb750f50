"""The crafted bad-file corpus: every field truncated, out of range, overflowing, misaligned, overlapping;
each case raises the named FormatError subclass with the field and byte offset in its message, through
every way of loading. Plus random truncations and byte flips where only FormatError may escape."""

from __future__ import annotations

import io
import random
import struct
from typing import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import arrayio
import arrayio.kast as kast
from arrayio.errors import FormatError, TruncatedError, VersionTooNewError, VersionTooOldError
from kast_cases import (DTYPE_NAMES, HEADER_FIELDS, base_items, build, entry_field, entry_offset, golden_bytes,
                        set_byte, set_entry, set_header)

BASE = build(base_items())  # table 40..135, keys 136..152 (alpha 136, beta 142, gamma 147), data 160..188
U64 = 2**64 - 1


def load_bytes(raw: bytes):
    return kast.loads(raw)


def load_path(raw: bytes, tmp_path):
    path = tmp_path / "case.kast"
    path.write_bytes(raw)
    return kast.load(path)


def load_stream(raw: bytes):
    return kast.load(io.BytesIO(raw), read_all=True)


# (case id, bytes, expected class, text the message must contain)
CORPUS: list[tuple[str, bytes, type, str]] = [
    ("empty", b"", kast.NoStoreError, "header at byte 0"),
    *[(f"header cut to {n}", BASE[:n], TruncatedError, "header at byte 0") for n in (1, 4, 12, 24, 39)],
    ("magic KASU", set_byte(BASE, 3, ord("U")), FormatError, "header.magic at byte 0"),
    ("magic lowercase", b"kast" + BASE[4:], FormatError, "header.magic at byte 0"),
    ("kastore magic", b"\x89KAS\r\n\x1a\n" + BASE[8:], FormatError, "header.magic at byte 0"),
    ("major 0", set_header(BASE, "version_major", 0, "<H"), VersionTooOldError, "header.version_major at byte 4"),
    ("major 2", set_header(BASE, "version_major", 2, "<H"), VersionTooNewError, "header.version_major at byte 4"),
    ("major 65535", set_header(BASE, "version_major", 65535, "<H"), VersionTooNewError, "found 65535"),
    *[(f"flags {flags:#x}", set_header(BASE, "flags", flags, "<I"), FormatError, "header.flags at byte 8")
      for flags in (1, 0x80, 0x80000000, 0xFFFFFFFF)],
    *[(f"keys_table_offset {value}", set_header(BASE, "keys_table_offset", value), FormatError,
       "header.keys_table_offset at byte 16") for value in (0, 39, 41, 48, 136, U64)],
    ("num_keys 2^32-1", set_header(BASE, "num_keys", 2**32 - 1, "<I"), TruncatedError, "keys table"),
    ("num_keys 6", set_header(BASE, "num_keys", 6, "<I"), TruncatedError, "keys table (6 entries) at byte 40"),
    ("num_keys 4", set_header(BASE, "num_keys", 4, "<I"), FormatError, "item 0 key_offset"),
    ("num_keys 2", set_header(BASE, "num_keys", 2, "<I"), FormatError, "item 0 key_offset at byte 44"),
    ("num_keys 0", set_header(BASE, "num_keys", 0, "<I"), FormatError, "header.data_offset at byte 24"),
    *[(f"data_offset {value}", set_header(BASE, "data_offset", value), FormatError, "header.data_offset at byte 24")
      for value in (0, 40, 153, 159, 161, 168, U64)],
    ("table cut", BASE[:100], TruncatedError, "keys table (3 entries) at byte 40"),
    ("keys area cut", BASE[:150], TruncatedError, "item 2 key range"),
    ("padding before data cut", BASE[:156], TruncatedError, "padding after the keys area"),
    *[(f"data cut to {n}", BASE[:n], TruncatedError,
       f"item {item} data range at byte {entry_offset('data_offset', item)}")
      for n, item in ((160, 0), (165, 0), (170, 1), (184, 2), (188, 2))],
]

for item in range(3):
    key_offset = entry_field(BASE, "key_offset", item)
    key_length = entry_field(BASE, "key_length", item)
    data_offset = entry_field(BASE, "data_offset", item)
    CORPUS += [
        (f"item {item} type {code}", set_entry(BASE, "data_type", item, code), FormatError,
         f"item {item} data_type at byte {entry_offset('data_type', item)}") for code in (10, 11, 255, 2**32 - 1)
    ]
    CORPUS += [
        (f"item {item} key_length 0", set_entry(BASE, "key_length", item, 0), FormatError,
         f"item {item} key_length at byte {entry_offset('key_length', item)}"),
        (f"item {item} key_length 2^32-1", set_entry(BASE, "key_length", item, 2**32 - 1), TruncatedError,
         f"item {item} key range"),
        (f"item {item} key_offset 2^64-1", set_entry(BASE, "key_offset", item, U64), FormatError,
         "key_offset + key_length + 1 below 2**64"),
        (f"item {item} key_offset past the end", set_entry(BASE, "key_offset", item, len(BASE)), FormatError,
         f"item {item} key_offset at byte {entry_offset('key_offset', item)}: expected {key_offset}"),
        *[(f"item {item} key_offset {delta:+}", set_entry(BASE, "key_offset", item, key_offset + delta), FormatError,
           f"item {item} key_offset at byte {entry_offset('key_offset', item)}: expected {key_offset}")
          for delta in (-1, 1, 2, -key_offset)],
        (f"item {item} key without NUL", set_byte(BASE, key_offset + key_length, ord("x")), FormatError,
         f"item {item} key terminator at byte {key_offset + key_length}"),
        (f"item {item} NUL inside the key", set_byte(BASE, key_offset + 1, 0), FormatError,
         f"item {item} key at byte {key_offset + 1}: expected a key without NUL bytes"),
        (f"item {item} invalid UTF-8", set_byte(BASE, key_offset, 0xFF), FormatError,
         f"item {item} key at byte {key_offset}: expected a utf-8 key"),
        (f"item {item} data_offset +1", set_entry(BASE, "data_offset", item, data_offset + 1), FormatError,
         f"item {item} data_offset at byte {entry_offset('data_offset', item)}: expected a multiple of 8"),
        (f"item {item} data_offset -8", set_entry(BASE, "data_offset", item, data_offset - 8), FormatError,
         "arrays must not overlap"),
        (f"item {item} data_offset 0", set_entry(BASE, "data_offset", item, 0), FormatError,
         f"item {item} data_offset at byte {entry_offset('data_offset', item)}: expected >= "),
        (f"item {item} data_offset 2^64-8", set_entry(BASE, "data_offset", item, 2**64 - 8), FormatError,
         # 16 float64 bytes pass 2**64; 6 or 5 bytes do not, and then the gap is the error
         f"item {item} data range" if item == 1 else
         f"item {item} data_offset at byte {entry_offset('data_offset', item)}"),
        (f"item {item} data_length 2^64-1", set_entry(BASE, "data_length", item, U64), FormatError,
         "below 2**64"),
        (f"item {item} data_length 2^61", set_entry(BASE, "data_length", item, 2**61),
         FormatError if item == 1 else TruncatedError,  # only 2**61 float64 elements pass 2**64 bytes
         f"item {item} data range"),
        (f"item {item} data_length past the end", set_entry(BASE, "data_length", item, 2**20), TruncatedError,
         f"item {item} data range at byte {entry_offset('data_offset', item)}"),
    ]
CORPUS += [
    ("item 1 data_offset +8 (gap)", set_entry(BASE, "data_offset", 1, 176), FormatError,
     "expected 168 (the end of item 0's array rounded up to 8: arrays packed in table order)"),
    ("item 0 data_offset +8 (gap after data_offset)", set_entry(BASE, "data_offset", 0, 168), FormatError,
     "item 0 data_offset at byte 64: expected 160 (header.data_offset rounded up to 8"),
    ("item 0 array overlaps item 1", set_entry(BASE, "data_length", 0, 7), FormatError,
     "item 1 data_offset at byte 96: expected >= 174 (the end of item 0's array; arrays must not overlap)"),
    ("item 0 array before data_offset", set_entry(BASE, "data_offset", 0, 152), FormatError,
     "expected >= 160 (header.data_offset; arrays must not overlap)"),
    ("arrays swapped", set_entry(set_entry(BASE, "data_offset", 0, 168), "data_offset", 1, 160), FormatError,
     "item 0 data_offset"),
    ("keys swapped", set_entry(set_entry(BASE, "key_offset", 0, 142), "key_offset", 1, 136), FormatError,
     "item 0 key_offset at byte 44: expected 136"),
    ("duplicate keys", build([(b"ab", np.zeros(1, "i1")), (b"ab", np.zeros(2, "i1"))]), FormatError,
     "item 1 key at byte 107: expected unique keys"),
    ("duplicate keys apart", build([(b"a", np.zeros(1, "i1")), (b"b", np.zeros(1, "i1")), (b"a", np.zeros(1, "i1"))]),
     FormatError, "already the key of item 0"),
]


@pytest.mark.parametrize("raw, expected, text", [case[1:] for case in CORPUS], ids=[case[0] for case in CORPUS])
def test_corpus_every_way_of_loading(raw: bytes, expected: type, text: str, tmp_path) -> None:
    loaders: list[Callable[[], object]] = [lambda: load_bytes(raw), lambda: load_path(raw, tmp_path),
                                           lambda: load_stream(raw)]
    for loader in loaders:
        # A stream checks the table before it knows how much data follows, so where the other
        # loaders see a truncation it may report the table entry that claims too much instead.
        wanted = FormatError if loader is loaders[2] and expected is TruncatedError else expected
        with pytest.raises(wanted) as caught:
            loader()
        message = caught.value.message
        assert message.startswith("kast: ")
        # A path is named in front of the message; bytes and streams have no name.
        named = str(tmp_path / "case.kast") if loader is loaders[1] else None
        assert caught.value.file == named and str(caught.value) == (f"{named}: {message}" if named else message)
        if wanted is expected:
            assert text in message, message


@pytest.mark.parametrize("raw, text", [(case[1], case[3]) for case in CORPUS if case[1]],
                         ids=[case[0] for case in CORPUS if case[1]])
def test_validate_reports_the_same_problem_without_raising(raw: bytes, text: str, tmp_path) -> None:
    path = tmp_path / "bad.kast"
    path.write_bytes(raw)
    problems = kast.validate(path)
    assert len(problems) == 1 and str(problems[0]).startswith("kast: ")
    assert text in str(problems[0]) and isinstance(problems[0].offset, int)
    if raw.startswith(b"KAST"):  # otherwise the generic entry point finds no format by the magic bytes
        assert arrayio.validate(path) == problems


def test_empty_file_is_a_format_error_and_an_eof(tmp_path) -> None:
    path = tmp_path / "empty.kast"
    path.write_bytes(b"")
    with pytest.raises(EOFError):
        kast.load(path)
    assert list(map(str, kast.validate(path))) == ["kast: header at byte 0: expected a 40-byte header, the data is empty (no store)"]


def test_key_missing_its_nul_at_the_end_of_the_area() -> None:
    # The last key's length grows over its own NUL into the zero padding: the key then holds a NUL.
    raw = set_entry(BASE, "key_length", 2, 6)
    with pytest.raises(FormatError, match="item 2 key at byte 152: expected a key without NUL"):
        kast.loads(raw)


@pytest.mark.parametrize("field", ["reserved", "padding"])
def test_nonzero_reserved_bytes_load_but_do_not_validate(field: str, tmp_path) -> None:
    raw = set_header(BASE, field, 0xDEADBEEF, "<I")
    assert kast.loads(raw)["gamma"].tolist() == [0, 1, 2, 3, 4]
    path = tmp_path / "reserved.kast"
    path.write_bytes(raw)
    assert list(map(str, kast.validate(path))) == [f"kast: header.{field} at byte {HEADER_FIELDS[field]}: expected zero bytes"]


@pytest.mark.parametrize("offset, item, padding_start", [(153, 0, 153), (159, 0, 153), (166, 1, 166), (167, 1, 166)])
def test_nonzero_padding_loads_but_does_not_validate(offset: int, item: int, padding_start: int, tmp_path) -> None:
    raw = set_byte(BASE, offset, 7)
    kast.loads(raw)
    path = tmp_path / "padding.kast"
    path.write_bytes(raw)
    assert list(map(str, kast.validate(path))) == [f"kast: padding before item {item}'s array at byte {padding_start}: "
                                   "expected zero bytes"]


def test_unsorted_keys_load_in_file_order_and_fail_validation(tmp_path) -> None:
    raw = build([(b"b", np.arange(2, dtype="i4")), (b"a", np.arange(3, dtype="u1"))])
    with kast.loads(raw) as store:
        assert list(store) == ["b", "a"]
        assert store["a"].tolist() == [0, 1, 2]
    path = tmp_path / "unsorted.kast"
    path.write_bytes(raw)
    assert list(map(str, kast.validate(path))) == ["kast: item 1 key at byte 106: expected keys sorted by their bytes, "
                                   "found b'a' after b'b'"]


def test_newer_minor_versions_load_and_validate(tmp_path) -> None:
    for minor in (1, 7, 65535):
        raw = build(base_items(), version=(1, minor))
        assert kast.loads(raw).header.version_minor == minor
        path = tmp_path / f"minor{minor}.kast"
        path.write_bytes(raw)
        assert kast.validate(path) == []


def test_trailing_bytes_are_ignored_by_load_and_reported_by_validate(tmp_path) -> None:
    path = tmp_path / "trailing.kast"
    path.write_bytes(BASE + b"junk")
    with kast.load(path) as store:
        assert store.file_size == len(BASE)
    problems = list(map(str, kast.validate(path)))
    start = len(BASE)
    assert problems == [f"store 1 (concatenated after store 0, from byte {start} on): kast: header at byte {start}: "
                        f"expected 40 bytes (up to byte {start + 40}), the data ends at byte {start + 4}"]


def test_concatenated_valid_stores_validate(tmp_path) -> None:
    path = tmp_path / "many.kast"
    path.write_bytes(BASE + golden_bytes("empty") + golden_bytes("mixed"))
    assert kast.validate(path) == []
    path.write_bytes(BASE + set_entry(BASE, "data_type", 1, 99))
    assert list(map(str, kast.validate(path))) == [f"store 1 (concatenated after store 0, from byte {len(BASE)} on): kast: item 1 "
                                   f"data_type at byte {len(BASE) + 84}: expected a type code 0..9, found 99"]


def _valid_files() -> list[bytes]:
    rng = np.random.default_rng(5)
    data = {f"k{index}": rng.integers(0, 100, index * 3).astype(DTYPE_NAMES[index]) for index in range(10)}
    return [BASE, golden_bytes("mixed"), golden_bytes("one_key"), build(list(
        (key.encode(), value) for key, value in sorted(data.items())))]


def _check_only_format_errors(raw: bytes, tmp_path) -> None:
    for load in (lambda: kast.loads(raw), lambda: kast.load(io.BytesIO(raw), read_all=True)):
        try:
            with load() as store:
                for key in store:
                    store[key].sum()
                    store.info(key)
        except FormatError:
            pass
    path = tmp_path / "fuzz.kast"
    path.write_bytes(raw)
    assert isinstance(kast.validate(path), list)


@pytest.mark.parametrize("seed", range(4))
def test_fuzz_truncations_and_byte_flips_raise_only_format_errors(seed: int, tmp_path) -> None:
    rng = random.Random(seed)
    raw = _valid_files()[seed]
    for _ in range(40):
        _check_only_format_errors(raw[:rng.randrange(len(raw))], tmp_path)
    for _ in range(80):
        flipped = bytearray(raw)
        for _ in range(rng.choice((1, 1, 2, 4))):
            position = rng.randrange(len(flipped))
            flipped[position] = rng.choice((0, 0xFF, 0x80, 1, rng.randrange(256),
                                            flipped[position] ^ 1 << rng.randrange(8)))
        _check_only_format_errors(bytes(flipped), tmp_path)


FIELD_VALUES = st.one_of(st.sampled_from([0, 1, 7, 8, 9, 10, 40, 136, 160, 189, 2**31, 2**32 - 1, 2**32, 2**61,
                                          2**63, 2**64 - 8, 2**64 - 1]), st.integers(0, 300))


@settings(max_examples=100, deadline=None)
@given(count=st.integers(0, 4), fields=st.lists(st.tuples(FIELD_VALUES, FIELD_VALUES, FIELD_VALUES, FIELD_VALUES,
                                                          FIELD_VALUES), min_size=4, max_size=4),
       data_offset=FIELD_VALUES, tail=st.binary(max_size=80))
def test_hypothesis_arbitrary_tables_raise_only_format_errors(count, fields, data_offset, tail) -> None:
    table = b"".join(struct.pack("<IQIQQ", key_length % 2**32, key_offset, data_type % 2**32, data_length, start)
                     for key_length, key_offset, data_type, data_length, start in fields[:count])
    raw = struct.pack("<4sHHIIQQII", b"KAST", 1, 0, 0, count, 40, data_offset, 0, 0) + table + tail
    for load in (lambda: kast.loads(raw), lambda: kast.load(io.BytesIO(raw), read_all=True)):
        try:
            with load() as store:
                for key in store:
                    store[key].sum()
        except FormatError:
            pass
