"""The typed metadata codec: hypothesis round trips, byte identity with pycauset, a bad-block corpus."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arrayio import FormatError, TruncatedError, UnsupportedError
from arrayio.pycauset import _codec, decode_metadata, encode_metadata

leaves = (st.booleans() | st.integers(-2**63, 2**64 - 1) | st.floats(allow_nan=False)
          | st.text(max_size=20) | st.binary(max_size=20))
values = st.recursive(leaves, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                                          max_size=4),
                      max_leaves=15)
documents = st.dictionaries(st.text(max_size=12), values, max_size=6)


def same(a, b) -> bool:
    """Equality that also tells bool from int and float from int."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[key], b[key]) for key in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


@settings(max_examples=100, deadline=None)
@given(documents)
def test_round_trip(document):
    assert same(decode_metadata(encode_metadata(document)), document)


@settings(max_examples=40, deadline=None)
@given(documents)
def test_bytes_identical_to_pycauset_encoder(reference, document):
    from pycauset._internal import persistence
    assert encode_metadata(document) == persistence._encode_metadata_top_map(document)
    assert same(persistence._decode_metadata_top_map(encode_metadata(document)), document)


@settings(max_examples=40, deadline=None)
@given(documents, st.data())
def test_every_truncation_is_a_format_error(document, data):
    encoded = encode_metadata(document)
    cut = data.draw(st.integers(0, max(0, len(encoded) - 1)))
    with pytest.raises(FormatError):
        decode_metadata(encoded[:cut])


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=64))
def test_random_bytes_raise_only_format_errors(raw):
    try:
        decode_metadata(b"\x08" + raw)
    except FormatError:
        pass


def test_tags_and_integer_choice():
    encoded = encode_metadata({"n": -1, "p": 2**63, "b": True, "f": 0.5, "s": "é", "y": b"\x00", "a": [], "m": {}})
    assert encoded[:5] == b"\x08" + struct.pack("<I", 8)
    assert decode_metadata(encoded)["p"] == 2**63
    assert b"\x02" + struct.pack("<q", -1) in encoded
    assert b"\x03" + struct.pack("<Q", 2**63) in encoded
    assert list(decode_metadata(encoded)) == sorted(["n", "p", "b", "f", "s", "y", "a", "m"])


def test_duplicate_keys_last_wins():
    entry = lambda value: struct.pack("<H", 1) + b"k" + b"\x03" + struct.pack("<Q", value)
    assert decode_metadata(b"\x08" + struct.pack("<I", 2) + entry(1) + entry(2)) == {"k": 2}


def nested(depth: int) -> bytes:
    # depth Maps, each holding one key "k" whose value is the next Map; the innermost is empty.
    body = b"\x08" + struct.pack("<I", 0)
    for _ in range(depth - 1):
        body = b"\x08" + struct.pack("<I", 1) + struct.pack("<H", 1) + b"k" + body
    return body


def test_depth_limit():
    assert decode_metadata(nested(_codec.MAX_DEPTH)) is not None
    with pytest.raises(FormatError, match="nesting depth"):
        decode_metadata(nested(_codec.MAX_DEPTH + 1))


def test_deep_arrays_are_a_format_error_not_recursion():
    hostile = b"\x08" + struct.pack("<I", 1) + struct.pack("<H", 1) + b"k" + (b"\x07" + struct.pack("<I", 1)) * 5000
    with pytest.raises(FormatError):
        decode_metadata(hostile)


def test_entry_limit(monkeypatch):
    monkeypatch.setattr(_codec, "MAX_ENTRIES", 10)
    ok = encode_metadata({"a": [True] * 9})
    decode_metadata(ok)
    with pytest.raises(FormatError, match="at most 10 values"):
        decode_metadata(encode_metadata({"a": [True] * 10}))


def test_encoder_depth_limit():
    value: object = []
    for _ in range(_codec.MAX_DEPTH):
        value = [value]
    with pytest.raises(UnsupportedError):
        encode_metadata({"x": value})


HEADER = b"\x08" + struct.pack("<I", 1) + struct.pack("<H", 1) + b"k"
BAD_BLOCKS = {
    "empty": b"",
    "top level not a map": b"\x07" + struct.pack("<I", 0),
    "unknown tag": HEADER + b"\x09",
    "tag zero": HEADER + b"\x00",
    "trailing bytes": encode_metadata({}) + b"\x00",
    "bool 2": HEADER + b"\x01\x02",
    "huge array count": HEADER + b"\x07" + struct.pack("<I", 2**32 - 1),
    "huge map count": b"\x08" + struct.pack("<I", 2**32 - 1),
    "huge string": HEADER + b"\x05" + struct.pack("<I", 2**32 - 1) + b"abc",
    "string over limit": HEADER + b"\x05" + struct.pack("<I", _codec.MAX_STRING_BYTES + 1),
    "huge bytes": HEADER + b"\x06" + struct.pack("<I", 2**31) + b"abc",
    "huge key": b"\x08" + struct.pack("<I", 1) + struct.pack("<H", 65535) + b"k",
    "bad utf8 key": b"\x08" + struct.pack("<I", 1) + struct.pack("<H", 1) + b"\xff\x01\x00",
    "bad utf8 string": HEADER + b"\x05" + struct.pack("<I", 2) + b"\xc3\x28",
    "short u64": HEADER + b"\x03\x01\x02",
    "short f64": HEADER + b"\x04" + bytes(7),
    "short key length": b"\x08" + struct.pack("<I", 1) + b"\x01",
}


@pytest.mark.parametrize("name", sorted(BAD_BLOCKS))
def test_bad_block_corpus(name):
    with pytest.raises(FormatError) as caught:
        decode_metadata(BAD_BLOCKS[name], base_offset=4128)
    assert "pycauset" in str(caught.value)
    assert caught.value.offset is None or caught.value.offset >= 4128


def test_truncation_error_names_absolute_offset():
    with pytest.raises(TruncatedError, match="map count at byte 4129"):
        decode_metadata(b"\x08" + struct.pack("<I", 1), base_offset=4128)


@pytest.mark.parametrize("value", [None, 1 + 2j, 2**64, -2**63 - 1, object(), {1: 2}])
def test_unencodable_values(value):
    with pytest.raises(UnsupportedError):
        encode_metadata({"x": value})


def test_numpy_scalars_encode_as_python_values():
    decoded = decode_metadata(encode_metadata({"i": np.int32(-3), "u": np.uint64(7), "f": np.float32(0.5),
                                               "b": np.bool_(True)}))
    assert same(decoded, {"i": -3, "u": 7, "f": 0.5, "b": True})
