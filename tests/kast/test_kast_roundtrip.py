"""Writer bytes (hand-written golden files, layout properties), round trips through every kind of target,
the Store's behaviour, concatenated stores in files, fds, BytesIO and pipes, and what dump refuses."""

from __future__ import annotations

import io
import os
import struct
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import arrayio.kast as kast
from arrayio.errors import FormatError, UnsupportedError
from kast_cases import (DTYPE_NAMES, ENTRY, ENTRY_SIZE, GOLDEN, HEADER, HEADER_SIZE, TYPE_CODES, build,
                        golden_bytes)

GOLDEN_DATA = {
    "empty": {},
    "one_key": {"a": np.array([1, 2, 3], dtype=np.int32)},
    "mixed": {"z": np.array([], dtype=np.int16), "y": np.array([1, 2, 3], dtype=np.uint8),
              "\u00e9": np.array([2**64 - 1], dtype=np.uint64), "x": np.array([0.5, -1.0])},
}

KEYS = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), min_size=1)
ARRAYS = st.sampled_from(DTYPE_NAMES).flatmap(
    lambda name: st.lists(st.binary(min_size=np.dtype(name).itemsize, max_size=np.dtype(name).itemsize),
                          max_size=20).map(lambda raw, name=name: np.frombuffer(b"".join(raw), dtype=name)))
DATA = st.dictionaries(KEYS, ARRAYS, max_size=12)


def assert_same(store, data: dict) -> None:
    """Same keys, dtypes and bit patterns (NaNs included)."""
    assert sorted(store) == sorted(data)
    for key, value in data.items():
        value = np.asarray(value)
        assert store[key].dtype == value.dtype.newbyteorder("=")
        assert store[key].tobytes() == value.astype(value.dtype.newbyteorder("<")).tobytes()


def check_layout(raw: bytes, data: dict) -> None:
    """The pinned layout, field by field, read with struct."""
    magic, major, minor, flags, count, table_offset, data_offset, reserved, padding = HEADER.unpack_from(raw)
    assert (magic, major, minor, flags, count, table_offset, reserved, padding) == (b"KAST", 1, 0, 0, len(data),
                                                                                    40, 0, 0)
    encoded = sorted(key.encode() for key in data)
    key_position = HEADER_SIZE + ENTRY_SIZE * count
    keys_end = key_position + sum(len(key) + 1 for key in encoded)
    assert data_offset == -(-keys_end // 8) * 8
    assert raw[keys_end:data_offset] == bytes(data_offset - keys_end)
    array_end = data_offset
    for index, key in enumerate(encoded):
        key_length, key_offset, data_type, data_length, start = ENTRY.unpack_from(raw, HEADER_SIZE + ENTRY_SIZE * index)
        value = np.asarray(data[key.decode()])
        assert (key_length, key_offset) == (len(key), key_position)
        assert raw[key_offset:key_offset + key_length + 1] == key + b"\0"
        key_position += key_length + 1
        assert data_type == TYPE_CODES[value.dtype.name] and data_length == value.size
        assert start == -(-array_end // 8) * 8
        assert raw[array_end:start] == bytes(start - array_end)
        array_end = start + value.nbytes
    assert len(raw) == array_end


@pytest.mark.parametrize("name", sorted(GOLDEN_DATA))
def test_writer_matches_the_hand_written_golden_files(name: str) -> None:
    expected = golden_bytes(name)
    assert (GOLDEN / f"{name}.kast").read_bytes() == expected
    assert kast.dumps(GOLDEN_DATA[name]) == expected
    assert kast.dumps(dict(reversed(list(GOLDEN_DATA[name].items())))) == expected
    check_layout(expected, GOLDEN_DATA[name])


@pytest.mark.parametrize("name", sorted(GOLDEN_DATA))
def test_golden_files_load(name: str) -> None:
    with kast.load(GOLDEN / f"{name}.kast") as store:
        assert_same(store, GOLDEN_DATA[name])
        assert store.file_size == len(golden_bytes(name))
        assert store.source.is_mapped or not GOLDEN_DATA[name]


@settings(max_examples=80, deadline=None)
@given(DATA)
def test_hypothesis_round_trip_and_layout(data: dict) -> None:
    raw = kast.dumps(data)
    check_layout(raw, data)
    assert_same(kast.loads(raw), data)
    assert_same(kast.load(io.BytesIO(raw), read_all=True), data)


@settings(max_examples=30, deadline=None)
@given(data=DATA)
def test_hypothesis_round_trip_through_a_file(data: dict, tmp_path_factory) -> None:
    path = tmp_path_factory.mktemp("rt") / "data.kast"
    kast.dump(data, path)
    with kast.load(path) as store:
        assert_same(store, data)


@pytest.mark.parametrize("count", range(10))
def test_all_dtypes_of_every_length(count: int) -> None:
    data = {name: np.arange(count, dtype=name) for name in DTYPE_NAMES}
    raw = kast.dumps(data)
    check_layout(raw, data)
    assert_same(kast.loads(raw), data)


def test_path_loads_are_zero_copy_and_read_only(tmp_path) -> None:
    path = tmp_path / "big.kast"
    kast.dump({"a": np.arange(1000, dtype=np.float64), "b": np.arange(7, dtype=np.int8)}, path)
    with kast.load(path) as store:
        assert store.source.is_mapped
        array = store["a"]
        assert not array.flags.writeable
        assert store["a"] is array  # made once, then cached
        assert store.info("a") == kast.ValueInfo(np.dtype(np.float64), (1000,), 8000)
        assert store.extent("b")[1] == 7
    assert array.sum() == sum(range(1000))  # arrays handed out outlive the store


def test_closed_store_raises_store_closed_error() -> None:
    store = kast.loads(golden_bytes("mixed"))
    with store:
        assert "x" in store and len(store) == 4
    assert store.closed and "closed" in repr(store)
    for action in (lambda: store["x"], lambda: list(store), lambda: len(store), lambda: store.info("x"),
                   lambda: "x" in store):
        with pytest.raises(kast.StoreClosedError):
            action()
    with pytest.raises(KeyError):
        kast.loads(golden_bytes("mixed"))["missing"]


def test_targets_fd_file_object_and_bytesio(tmp_path) -> None:
    data = GOLDEN_DATA["mixed"]
    raw = golden_bytes("mixed")
    path = tmp_path / "fd.kast"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        kast.dump(data, fd)
    finally:
        os.close(fd)
    assert path.read_bytes() == raw
    with open(path, "wb") as handle:
        kast.dump(data, handle)
    assert path.read_bytes() == raw
    buffer = io.BytesIO()
    kast.dump(data, buffer)
    assert buffer.getvalue() == raw
    fd = os.open(path, os.O_RDONLY)
    try:
        assert_same(kast.load(fd), data)
        assert os.lseek(fd, 0, os.SEEK_CUR) == len(raw)
    finally:
        os.close(fd)
    with open(path, "rb") as handle:
        assert_same(kast.load(handle, read_all=True), data)
        assert handle.tell() == len(raw)


def test_concatenated_stores_in_a_file(tmp_path) -> None:
    stores = [{f"k{index}": np.arange(index, dtype=DTYPE_NAMES[index % 10])} for index in range(10)] + [{}]
    path = tmp_path / "many.kast"
    with open(path, "wb") as handle:
        for data in stores:
            kast.dump(data, handle)
    for read_all in (False, True):
        with open(path, "rb") as handle:
            for data in stores:
                assert_same(kast.load(handle, read_all=read_all), data)
            with pytest.raises(EOFError):
                kast.load(handle, read_all=read_all)
    fd = os.open(path, os.O_RDONLY)
    try:
        for data in stores:
            assert_same(kast.load(fd), data)
        with pytest.raises(EOFError):
            kast.load(fd)
    finally:
        os.close(fd)


def test_concatenated_stores_through_a_pipe() -> None:
    stores = [{"x": np.full(50_000, index, dtype=np.int64), "y": np.arange(index, dtype=np.uint8)}
              for index in range(5)]
    read_fd, write_fd = os.pipe()

    def produce() -> None:
        with os.fdopen(write_fd, "wb") as stream:
            for data in stores:
                kast.dump(data, stream)

    producer = threading.Thread(target=produce)
    producer.start()
    try:
        with os.fdopen(read_fd, "rb") as stream:
            for data in stores:
                assert_same(kast.load(stream), data)
            with pytest.raises(EOFError):
                kast.load(stream)
    finally:
        producer.join()


def test_bytesio_with_concatenated_stores_and_loads_takes_the_first() -> None:
    raw = golden_bytes("one_key") + golden_bytes("mixed") + golden_bytes("empty")
    stream = io.BytesIO(raw)
    assert list(kast.load(stream)) == ["a"]
    assert list(kast.load(stream)) == ["x", "y", "z", "\u00e9"]
    assert list(kast.load(stream)) == []
    with pytest.raises(kast.NoStoreError):
        kast.load(stream)
    assert list(kast.loads(raw)) == ["a"]


def test_big_endian_and_strided_input_is_written_little_endian() -> None:
    data = {"be": np.arange(5, dtype=">i4"), "strided": np.arange(10, dtype=np.float32)[::2],
            "big": np.arange(20_000, dtype=">f8")}
    raw = kast.dumps(data)
    check_layout(raw, {key: value.astype(value.dtype.newbyteorder("<")) for key, value in data.items()})
    assert_same(kast.loads(raw), data)


def test_other_key_encodings_round_trip() -> None:
    data = {"gr\u00fc\u00df": np.arange(3, dtype=np.int8)}
    raw = kast.dumps(data, key_encoding="latin-1")
    assert b"gr\xfc\xdf\x00" in raw
    assert list(kast.loads(raw, key_encoding="latin-1")) == ["gr\u00fc\u00df"]
    with pytest.raises(FormatError, match="item 0 key at byte 74: expected a utf-8 key"):
        kast.loads(raw)


def test_many_keys() -> None:
    data = {f"key{index:06d}": np.arange(index % 4, dtype=np.int32) for index in range(20_000)}
    raw = kast.dumps(data)
    with kast.loads(raw) as store:
        assert len(store) == 20_000 and store["key000003"].tolist() == [0, 1, 2]


@pytest.mark.parametrize("data, error, text", [
    ({"a\0b": np.zeros(1)}, UnsupportedError, "contains a NUL byte"),
    ({"": np.zeros(1)}, ValueError, "empty keys"),
    ({"a": np.zeros((2, 2))}, ValueError, "1-D"),
    ({"a": np.zeros(2, dtype=bool)}, UnsupportedError, "unsupported dtype"),
    ({"a": np.zeros(2, dtype=np.float16)}, UnsupportedError, "unsupported dtype"),
    ({"a": np.zeros(2, dtype=np.complex64)}, UnsupportedError, "unsupported dtype"),
    ({b"a": np.zeros(2)}, TypeError, "keys must be str"),
    ({1: np.zeros(2)}, TypeError, "keys must be str"),
    ([("a", np.zeros(2))], TypeError, "mapping"),
    ({"a": lambda: 0}, ValueError, "1-D"),
])
def test_dump_refuses_what_kast_cannot_hold(data, error: type, text: str, tmp_path) -> None:
    with pytest.raises(error, match=text):
        kast.dumps(data)
    path = tmp_path / "refused.kast"
    with pytest.raises(error):
        kast.dump(data, path)
    assert not path.exists() and list(tmp_path.iterdir()) == []


def test_dump_keeps_an_existing_file_when_it_fails(tmp_path) -> None:
    path = tmp_path / "keep.kast"
    path.write_bytes(golden_bytes("one_key"))
    with pytest.raises(UnsupportedError):
        kast.dump({"a": np.zeros(1), "b": np.zeros(1, dtype=bool)}, path)
    assert path.read_bytes() == golden_bytes("one_key")


def test_bad_targets() -> None:
    with pytest.raises(ValueError, match="invalid file descriptor"):
        kast.dump({}, -1)
    with pytest.raises(TypeError):
        kast.dump({}, None)
    with pytest.raises(TypeError):
        kast.load(None)
    with pytest.raises(FileNotFoundError):
        kast.load("/nonexistent/x.kast")


def test_kast_is_never_read_as_kastore_and_back() -> None:
    import arrayio.kastore as kastore

    with pytest.raises(FormatError, match="header.magic"):
        kastore.loads(golden_bytes("one_key"))
    with pytest.raises(FormatError, match="kast: header.magic at byte 0"):
        kast.loads(kastore.dumps({"a": np.zeros(1)}))


def test_a_kastore_store_dumps_as_kast() -> None:
    import arrayio.kastore as kastore

    with kastore.loads(kastore.dumps(GOLDEN_DATA["mixed"])) as store:
        assert kast.dumps(store) == golden_bytes("mixed")


def test_header_struct_matches_the_layout() -> None:
    assert HEADER.size == 40 and ENTRY.size == 32
    assert struct.calcsize("<4sHHIIQQII") == 40
    assert build([]) == golden_bytes("empty")
