"""The bytes our writer produces: header, descriptors, keys, arrays (notes §1, upstream test_file_format)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import arrayio.kastore as kastore
from kastore_cases import (DTYPE_NAMES, HEADER_SIZE, ITEM_SIZE, MAGIC, TYPE_CODES, all_types, descriptor, header,
                           load_bytes)

KEYS = st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc", "Cf", "Co", "Cn")), min_size=1)


def sample(n: int) -> dict[str, np.ndarray]:
    """n items with varied dtypes and lengths."""
    return {f"key_{index}": np.arange(index, dtype=DTYPE_NAMES[index % 10]) for index in range(n)}


def check_layout(raw: bytes, data: dict[str, np.ndarray]) -> None:
    """Every structural promise of the canonical layout for ``raw`` written from ``data``."""
    magic, major, minor, num_items, file_size = header(raw)
    assert magic == MAGIC
    assert (major, minor) == (1, 0)
    assert num_items == len(data)
    assert file_size == len(raw)
    assert raw[24:64] == bytes(40)
    encoded = sorted(key.encode("utf-8") for key in data)
    key_position = HEADER_SIZE + ITEM_SIZE * len(data)
    array_position = key_position + sum(len(key) for key in encoded)
    for index, key in enumerate(encoded):
        start = HEADER_SIZE + ITEM_SIZE * index
        type_code, key_start, key_len, array_start, array_len = descriptor(raw, index)
        value = np.asarray(data[key.decode("utf-8")])
        assert type_code == TYPE_CODES[value.dtype.name]
        assert raw[start + 1:start + 8] == bytes(7)
        assert raw[start + 40:start + 64] == bytes(24)
        assert (key_start, key_len) == (key_position, len(key))
        assert raw[key_start:key_start + key_len] == key
        key_position += key_len
        assert array_start % 8 == 0
        assert array_start == -(-array_position // 8) * 8
        assert raw[array_position:array_start] == bytes(array_start - array_position)
        assert array_len == value.size
        stored = np.frombuffer(raw, dtype=value.dtype.newbyteorder("<"), count=array_len, offset=array_start)
        np.testing.assert_array_equal(stored, value)
        array_position = array_start + value.nbytes
    assert array_position == len(raw) if data else len(raw) == HEADER_SIZE


def test_signature():
    assert kastore.dumps({})[:8] == b"\x89KAS\r\n\x1a\n"
    assert len(MAGIC) == 8


def test_zero_items_is_exactly_the_header():
    raw = kastore.dumps({})
    assert len(raw) == 64
    assert header(raw) == (MAGIC, 1, 0, 0, 64)
    assert raw[24:] == bytes(40)


@pytest.mark.parametrize("n", range(10))
def test_header_and_descriptors(n):
    data = sample(n)
    raw = kastore.dumps(data)
    check_layout(raw, data)
    assert_loads = load_bytes(raw, read_all=True)
    assert sorted(assert_loads) == sorted(data)


@pytest.mark.parametrize("n", range(10))
def test_all_types_layout(n):
    data = all_types(n)
    check_layout(kastore.dumps(data), data)


@pytest.mark.parametrize("key", ["a", "aaaaaaa", "aaaaaaaa"])
def test_one_key_offsets(key):
    raw = kastore.dumps({key: np.array([1], dtype=np.int8)})
    _, key_start, key_len, array_start, array_len = descriptor(raw, 0)
    assert (key_start, key_len, array_start, array_len) == (128, len(key), 136, 1)
    assert len(raw) == 137


@pytest.mark.parametrize("dtype", ["int8", "int32", "int64"])
def test_two_one_character_keys_offsets(dtype):
    data = {"a": np.array([1], dtype=dtype), "b": np.array([2], dtype=dtype)}
    raw = kastore.dumps(data)
    first, second = descriptor(raw, 0), descriptor(raw, 1)
    assert (first[1], second[1]) == (192, 193)
    assert (first[3], second[3]) == (200, 208)
    assert len(raw) == 208 + np.dtype(dtype).itemsize


def test_all_types_3_hexdump_facts():
    raw = kastore.dumps(all_types(3))
    assert len(raw) == 907
    assert header(raw) == (MAGIC, 1, 0, 10, 907)
    assert raw[704:760] == b"float32float64int16int32int64int8uint16uint32uint64uint8"
    starts = {name: descriptor(raw, index)[3] for index, name in enumerate(sorted(DTYPE_NAMES))}
    assert starts == {"float32": 760, "float64": 776, "int16": 800, "int32": 808, "int64": 824, "int8": 848,
                      "uint16": 856, "uint32": 864, "uint64": 880, "uint8": 904}
    assert raw[760:776] == bytes.fromhex("00000000 0000803f 00000040 00000000")
    assert raw[904:907] == bytes([0, 1, 2])


def test_keys_sorted_bytewise_not_by_insertion():
    data = {"z": np.zeros(1), "a": np.ones(1), "int8": np.zeros(1, np.int8), "int16": np.zeros(1, np.int16)}
    raw = kastore.dumps(data)
    keys = [raw[descriptor(raw, i)[1]:descriptor(raw, i)[1] + descriptor(raw, i)[2]] for i in range(4)]
    assert keys == [b"a", b"int16", b"int8", b"z"]


def test_unicode_keys_sorted_by_utf8_bytes():
    keys = ["é", "Z", "z", "\uffff", "a", "😀", "ä"]
    raw = kastore.dumps({key: np.zeros(1) for key in keys})
    check_layout(raw, {key: np.zeros(1) for key in keys})
    with kastore.loads(raw) as store:
        assert list(store) == sorted(keys, key=lambda key: key.encode("utf-8"))


def test_several_empty_arrays_share_an_offset():
    data = {f"k{i}": np.array([], dtype=np.int32) for i in range(10)}
    raw = kastore.dumps(data)
    check_layout(raw, data)
    starts = {descriptor(raw, i)[3] for i in range(10)}
    assert len(starts) == 1
    assert len(raw) == starts.pop()


@settings(max_examples=60, deadline=None)
@given(st.sets(KEYS, max_size=12))
def test_random_unicode_keys(keys):
    data = {key: np.arange(len(key), dtype=np.int16) for key in keys}
    raw = kastore.dumps(data)
    check_layout(raw, data)
    with kastore.loads(raw) as store:
        assert list(store) == sorted(keys, key=lambda key: key.encode("utf-8"))
