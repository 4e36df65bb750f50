"""Code written for PyPI kastore 0.3.6 keeps working: signatures, ValueInfo, and the builtin
exception classes kastore raises for user errors."""

from __future__ import annotations

import inspect
import io

import kastore as reference
import numpy as np
import pytest

import arrayio
import arrayio.kastore as kastore


@pytest.mark.parametrize("name", ["load", "loads", "dump", "dumps"])
def test_signatures_match_the_reference(name):
    ours = inspect.signature(getattr(kastore, name))
    theirs = inspect.signature(getattr(reference, name))
    # kastore's parameters in kastore's order; ours may add optional ones after them (storage_options)
    assert list(ours.parameters)[:len(theirs.parameters)] == list(theirs.parameters)
    for parameter in theirs.parameters.values():
        assert ours.parameters[parameter.name].default == parameter.default
    for extra in list(ours.parameters.values())[len(theirs.parameters):]:
        assert extra.default is not inspect.Parameter.empty


def test_value_info_as_in_kastore():
    data = reference.dumps({"a": np.zeros(3), "b": np.arange(4, dtype=np.int32)})
    for module in (kastore, reference):
        with module.loads(data) as store:
            info = store.info("b")
            assert info.dtype == "int32" and isinstance(info.dtype, str)
            assert "{:<8}".format(info.dtype) == "int32   "
            assert str(info) == "dtype=int32 shape=(4,), size=16"
    assert kastore.__version__ == reference.__version__


@pytest.mark.parametrize("value", [np.zeros(2, complex), np.zeros(2, bool), np.array(["x"])])
def test_unsupported_dtype_is_a_key_error_as_in_kastore(value):
    with pytest.raises(KeyError):
        reference.dumps({"a": value})
    with pytest.raises(KeyError) as caught:
        kastore.dumps({"a": value})
    assert isinstance(caught.value, arrayio.UnsupportedError)
    assert str(caught.value).startswith("kastore: key 'a': unsupported dtype")


def test_undecodable_key_is_a_unicode_decode_error_as_in_kastore():
    raw = reference.dumps({"ab": np.zeros(2)}).replace(b"ab", b"\xff\xfe")
    with pytest.raises(UnicodeDecodeError):
        reference.loads(raw)
    for load in (lambda: kastore.loads(raw), lambda: kastore.load(io.BytesIO(raw), read_all=True)):
        with pytest.raises(UnicodeDecodeError) as caught:
            load()
        error = caught.value
        assert isinstance(error, kastore.FileFormatError) and isinstance(error, arrayio.FormatError)
        assert error.encoding == "utf-8" and error.offset == 128 and "item 0 key at byte 128" in str(error)


def test_empty_path_and_unknown_engine_as_in_kastore(tmp_path):
    for module in (kastore, reference):
        with pytest.raises(FileNotFoundError):
            module.load("")
        with pytest.raises(ValueError, match="unknown engine"):
            module.dump({"a": np.zeros(1)}, tmp_path / "x.kas", engine="rust")
    assert not (tmp_path / "x.kas").exists()
