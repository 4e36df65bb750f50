"""dump/dumps: accepted inputs, clear errors, big-endian input, many keys, atomic writes."""

from __future__ import annotations

import io
import os
import types
from collections import OrderedDict
from collections.abc import Mapping

import numpy as np
import pytest

import arrayio
import arrayio.kastore as kastore
from kastore_cases import DTYPE_NAMES, all_types, assert_same, descriptor, header, load_bytes


class TwiceMapping(Mapping):
    """A Mapping that yields the same key twice (a dict cannot)."""

    def __init__(self, keys, value):
        self._keys = keys
        self._value = value

    def __getitem__(self, key):
        if key not in self._keys:
            raise KeyError(key)
        return self._value

    def __iter__(self):
        return iter(self._keys)

    def __len__(self):
        return len(self._keys)


def roundtrip(data, **kwargs):
    raw = kastore.dumps(data, **kwargs)
    with kastore.loads(raw, **kwargs) as store:
        return raw, {key: np.array(store[key]) for key in store}


@pytest.mark.parametrize("data", [[], "abc", None, 1, 1.5, b"bytes", [("a", np.zeros(1))]],
                         ids=lambda value: type(value).__name__)
def test_non_mapping_data_is_a_type_error(data, tmp_path):
    with pytest.raises(TypeError):
        kastore.dumps(data)
    with pytest.raises(TypeError):
        kastore.dump(data, tmp_path / "x.kas")
    assert not (tmp_path / "x.kas").exists()


@pytest.mark.parametrize("key", [("a",), b"a", None, 1, 1.0], ids=lambda value: type(value).__name__)
def test_non_str_key_is_a_type_error(key):
    with pytest.raises(TypeError):
        kastore.dumps({key: np.zeros(1)})


@pytest.mark.parametrize("target", [[], None, {}, 1.5])
def test_bad_file_argument_is_a_type_error(target):
    with pytest.raises(TypeError):
        kastore.dump({"a": np.zeros(1)}, target)


def test_empty_key_is_a_value_error():
    with pytest.raises(ValueError, match="empty"):
        kastore.dumps({"": np.zeros(1)})
    with pytest.raises(ValueError, match="empty"):
        kastore.dumps({"a": np.zeros(1), "": np.zeros(1)})


@pytest.mark.parametrize("value", [np.array(1), np.zeros((2, 2)), np.zeros((1, 2, 3)), [[1, 2], [3, 4]],
                                   np.zeros((0, 3)), 5, 1.5, "text", None, types, lambda: 1],
                         ids=["0d", "2d", "3d", "nested-list", "0x3", "int", "float", "str", "None", "module",
                              "lambda"])
def test_non_1d_values_are_value_errors(value):
    with pytest.raises(ValueError) as caught:
        kastore.dumps({"the_key": value})
    assert "the_key" in str(caught.value)


@pytest.mark.parametrize("dtype", [np.bool_, np.float16, np.complex64, np.complex128, object, "U3", "S3",
                                   "datetime64[s]", "timedelta64[s]", "V8", np.longdouble])
def test_unsupported_dtypes(dtype):
    value = np.zeros(3, dtype=dtype)
    with pytest.raises(arrayio.UnsupportedError) as caught:
        kastore.dumps({"bad": value})
    assert isinstance(caught.value, ValueError)
    assert "bad" in str(caught.value)
    assert str(np.dtype(dtype)) in str(caught.value) or np.dtype(dtype).name in str(caught.value)


def test_unsupported_dtype_of_a_list():
    with pytest.raises(arrayio.UnsupportedError):
        kastore.dumps({"flags": [True, False]})
    with pytest.raises(arrayio.UnsupportedError):
        kastore.dumps({"words": ["a", "b"]})


def test_lists_are_accepted():
    raw, data = roundtrip({"ints": [1, 2, 3], "floats": [0.5, 1.5], "empty": []})
    assert data["ints"].dtype == np.int64 and data["ints"].tolist() == [1, 2, 3]
    assert data["floats"].dtype == np.float64
    assert data["empty"].dtype == np.float64 and data["empty"].size == 0


def test_other_mappings_are_accepted():
    source = OrderedDict([("b", np.arange(3)), ("a", np.arange(2))])
    expected = kastore.dumps(dict(source))
    assert kastore.dumps(source) == expected
    assert kastore.dumps(types.MappingProxyType(dict(source))) == expected
    with kastore.loads(expected) as store:
        assert kastore.dumps(store) == expected


def test_duplicate_key_from_a_mapping():
    with pytest.raises(ValueError, match="duplicate") as caught:
        kastore.dumps(TwiceMapping(["k", "k"], np.zeros(1)))
    assert "'k'" in str(caught.value)


def test_duplicate_key_after_encoding():
    # Two distinct str keys that encode to the same bytes with a lossy error handler.
    import codecs

    def search(name):
        if name != "lossy_ascii_for_test":
            return None
        return codecs.CodecInfo(lambda text, errors="strict": codecs.ascii_encode(text, "replace"),
                                lambda data, errors="strict": codecs.ascii_decode(data, errors),
                                name="lossy_ascii_for_test")

    codecs.register(search)
    try:
        with pytest.raises(ValueError, match="duplicate"):
            kastore.dumps({"é": np.zeros(1), "ü": np.zeros(1)}, key_encoding="lossy_ascii_for_test")
    finally:
        codecs.unregister(search)


def test_surrogate_key_cannot_be_encoded():
    with pytest.raises((ValueError, UnicodeEncodeError)):
        kastore.dumps({"\ud800": np.zeros(1)})


def test_keys_may_contain_nul_and_be_long():
    data = {"a\x00b": np.arange(2), "k" * (1 << 20): np.arange(3, dtype=np.int8)}
    _, loaded = roundtrip(data)
    assert_same(loaded, data)


@pytest.mark.parametrize("dtype", ["int16", "uint16", "int32", "uint32", "int64", "uint64", "float32", "float64"])
@pytest.mark.parametrize("size", [0, 5, 40000])
def test_big_endian_input_is_stored_little_endian(dtype, size):
    little = np.arange(size, dtype=dtype)
    big = little.astype(np.dtype(dtype).newbyteorder(">"))
    raw = kastore.dumps({"x": big})
    assert raw == kastore.dumps({"x": little})
    _, loaded = roundtrip({"x": big})
    assert loaded["x"].dtype == np.dtype(dtype).newbyteorder("<")
    np.testing.assert_array_equal(loaded["x"], little)


def test_strided_and_sliced_views():
    base = np.arange(100, dtype=np.int32)
    data = {"strided": base[::3], "reversed": base[::-1], "column": np.arange(20.0).reshape(4, 5)[:, 1]}
    raw, loaded = roundtrip(data)
    assert_same(loaded, {key: np.ascontiguousarray(value) for key, value in data.items()})
    assert raw == kastore.dumps({key: value.copy() for key, value in data.items()})


def test_nan_and_inf_round_trip():
    data = {"f4": np.array([np.nan, np.inf, -np.inf, -0.0], np.float32),
            "f8": np.array([np.nan, np.inf, -np.inf, -0.0])}
    _, loaded = roundtrip(data)
    for key in data:
        assert loaded[key].tobytes() == data[key].tobytes()


@pytest.mark.parametrize("n", range(10))
def test_all_types_round_trip(n):
    _, loaded = roundtrip(all_types(n))
    assert_same(loaded, all_types(n))


def test_extreme_values_round_trip():
    data = {name: np.array([np.iinfo(name).min, np.iinfo(name).max], dtype=name) for name in DTYPE_NAMES[:8]}
    data.update({name: np.array([np.finfo(name).min, np.finfo(name).max, np.finfo(name).tiny], dtype=name)
                 for name in DTYPE_NAMES[8:]})
    _, loaded = roundtrip(data)
    assert_same(loaded, data)


def test_hundred_thousand_keys(tmp_path):
    count = 100_000
    data = {f"key_{index:06d}": np.array([index], dtype=np.int32) for index in range(count)}
    path = tmp_path / "many.kas"
    kastore.dump(data, path)
    raw = path.read_bytes()
    assert header(raw)[3] == count
    assert descriptor(raw, count - 1)[1] == 64 + 64 * count + 10 * (count - 1)
    with kastore.load(path) as store:
        assert len(store) == count
        assert list(store)[:2] == ["key_000000", "key_000001"]
        assert store["key_099999"].tolist() == [99999]
        assert store["key_065536"].tolist() == [65536]
    with kastore.load(path, read_all=True) as store:
        assert len(store) == count
        assert store["key_070000"].tolist() == [70000]


def test_key_encoding_round_trip():
    data = {"b": np.arange(2), "a": np.arange(3)}
    raw = kastore.dumps(data, key_encoding="utf-16-le")
    assert raw[64 * 3:64 * 3 + 4] == "a".encode("utf-16-le") + "b".encode("utf-16-le")
    with kastore.loads(raw, key_encoding="utf-16-le") as store:
        assert sorted(store) == ["a", "b"]
        assert store["a"].tolist() == [0, 1, 2]


def test_engine_keyword_as_in_kastore():
    """Both known engines write the same bytes; an unknown one is a ValueError; dumps takes none."""
    data = {"a": np.arange(2)}
    for engine in (kastore.C_ENGINE, kastore.PY_ENGINE):
        buffer = io.BytesIO()
        kastore.dump(data, buffer, engine=engine)
        assert buffer.getvalue() == kastore.dumps(data)
        with kastore.load(io.BytesIO(buffer.getvalue()), engine=engine) as store:
            assert store["a"].tolist() == [0, 1]
    with pytest.raises(ValueError, match="unknown engine"):
        kastore.dump(data, io.BytesIO(), engine="rust")
    with pytest.raises(ValueError, match="unknown engine"):
        kastore.load(io.BytesIO(kastore.dumps(data)), engine="rust")
    with pytest.raises(TypeError):
        kastore.dumps(data, engine="c")


# --------------------------------------------------------------------------- atomic writes

class Exploding(Mapping):
    """Fails while the writer walks its values."""

    def __init__(self, fail_after):
        self._fail_after = fail_after

    def __getitem__(self, key):
        if int(key[1:]) >= self._fail_after:
            raise RuntimeError("boom")
        return np.arange(4)

    def __iter__(self):
        return iter(f"k{index}" for index in range(5))

    def __len__(self):
        return 5


def _leftovers(folder, keep):
    return sorted(name for name in os.listdir(folder) if name not in keep)


def test_failed_dump_leaves_no_file(tmp_path):
    target = tmp_path / "new.kas"
    with pytest.raises(RuntimeError):
        kastore.dump(Exploding(3), target)
    assert os.listdir(tmp_path) == []


def test_failed_dump_keeps_the_old_file(tmp_path):
    target = tmp_path / "old.kas"
    kastore.dump({"old": np.arange(3)}, target)
    before = target.read_bytes()
    with pytest.raises(RuntimeError):
        kastore.dump(Exploding(2), target)
    with pytest.raises(arrayio.UnsupportedError):
        kastore.dump({"a": np.zeros(2), "b": np.zeros(2, dtype=bool)}, target)
    assert target.read_bytes() == before
    assert _leftovers(tmp_path, {"old.kas"}) == []


def test_failure_while_writing_bytes_keeps_the_old_file(tmp_path, monkeypatch):
    target = tmp_path / "old.kas"
    kastore.dump({"old": np.arange(3)}, target)
    before = target.read_bytes()
    calls = {"count": 0}
    real_fsync = os.fsync

    def failing_fsync(fd):
        calls["count"] += 1
        raise OSError(5, "injected I/O error")

    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(OSError):
        kastore.dump({"new": np.arange(10**5)}, target)
    monkeypatch.setattr(os, "fsync", real_fsync)
    assert calls["count"] >= 1
    assert target.read_bytes() == before
    assert _leftovers(tmp_path, {"old.kas"}) == []


def test_dump_replaces_atomically_and_keeps_mode(tmp_path):
    target = tmp_path / "f.kas"
    kastore.dump({"a": np.arange(3)}, target)
    kastore.dump({"b": np.arange(2)}, str(target))
    kastore.dump({"c": np.arange(1)}, os.fsencode(target))
    with kastore.load(target) as store:
        assert list(store) == ["c"]
    mode = os.stat(target).st_mode & 0o777
    umask = os.umask(0)
    os.umask(umask)
    assert mode == 0o666 & ~umask


def test_dump_into_missing_folder_or_onto_a_folder(tmp_path):
    with pytest.raises(FileNotFoundError):
        kastore.dump({"a": np.zeros(1)}, tmp_path / "missing" / "x.kas")
    with pytest.raises(IsADirectoryError):
        kastore.dump({"a": np.zeros(1)}, tmp_path)


def test_load_missing_file_or_folder(tmp_path):
    with pytest.raises(FileNotFoundError):
        kastore.load(tmp_path / "missing.kas")
    with pytest.raises(IsADirectoryError):
        kastore.load(tmp_path)


def test_dumps_then_load_bytes_stream():
    data = {"x": np.arange(10, dtype=np.uint32)}
    assert_same(load_bytes(kastore.dumps(data), read_all=False), data)


# --------------------------------------------------------------------------- paths that are not plain files

def test_dump_onto_a_symlink_replaces_the_link_not_its_target(tmp_path):
    # A link planted at the destination must not redirect the write (issue 19 item 5): rename(2) semantics.
    target = tmp_path / "target.kas"
    link = tmp_path / "link.kas"
    kastore.dump({"old": np.arange(3)}, target)
    link.symlink_to(target.name)
    kastore.dump({"new": np.arange(2)}, link)
    assert not link.is_symlink()
    with kastore.load(target) as store:
        assert list(store) == ["old"]
    with kastore.load(link) as store:
        assert list(store) == ["new"]


def test_dump_keeps_the_mode_of_an_existing_file(tmp_path):
    path = tmp_path / "private.kas"
    kastore.dump({"a": np.arange(3)}, path)
    os.chmod(path, 0o600)
    kastore.dump({"a": np.arange(4)}, path)
    assert os.stat(path).st_mode & 0o777 == 0o600


def test_dump_to_a_fifo_path(tmp_path):
    import stat

    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        kastore.dump({"a": np.arange(3, dtype=np.int8)}, fifo)
        assert stat.S_ISFIFO(os.stat(fifo).st_mode)
        os.set_blocking(reader, True)
        with kastore.load(reader, read_all=True) as store:
            assert store["a"].tolist() == [0, 1, 2]
    finally:
        os.close(reader)


def test_dump_to_a_symlink_to_a_fifo(tmp_path):
    import stat

    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    link = tmp_path / "link.kas"
    link.symlink_to(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        kastore.dump({"a": np.arange(2, dtype=np.int8)}, link)
        assert link.is_symlink() and stat.S_ISFIFO(os.stat(fifo).st_mode)
        os.set_blocking(reader, True)
        with kastore.load(reader, read_all=True) as store:
            assert store["a"].tolist() == [0, 1]
    finally:
        os.close(reader)


def test_dump_onto_a_symlink_into_another_folder_leaves_that_folder_alone(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "links").mkdir()
    target = tmp_path / "data" / "t.kas"
    kastore.dump({"old": np.arange(1)}, target)
    link = tmp_path / "links" / "l.kas"
    link.symlink_to(os.path.join("..", "data", "t.kas"))
    kastore.dump({"new": np.arange(1)}, link)
    assert not link.is_symlink()
    assert sorted(os.listdir(tmp_path / "links")) == ["l.kas"]
    assert sorted(os.listdir(tmp_path / "data")) == ["t.kas"]
    with kastore.load(target) as store:
        assert list(store) == ["old"]


def test_dump_big_endian_strided_large():
    little = np.arange(300_000, dtype=np.int64)
    big = little.astype(">i8")[::3]
    with kastore.loads(kastore.dumps({"x": big})) as store:
        np.testing.assert_array_equal(store["x"], little[::3])
