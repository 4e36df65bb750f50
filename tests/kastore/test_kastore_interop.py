"""Interop with the reference package kastore 0.3.6, both engines, both directions, byte for byte."""

from __future__ import annotations

import io

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import arrayio.kastore as kastore
from kastore_cases import DTYPE_NAMES, all_types, assert_same

reference = pytest.importorskip("kastore")
if reference is kastore:  # pragma: no cover - guards against a shadowed import
    pytest.skip("the reference package is shadowed", allow_module_level=True)

ENGINES = ["python", "c"]
READ_ALL = [False, True]

DATASETS = {
    "empty": {},
    "one_empty_array": {"a": np.array([], dtype=np.float64)},
    "ten_empty_arrays": {f"key_{index}": np.array([], dtype=DTYPE_NAMES[index]) for index in range(10)},
    "ten_keys_mixed": {f"{chr(ord('a') + index) * (index + 1)}": np.arange(index * 3, dtype=DTYPE_NAMES[index])
                       for index in range(10)},
    "unicode_keys": {key: np.arange(3, dtype=np.int16) for key in ["Z", "a", "z", "ä", "é", "\uffff", "😀", "a\x00"]},
    **{f"all_types_{n}": all_types(n) for n in range(5)},
}
DATASET_IDS = list(DATASETS)

KEYS = st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc", "Cf", "Co", "Cn")), min_size=1,
               max_size=20)
ARRAYS = st.sampled_from(DTYPE_NAMES).flatmap(
    lambda name: hnp.arrays(np.dtype(name), st.integers(0, 20)))
STORES = st.dictionaries(KEYS, ARRAYS, max_size=8)


def reference_load(raw_or_path, engine, read_all) -> dict:
    if isinstance(raw_or_path, bytes):
        if engine == "c":
            pytest.fail("the C engine needs a real file")
        with reference.load(io.BytesIO(raw_or_path), read_all=read_all, engine=engine) as store:
            return {key: np.array(store[key]) for key in store}
    loaded = reference.load(raw_or_path, read_all=read_all, engine=engine)
    try:
        return {key: np.array(loaded[key]) for key in loaded}
    finally:
        if hasattr(loaded, "close"):
            loaded.close()


def ours_load(path, read_all) -> dict:
    with kastore.load(path, read_all=read_all) as store:
        return {key: np.array(store[key]) for key in store}


@pytest.mark.parametrize("name", DATASET_IDS)
def test_dumps_equal(name):
    data = DATASETS[name]
    assert kastore.dumps(data) == reference.dumps(data)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("name", DATASET_IDS)
def test_reference_dump_files_equal_ours(tmp_path, name, engine):
    data = DATASETS[name]
    theirs, ours = tmp_path / "theirs.kas", tmp_path / "ours.kas"
    reference.dump(dict(data), theirs, engine=engine)
    kastore.dump(data, ours)
    assert ours.read_bytes() == theirs.read_bytes()


@pytest.mark.parametrize("read_all", READ_ALL)
@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("name", DATASET_IDS)
def test_our_files_load_in_the_reference(tmp_path, name, engine, read_all):
    data = DATASETS[name]
    path = tmp_path / "ours.kas"
    kastore.dump(data, path)
    assert_same(reference_load(path, engine, read_all), data)


@pytest.mark.parametrize("read_all", READ_ALL)
@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("name", DATASET_IDS)
def test_reference_files_load_in_ours(tmp_path, name, engine, read_all):
    data = DATASETS[name]
    path = tmp_path / "theirs.kas"
    reference.dump(dict(data), path, engine=engine)
    assert_same(ours_load(path, read_all), data)


@pytest.mark.parametrize("engine", ENGINES)
def test_concatenated_stores_both_ways(tmp_path, engine):
    payloads = [all_types(n) for n in range(5)]
    ours = tmp_path / "ours.kas"
    with open(ours, "wb") as handle:
        for data in payloads:
            kastore.dump(data, handle)
    with open(ours, "rb") as handle:
        for data in payloads:
            loaded = reference.load(handle, read_all=True, engine=engine)
            assert_same({key: np.array(loaded[key]) for key in loaded}, data)
    theirs = tmp_path / "theirs.kas"
    with open(theirs, "wb") as handle:
        for data in payloads:
            reference.dump(data, handle, engine=engine)
    assert theirs.read_bytes() == ours.read_bytes()
    with open(theirs, "rb") as handle:
        for data in payloads:
            with kastore.load(handle) as store:
                assert_same({key: np.array(store[key]) for key in store}, data)
        with pytest.raises(EOFError):
            kastore.load(handle)


@pytest.mark.parametrize("engine", ENGINES)
def test_big_endian_input_reference_reads_the_right_values(tmp_path, engine):
    little = np.arange(10, dtype=np.int32)
    path = tmp_path / "be.kas"
    kastore.dump({"x": little.astype(">i4")}, path)
    np.testing.assert_array_equal(reference_load(path, engine, True)["x"], little)


def test_more_than_65535_items_load_in_the_reference(tmp_path):
    count = 70_000
    data = {f"k{index:05d}": np.array([index], dtype=np.uint32) for index in range(count)}
    path = tmp_path / "many.kas"
    kastore.dump(data, path)
    loaded = reference.load(path, engine="c")
    assert len(loaded) == count
    assert loaded["k69999"].tolist() == [69999]
    assert loaded["k65536"].tolist() == [65536]


def test_exceptions_mirror_the_reference_names():
    for name in ("KastoreException", "FileFormatError", "VersionTooOldError", "VersionTooNewError",
                 "StoreClosedError"):
        assert hasattr(kastore, name)
        assert hasattr(reference, name)


@pytest.mark.parametrize("name", ["bad_magic_number", "version_0", "version_100", "bad_type_11",
                                  "truncated_file", "bad_array_start_8", "key_len_outside_file"])
def test_same_exception_names_as_the_reference(testdata, name):
    path = testdata / "kastore" / "malformed" / f"{name}.kas"
    with pytest.raises(reference.KastoreException) as theirs:
        reference.load(path, read_all=True)
    with pytest.raises(kastore.KastoreException) as ours:
        kastore.load(path, read_all=True)
    assert type(theirs.value).__name__ in [cls.__name__ for cls in type(ours.value).__mro__]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(STORES)
def test_hypothesis_dumps_equal_and_cross_load(data):
    ours = kastore.dumps(data)
    assert ours == reference.dumps(data)
    with reference.load(io.BytesIO(ours), read_all=True) as store:
        assert_same({key: np.array(store[key]) for key in store}, data)
    with kastore.loads(reference.dumps(data)) as store:
        assert_same({key: np.array(store[key]) for key in store}, data)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(data=STORES)
def test_hypothesis_c_engine_files(tmp_path, data):
    path = tmp_path / "c.kas"
    reference.dump(dict(data), path, engine="c")
    assert path.read_bytes() == kastore.dumps(data)
    assert_same(ours_load(path, False), data)
    kastore.dump(data, path)
    assert_same(reference_load(path, "c", False), data)
