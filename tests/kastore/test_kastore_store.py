"""The Store returned by load: read-only Mapping, info, closing, zero-copy maps."""

from __future__ import annotations

import gc
import io
import mmap
import os
import tracemalloc
from collections.abc import Mapping

import numpy as np
import pytest

import arrayio
import arrayio.kastore as kastore
from kastore_cases import all_types


@pytest.fixture
def store_path(tmp_path):
    path = tmp_path / "store.kas"
    kastore.dump(all_types(5), path)
    return path


def _open(kind, path):
    if kind == "path":
        return kastore.load(path)
    if kind == "read_all":
        return kastore.load(path, read_all=True)
    if kind == "loads":
        return kastore.loads(path.read_bytes())
    return kastore.load(io.BytesIO(path.read_bytes()))


KINDS = ["path", "read_all", "loads", "bytesio"]


@pytest.mark.parametrize("kind", KINDS)
def test_mapping_in_file_order(store_path, kind):
    with _open(kind, store_path) as store:
        assert isinstance(store, Mapping)
        assert isinstance(store, kastore.Store)
        assert list(store) == sorted(all_types(5))
        assert len(store) == 10
        assert "int8" in store and "nope" not in store
        assert list(store.keys()) == list(store)
        for key, value in store.items():
            np.testing.assert_array_equal(value, all_types(5)[key])
        with pytest.raises(KeyError):
            store["nope"]
        assert store.get("nope") is None


@pytest.mark.parametrize("kind", KINDS)
def test_info(store_path, kind):
    with _open(kind, store_path) as store:
        for name in all_types(5):
            info = store.info(name)
            assert isinstance(info, kastore.ValueInfo)
            assert info.dtype == np.dtype(name)
            assert tuple(info.shape) == (5,)
            assert info.size == 5 * np.dtype(name).itemsize
            assert info == (info.dtype, info.shape, info.size)
        with pytest.raises(KeyError):
            store.info("nope")


@pytest.mark.parametrize("kind", KINDS)
def test_arrays_are_read_only(store_path, kind):
    with _open(kind, store_path) as store:
        for key in store:
            array = store[key]
            assert not array.flags.writeable
            with pytest.raises(ValueError):
                array[:1] = 1
            with pytest.raises(ValueError):
                array.setflags(write=True)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("how", ["context", "close"])
def test_access_after_close(store_path, kind, how):
    store = _open(kind, store_path)
    kept = store["float64"]
    if how == "context":
        with store:
            pass
    else:
        store.close()
        store.close()  # idempotent
    assert store.closed
    for action in (lambda: store["int8"], lambda: store["float64"], lambda: store.info("int8"),
                   lambda: list(store.keys()), lambda: list(store.items()), lambda: list(store.values()),
                   lambda: len(store), lambda: list(store), lambda: "int8" in store):
        with pytest.raises(kastore.StoreClosedError):
            action()
    assert issubclass(kastore.StoreClosedError, kastore.KastoreException)
    assert issubclass(kastore.StoreClosedError, arrayio.ArrayIOError)
    gc.collect()
    np.testing.assert_array_equal(kept, np.arange(5, dtype=np.float64))
    assert "closed" in repr(store)


def test_exception_hierarchy():
    for name in ("FileFormatError", "VersionTooOldError", "VersionTooNewError", "StoreClosedError"):
        assert issubclass(getattr(kastore, name), kastore.KastoreException)
    assert issubclass(kastore.FileFormatError, arrayio.FormatError)
    assert issubclass(kastore.FileFormatError, ValueError)
    assert issubclass(kastore.VersionTooOldError, arrayio.errors.VersionTooOldError)
    assert issubclass(kastore.VersionTooNewError, arrayio.errors.VersionTooNewError)


def test_loads_garbage_is_a_format_error():
    with pytest.raises(kastore.FileFormatError):
        kastore.loads(b"x" * 1024)


def test_path_load_is_a_memory_map(store_path):
    with kastore.load(store_path) as store:
        array = store["int64"]
        base = array.base
        while base is not None and not isinstance(base, mmap.mmap):
            base = getattr(base, "obj", None) if isinstance(base, memoryview) else getattr(base, "base", None)
        assert isinstance(base, mmap.mmap)


def test_arrays_survive_close_of_a_map(store_path):
    store = kastore.load(store_path)
    arrays = {key: store[key] for key in store}
    store.close()
    del store
    gc.collect()
    for key, value in all_types(5).items():
        np.testing.assert_array_equal(arrays[key], value)


def test_large_file_loads_without_copying(tmp_path):
    path = tmp_path / "big.kas"
    size = 25_000_000  # 200 MB of float64
    data = {"big": np.zeros(size), "small": np.arange(3, dtype=np.int8)}
    kastore.dump(data, path)
    del data
    gc.collect()
    tracemalloc.start()
    try:
        with kastore.load(path) as store:
            big = store["big"]
            assert big.size == size
            assert float(big[-1]) == 0.0
            assert store["small"].tolist() == [0, 1, 2]
            _, peak = tracemalloc.get_traced_memory()
            del big
    finally:
        tracemalloc.stop()
    assert peak < 5 * 2**20, peak
    assert os.path.getsize(path) > 200_000_000


def test_read_all_keeps_no_file_open(store_path):
    fd_folder = f"/proc/{os.getpid()}/fd"
    before = set(os.listdir(fd_folder))
    store = kastore.load(store_path, read_all=True)
    after = set(os.listdir(fd_folder))
    opened = [os.readlink(f"{fd_folder}/{fd}") for fd in after - before
              if os.path.exists(f"{fd_folder}/{fd}")]
    assert str(store_path) not in opened
    os.unlink(store_path)
    np.testing.assert_array_equal(store["uint16"], np.arange(5, dtype=np.uint16))
    store.close()


def test_closing_releases_the_file(store_path):
    fd_folder = f"/proc/{os.getpid()}/fd"
    before = set(os.listdir(fd_folder))
    for _ in range(20):
        with kastore.load(store_path) as store:
            assert store["int8"].tolist() == list(range(5))
    gc.collect()
    assert len(set(os.listdir(fd_folder)) - before) == 0


def test_lazy_load_of_a_file_object_leaves_it_open(store_path):
    with open(store_path, "rb") as handle:
        with kastore.load(handle) as store:
            assert len(store) == 10
        assert not handle.closed
    fd = os.open(store_path, os.O_RDONLY)
    with kastore.load(fd) as store:
        assert len(store) == 10
    os.fstat(fd)  # still open
    os.close(fd)


@pytest.mark.parametrize("target", [None, {}, [], 1.5])
def test_load_bad_argument_types(target):
    with pytest.raises(TypeError):
        kastore.load(target)


def test_load_bad_fds():
    with pytest.raises(ValueError):
        kastore.load(-1)
    with pytest.raises(OSError):
        kastore.load(10_000)


def test_load_write_only_file_is_an_os_error(tmp_path):
    path = tmp_path / "w.kas"
    kastore.dump({"a": np.arange(2)}, path)
    with open(path, "wb") as handle:
        with pytest.raises(OSError):
            kastore.load(handle, read_all=True)


def test_round_trip_load_dump_load(store_path, tmp_path):
    other = tmp_path / "copy.kas"
    with kastore.load(store_path) as store:
        kastore.dump(store, other)
    assert other.read_bytes() == store_path.read_bytes()


def test_dump_over_the_file_being_read(store_path):
    with kastore.load(store_path) as store:
        kastore.dump(store, store_path)
        np.testing.assert_array_equal(store["int32"], np.arange(5, dtype=np.int32))
    with kastore.load(store_path) as store:
        assert len(store) == 10


def test_registry_opens_and_detects(store_path):
    assert arrayio.detect(store_path) == "kastore"
    assert arrayio.detect(store_path.read_bytes()) == "kastore"
    with arrayio.open(store_path) as store:
        assert len(store) == 10
    facts = arrayio.info(store_path)
    assert facts["num_keys"] == 10
    assert facts["file_size"] == os.path.getsize(store_path)
    assert arrayio.validate(store_path) == []


def test_no_descriptor_leaks(tmp_path, store_path):
    fd_folder = f"/proc/{os.getpid()}/fd"
    bad = tmp_path / "bad.kas"
    bad.write_bytes(store_path.read_bytes()[:-1])
    gc.collect()
    before = len(os.listdir(fd_folder))
    kept = []
    for _ in range(10):
        store = kastore.load(store_path)
        kept.append(store["int64"])
        store.close()
        for read_all in (False, True):
            with pytest.raises(kastore.FileFormatError):
                kastore.load(bad, read_all=read_all)
        kastore.validate(store_path)
        kastore.info(store_path)
        list(kastore.open(store_path).cat("int8"))
    del kept, store
    gc.collect()
    assert len(os.listdir(fd_folder)) == before


def test_read_all_holds_the_store_once(tmp_path):
    path = tmp_path / "forty.kas"
    size = 5_000_000  # 40 MB of float64
    kastore.dump({"big": np.ones(size), "small": np.arange(3, dtype=np.int8)}, path)
    gc.collect()
    tracemalloc.start()
    try:
        with kastore.load(path, read_all=True) as store:
            assert float(store["big"].sum()) == size
            _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1.15 * os.path.getsize(path), (peak, os.path.getsize(path))


@pytest.mark.parametrize("byteorder", ["<", ">"])
def test_dump_does_not_copy_big_arrays(tmp_path, byteorder):
    array = np.ones(10_000_000, dtype=f"{byteorder}f8")  # 80 MB
    path = tmp_path / "big.kas"
    gc.collect()
    tracemalloc.start()
    try:
        kastore.dump({"big": array, "small": np.arange(3)}, path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    limit = 8 * 2**20 if byteorder == "<" else 40 * 2**20
    assert peak < limit, peak
    with kastore.load(path) as store:
        assert float(store["big"][-1]) == 1.0
