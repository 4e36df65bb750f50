"""The metadata section of a bloscpack file: its header checked, the JSON read, the numpy layout taken from it."""

from __future__ import annotations

import ast
import json
import zlib
from typing import Any, Literal

import numpy as np

from .._binary import Source
from ._errors import ERRORS
from ._records import CHECKSUMS, METADATA_CODECS, METADATA_HEADER, Checksum

__all__ = ["MetadataSection", "numpy_layout", "read_metadata"]

_JSON_MAGIC = b"JSON".ljust(8, b"\0")


class MetadataSection:
    """The parsed metadata section: its header, the decoded JSON and where it lies."""

    def __init__(self, header: Any, value: Any, offset: int, length: int) -> None:
        self.header = header
        self.value = value
        self.offset = offset
        self.length = length

    @property
    def checksum(self) -> Checksum:
        """The checksum of the stored metadata bytes."""
        return CHECKSUMS[self.header.meta_checksum]


def read_metadata(source: Source, offset: int) -> MetadataSection:
    """The metadata section at ``offset``, checked field by field and against its digest."""
    header = METADATA_HEADER.read(source, offset)

    def field_offset(field: str) -> int:
        return METADATA_HEADER.offset_of(field, base=offset)

    if header.magic_format != _JSON_MAGIC:
        raise ERRORS.invalid("metadata header.magic_format", field_offset("magic_format"),
                             _JSON_MAGIC, header.magic_format)
    if header.meta_checksum >= len(CHECKSUMS):
        raise ERRORS.invalid("metadata header.meta_checksum", field_offset("meta_checksum"),
                             f"a checksum id 0..{len(CHECKSUMS) - 1}", header.meta_checksum)
    if header.meta_codec >= len(METADATA_CODECS):
        raise ERRORS.invalid("metadata header.meta_codec", field_offset("meta_codec"),
                             "0 (None) or 1 (zlib)", header.meta_codec)
    if header.meta_comp_size > header.max_meta_size:
        raise ERRORS.invalid("metadata header.meta_comp_size", field_offset("meta_comp_size"),
                             f"at most max_meta_size ({header.max_meta_size})", header.meta_comp_size)
    checksum = CHECKSUMS[header.meta_checksum]
    data_offset = offset + METADATA_HEADER.size
    length = METADATA_HEADER.size + header.max_meta_size + checksum.size
    source.check(offset, length, "metadata section")
    stored = source.view(data_offset, header.meta_comp_size, "metadata")
    digest_offset = data_offset + header.max_meta_size
    if checksum.size:
        digest = source.view(digest_offset, checksum.size, "metadata digest")
        computed = checksum(stored)
        if bytes(digest) != computed:
            raise ERRORS.checksum_mismatch(f"metadata {checksum.name} digest", digest_offset,
                                           expected=bytes(digest), found=computed)
    if METADATA_CODECS[header.meta_codec] == "zlib":
        inflater = zlib.decompressobj()
        try:
            text = inflater.decompress(stored, header.meta_size) + inflater.flush()
        except zlib.error as error:
            raise ERRORS.invalid("metadata", data_offset, "a zlib stream", str(error)) from None
        if not inflater.eof or len(text) != header.meta_size:
            raise ERRORS.invalid("metadata", data_offset,
                                 f"a zlib stream of exactly meta_size ({header.meta_size}) bytes",
                                 "a longer stream" if not inflater.eof else f"{len(text)} bytes")
    else:
        text = bytes(stored)
        if len(text) != header.meta_size:
            raise ERRORS.invalid("metadata header.meta_comp_size", field_offset("meta_comp_size"),
                                 f"meta_size ({header.meta_size}) for uncompressed metadata", len(text))
    try:
        value = json.loads(text.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as error:
        raise ERRORS.invalid("metadata", data_offset, "UTF-8 JSON", f"{type(error).__name__}: {error}") from None
    return MetadataSection(header, value, offset, length)


def _literal(text: str) -> Any:
    # bloscpack >= 0.7.2 stores repr(dtype.str) or repr(dtype.descr); older files the plain value
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return text


def _as_tuples(descr: Any) -> Any:
    # JSON turns the tuples of a pre-0.7.2 structured descr into lists; numpy wants tuples
    if isinstance(descr, list):
        if descr and isinstance(descr[0], list):
            return [_as_tuples(item) for item in descr]
        return tuple(_as_tuples(item) for item in descr)
    return descr


def numpy_layout(metadata: MetadataSection) -> tuple[np.dtype, tuple[int, ...], Literal["C", "F"]]:
    """dtype, shape and order of an ndarray file, from its metadata."""
    value = metadata.value
    where = metadata.offset + METADATA_HEADER.size
    for key in ("dtype", "shape", "order"):
        if key not in value:
            raise ERRORS.invalid(f"metadata[{key!r}]", where, f"a {key!r} entry for container 'numpy'", "none")
    stored = value["dtype"]
    description = _literal(stored) if isinstance(stored, str) else _as_tuples(stored)
    try:
        dtype = np.dtype(description)
    except Exception as error:  # numpy raises many types for a bad description
        raise ERRORS.invalid("metadata['dtype']", where, "a numpy dtype description",
                             f"{stored!r} ({type(error).__name__})") from None
    if dtype.hasobject or dtype.itemsize == 0:
        raise ERRORS.invalid("metadata['dtype']", where, "a dtype of fixed-size items without Python objects",
                             str(dtype))
    shape = value["shape"]
    if not isinstance(shape, list) or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0
                                              for n in shape):
        raise ERRORS.invalid("metadata['shape']", where, "a list of non-negative integers", shape)
    if len(shape) > 64:
        raise ERRORS.invalid("metadata['shape']", where, "at most 64 dimensions", len(shape))
    order = value["order"]
    if order not in ("C", "F"):
        raise ERRORS.invalid("metadata['order']", where, "'C' or 'F'", order)
    return dtype, tuple(shape), order
