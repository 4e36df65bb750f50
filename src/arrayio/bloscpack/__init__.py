"""bloscpack (``.blp``, magic ``blpk``, format version 3): one Blosc-compressed array or byte stream.

The functions carry bloscpack 0.16.0's names and arguments, so code ports by changing the
import; ``open`` adds lazy, chunk-wise random access. The registry protocol (``info``,
``validate``, ``entries``, ``demo``; the reader's ``cat``) serves ``arrayio info|validate|ls|cat|demo``.
"""

from __future__ import annotations

from .._registry import FormatSpec
from ._args import (
    DEFAULT_CHUNK_SIZE,
    BloscArgs,
    BloscpackArgs,
    MetadataArgs,
    calculate_nchunks,
)
from ._errors import ERRORS as _ERRORS
from ._errors import (
    ChecksumLengthMismatch,
    ChecksumMismatch,
    ChunkingException,
    ChunkSizeTypeSizeMismatch,
    FileClosedError,
    FileNotFound,
    FormatVersionMismatch,
    MetadataSectionTooSmall,
    NoChangeInMetadata,
    NoMetadataFound,
    NonUniformTypesize,
    NoSuchChecksum,
    NoSuchCodec,
    NoSuchSerializer,
    NotANumpyArray,
    NotEnoughSpace,
    ObjectNumpyArrayRejection,
    OffsetsRequired,
)
from ._map import sections as _sections
from ._protocol import demo, entries, info, open, validate
from ._reader import (
    BloscpackFile,
    unpack_bytes_file,
    unpack_bytes_from_bytes,
    unpack_bytes_from_file,
    unpack_file,
    unpack_file_from_file,
    unpack_ndarray_file,
    unpack_ndarray_from_bytes,
    unpack_ndarray_from_file,
    unpack_ndarray_str,
)
from ._records import (
    CHECKSUM_NAMES,
    EXTENSION,
    FORMAT_NAME,
    FORMAT_VERSION,
    MAGIC,
    decode_blosc_flags,
    double_pretty_size,
    pretty_size,
    reverse_pretty,
)
from ._threads import get_nthreads, set_nthreads
from ._tree import tree as _tree
from ._writer import (
    append,
    pack_bytes_file,
    pack_bytes_to_bytes,
    pack_bytes_to_file,
    pack_file,
    pack_file_to_file,
    pack_ndarray_file,
    pack_ndarray_str,
    pack_ndarray_to_bytes,
    pack_ndarray_to_file,
    rewrite_metadata,
)
from ._writer import save_model as _save

# The bloscpack release whose API this module mirrors (arrayio's own version is arrayio.__version__).
__version__ = "0.16.0"

__all__ = [
    "FORMAT_NAME", "MAGIC", "EXTENSION", "FORMAT_VERSION", "CHECKSUM_NAMES",
    "BloscArgs", "BloscpackArgs", "MetadataArgs", "BloscpackFile", "DEFAULT_CHUNK_SIZE",
    "pack_ndarray_to_file", "unpack_ndarray_from_file", "pack_ndarray_to_bytes", "unpack_ndarray_from_bytes",
    "pack_bytes_to_file", "unpack_bytes_from_file", "pack_bytes_to_bytes", "unpack_bytes_from_bytes",
    "pack_file_to_file", "unpack_file_from_file", "append", "rewrite_metadata",
    "pack_ndarray_file", "pack_ndarray_str", "pack_bytes_file", "pack_file",
    "unpack_ndarray_file", "unpack_ndarray_str", "unpack_bytes_file", "unpack_file",
    "open", "info", "validate", "entries", "demo",
    "calculate_nchunks", "decode_blosc_flags", "pretty_size", "double_pretty_size", "reverse_pretty",
    "set_nthreads", "get_nthreads",
    "FileNotFound", "FileClosedError", "NoSuchChecksum", "NoSuchCodec", "NoSuchSerializer", "ChunkingException",
    "ChunkSizeTypeSizeMismatch", "ChecksumMismatch", "FormatVersionMismatch", "ChecksumLengthMismatch",
    "NoMetadataFound", "NoChangeInMetadata", "MetadataSectionTooSmall", "NonUniformTypesize",
    "NotEnoughSpace", "NotANumpyArray", "ObjectNumpyArrayRejection", "OffsetsRequired",
]

# This format, as the registry and every view know it.
FORMAT = FormatSpec(FORMAT_NAME, MAGIC, (EXTENSION,), "array", "bloscpack 3: one Blosc-compressed array or byte stream",
                    open=open, demo=demo, tree=_tree, sections=_sections, errors=_ERRORS, module=__name__,
                    save=_save)
