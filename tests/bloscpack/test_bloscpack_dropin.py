"""Code written for bloscpack 0.16.0 keeps working: the deprecated names, the args objects."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import arrayio.bloscpack as bp

ARRAY = np.arange(10_000, dtype=np.int32)


@pytest.mark.parametrize("old, new", [("pack_ndarray_str", "pack_ndarray_to_bytes")])
def test_deprecated_pack_names_warn_and_write_the_reference_bytes(reference, old, new):
    with pytest.warns(DeprecationWarning, match=old):
        ours = getattr(bp, old)(ARRAY)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        theirs = getattr(reference, old)(ARRAY)
    assert ours == theirs == getattr(bp, new)(ARRAY)
    with pytest.warns(DeprecationWarning, match="unpack_ndarray_str"):
        assert np.array_equal(bp.unpack_ndarray_str(ours), ARRAY)


def test_deprecated_file_names(tmp_path):
    path = tmp_path / "a.blp"
    raw = tmp_path / "raw.bin"
    raw.write_bytes(b"abc" * 1000)
    with pytest.warns(DeprecationWarning):
        bp.pack_ndarray_file(ARRAY, path)
    with pytest.warns(DeprecationWarning):
        assert np.array_equal(bp.unpack_ndarray_file(path), ARRAY)
    with pytest.warns(DeprecationWarning):
        bp.pack_bytes_file(b"xyz", path)
    with pytest.warns(DeprecationWarning):
        assert bp.unpack_bytes_file(path) == (b"xyz", None)
    with pytest.warns(DeprecationWarning):
        bp.pack_file(raw, path)
    with pytest.warns(DeprecationWarning):
        bp.unpack_file(path, tmp_path / "back.bin")
    assert (tmp_path / "back.bin").read_bytes() == raw.read_bytes()


@pytest.mark.parametrize("name", ["BloscArgs", "BloscpackArgs", "MetadataArgs"])
def test_args_objects_print_and_copy_like_the_reference(reference, name):
    ours, theirs = getattr(bp, name)(), getattr(reference, name)()
    for value in (ours, theirs):
        for key in [key for key in value if callable(value[key])]:
            value[key] = 7  # the size rules are functions, whose reprs name them differently
    assert str(ours) == str(theirs)
    assert ours.pformat() == theirs.pformat() and ours.pformat(2) == theirs.pformat(2)
    copied = ours.copy()
    assert copied == ours and copied is not ours and type(copied) is type(ours)
    first = next(iter(copied))
    copied[first] = ours[first]
    with pytest.raises(TypeError):
        getattr(bp, name)(no_such_key=1)
    with pytest.raises(TypeError):
        getattr(reference, name)(no_such_key=1)


def test_no_checksum_is_the_string_none(reference):
    assert bp.BloscpackArgs(checksum=None).checksum == reference.BloscpackArgs(checksum=None).checksum == "None"
    assert bp.__version__ == reference.__version__
