"""What the payload bytes mean: matrix types, data types and payload layouts.

The identity keys of the metadata (``rows``, ``cols``, ``matrix_type``,
``data_type``, ``payload_layout``, ``view``) become a :class:`Layout`, which
knows the exact payload size, gives a zero-copy view of dense payloads and
unpacks the packed ones (bit-packed, triangular, diagonal, identity) on demand.
The constructors at the end (``triangular``, ``causal``, ``symmetric``,
``antisymmetric``, ``diagonal``) pack numpy input into those layouts for
``save``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import limits
from .._binary import round_up
from ..errors import UnsupportedError
from ._errors import ERRORS

DENSE = "raw_dense"
TRIANGULAR = "raw_triangular"
DIAGONAL = "raw_diagonal"

# data_type -> numpy dtype of one stored element. BIT is bit-packed and
# COMPLEX_FLOAT16 is planar (all real halves, then all imaginary halves);
# numpy has no complex32, so it unpacks to complex64.
DATA_TYPES: dict[str, np.dtype] = {
    "FLOAT16": np.dtype("<f2"), "FLOAT32": np.dtype("<f4"), "FLOAT64": np.dtype("<f8"),
    "COMPLEX_FLOAT32": np.dtype("<c8"), "COMPLEX_FLOAT64": np.dtype("<c16"),
    "INT8": np.dtype("i1"), "INT16": np.dtype("<i2"), "INT32": np.dtype("<i4"), "INT64": np.dtype("<i8"),
    "UINT8": np.dtype("u1"), "UINT16": np.dtype("<u2"), "UINT32": np.dtype("<u4"), "UINT64": np.dtype("<u8"),
    "BIT": np.dtype(bool), "COMPLEX_FLOAT16": np.dtype("<c8"),
}
_DATA_TYPE_OF_KIND = {
    ("f", 2): "FLOAT16", ("f", 4): "FLOAT32", ("f", 8): "FLOAT64",
    ("c", 8): "COMPLEX_FLOAT32", ("c", 16): "COMPLEX_FLOAT64",
    ("i", 1): "INT8", ("i", 2): "INT16", ("i", 4): "INT32", ("i", 8): "INT64",
    ("u", 1): "UINT8", ("u", 2): "UINT16", ("u", 4): "UINT32", ("u", 8): "UINT64",
    ("b", 1): "BIT",
}
_FLOATS = {"FLOAT16", "FLOAT32", "FLOAT64", "COMPLEX_FLOAT16", "COMPLEX_FLOAT32", "COMPLEX_FLOAT64", "BIT"}
_INTEGERS = {"INT8", "INT16", "INT32", "INT64", "UINT8", "UINT16", "UINT32", "UINT64"}

# matrix_type -> (allowed data types, payload kind, triangle includes the diagonal).
# None for the diagonal flag means "a layout parameter" (TRIANGULAR_*).
MATRIX_TYPES: dict[str, tuple[frozenset, str, bool | None]] = {
    "DENSE_FLOAT": (frozenset(_FLOATS), DENSE, False),
    "INTEGER": (frozenset(_INTEGERS), DENSE, False),
    "VECTOR": (frozenset(_FLOATS | _INTEGERS), DENSE, False),
    "IDENTITY": (frozenset({"FLOAT64"}), DENSE, False),
    "CAUSAL": (frozenset({"BIT"}), TRIANGULAR, False),
    "TRIANGULAR_FLOAT": (frozenset({"FLOAT64"}), TRIANGULAR, None),
    "TRIANGULAR_INTEGER": (frozenset({"INT32"}), TRIANGULAR, None),
    "SYMMETRIC": (frozenset({"FLOAT64"}), TRIANGULAR, True),
    "ANTISYMMETRIC": (frozenset({"FLOAT64"}), TRIANGULAR, True),
    "DIAGONAL": (frozenset({"FLOAT64"}), DIAGONAL, False),
}
# Types pycauset writes whose payload we do not interpret (sidecar blocks, unit vectors).
OPAQUE_MATRIX_TYPES = frozenset({"BLOCK", "UNIT_VECTOR"})

ROW_ALIGN_BYTES = 8
DENSE_BIT_ROW_ALIGN = 64
PRE_061_EXTRA_BYTES = 64
MAX_DIMENSION = 2**63 - 1
UNPACK_LIMIT = 1 << 30


def _bits(data_type: str) -> int:
    return 1 if data_type == "BIT" else DATA_TYPES[data_type].itemsize * 8


def _sum_ceil(top: int, divisor: int) -> int:
    """sum(ceil(m / divisor) for m in range(top + 1)) in closed form (no loop over a hostile count)."""
    blocks, rest = divmod(top, divisor)
    return divisor * blocks * (blocks + 1) // 2 + rest * (blocks + 1)


def triangle_bytes(n: int, data_type: str, with_diagonal: bool) -> int:
    """Bytes of an n x n upper triangle whose rows are each padded to 8 bytes."""
    if n == 0:
        return 0
    per_word = 64 // _bits(data_type)
    return ROW_ALIGN_BYTES * _sum_ceil(n if with_diagonal else n - 1, per_word)


def _row_lengths(n: int, with_diagonal: bool) -> np.ndarray:
    return np.arange(n, 0, -1, dtype=np.int64) - (0 if with_diagonal else 1)


def _row_offsets(n: int, data_type: str, with_diagonal: bool) -> tuple[np.ndarray, np.ndarray]:
    lengths = _row_lengths(n, with_diagonal)
    per_word = 64 // _bits(data_type)
    row_bytes = -(-lengths // per_word) * ROW_ALIGN_BYTES
    starts = np.concatenate(([0], np.cumsum(row_bytes)[:-1])) if n else np.zeros(0, np.int64)
    return lengths, starts


def dense_bit_stride(cols: int) -> int:
    """Row stride of a DenseBit payload: ceil(cols / 8) rounded up to 64 bytes."""
    return round_up(-(-cols // 8), DENSE_BIT_ROW_ALIGN)


@dataclass(frozen=True)
class Layout:
    """The interpretation of one payload: base shape, types, layout parameters, view flags."""

    matrix_type: str
    data_type: str
    kind: str
    rows: int
    cols: int
    params: dict = field(default_factory=dict)
    diagonal: bool = False
    is_transposed: bool = False
    opaque: bool = False

    @property
    def is_vector(self) -> bool:
        """True for VECTOR payloads (a 1-D array of ``rows`` elements)."""
        return self.matrix_type == "VECTOR"

    @property
    def dtype(self) -> np.dtype:
        """The numpy dtype of the unpacked array."""
        return DATA_TYPES[self.data_type]

    @property
    def zero_copy(self) -> bool:
        """True when the payload is the array itself (dense, byte-aligned elements)."""
        return (not self.opaque and self.kind == DENSE and self.matrix_type != "IDENTITY"
                and self.data_type not in ("BIT", "COMPLEX_FLOAT16"))

    @property
    def shape(self) -> tuple[int, ...]:
        """The logical shape (transposition applied): a vector is 1-D, its transpose a (1, n) row, as in pycauset."""
        if self.is_vector:
            return (1, self.rows) if self.is_transposed else (self.rows,)
        return (self.cols, self.rows) if self.is_transposed else (self.rows, self.cols)

    def nbytes(self) -> int:
        """The exact payload size these parameters need (0 for opaque types)."""
        if self.opaque or self.matrix_type == "IDENTITY":
            return 0
        if self.kind == DIAGONAL:
            return self.rows * 8
        if self.kind == TRIANGULAR:
            return triangle_bytes(self.rows, self.data_type, self.diagonal)
        count = self.rows * (1 if self.is_vector else self.cols)
        if self.data_type == "BIT":
            if self.is_vector:
                return -(-count // 64) * 8
            return self.rows * dense_bit_stride(self.cols)
        if self.data_type == "COMPLEX_FLOAT16":
            return count * 4
        return count * self.dtype.itemsize

    def orient(self, base: np.ndarray) -> np.ndarray:
        """Apply the view's transposition to an array in base (stored) orientation, without copying."""
        if not self.is_transposed:
            return base
        return base.reshape(1, -1) if base.ndim == 1 else base.T

    def dense_view(self, payload: np.ndarray) -> np.ndarray:
        """The base-orientation array as a zero-copy view of the uint8 ``payload``."""
        base = payload.view(self.dtype)
        return base if self.is_vector else base.reshape(self.rows, self.cols)

    def unpacked_nbytes(self) -> int:
        """Bytes of the dense array that unpacking produces."""
        count = self.rows if self.is_vector else self.rows * self.cols
        return count * self.dtype.itemsize

    def check_row_block(self, count: int) -> None:
        """Refuse to unpack ``count`` stored rows at once when they are over the ``row_block_bytes`` limit
        (a 4 KB IDENTITY file may declare n = 2**31: 16 GiB a row)."""
        row_bytes = (1 if self.is_vector else self.cols) * self.dtype.itemsize
        limits.check("row_block_bytes", count * row_bytes, f"{count} unpacked row(s) of the {self.rows}x{self.cols} "
                     f"{self.matrix_type} matrix", format="pycauset")

    def unpack(self, payload: np.ndarray, max_bytes: int | None = UNPACK_LIMIT) -> np.ndarray:
        """A new dense array in base orientation from the uint8 ``payload`` of a packed layout."""
        if self.opaque:
            raise UnsupportedError(f"pycauset: matrix_type {self.matrix_type} keeps no matrix in this file's "
                                   "payload; only its metadata can be read")
        if max_bytes is not None and self.unpacked_nbytes() > max_bytes:
            raise UnsupportedError(f"pycauset: unpacking this {self.matrix_type} {self.rows}x{self.cols} payload "
                                   f"needs {self.unpacked_nbytes()} bytes, over the limit of {max_bytes}; "
                                   "call unpack(max_bytes=None) to allow it, or use .packed")
        if self.zero_copy:
            return self.dense_view(payload).copy()
        n = self.rows
        if self.matrix_type == "IDENTITY":
            return np.eye(self.rows, self.cols)
        if self.kind == DIAGONAL:
            return np.diag(payload.view("<f8"))
        if self.data_type == "COMPLEX_FLOAT16":
            halves = payload.view("<f2").astype(np.float32)
            count = halves.size // 2
            values = (halves[:count] + 1j * halves[count:]).astype(np.complex64)
            return values if self.is_vector else values.reshape(self.rows, self.cols)
        if self.kind == DENSE:
            if self.is_vector:
                return np.unpackbits(payload, bitorder="little")[:n].astype(bool)
            stride = dense_bit_stride(self.cols)
            rows = payload.reshape(n, stride)[:, :-(-self.cols // 8)]
            return np.unpackbits(rows, axis=1, bitorder="little")[:, :self.cols].astype(bool)
        return self._unpack_triangle(payload)

    def triangle_rows(self, data: np.ndarray, low: int, high: int) -> np.ndarray:
        """Rows ``low..high`` of a stored triangle as a (high - low, n) block, zero where nothing is stored;
        ``data`` holds the payload's bytes from the start of row ``low`` on."""
        if high - low < self.rows:  # a block of the zarr view (the whole triangle has its own unpack limit)
            self.check_row_block(high - low)
        lengths, starts = _row_offsets(self.rows, self.data_type, self.diagonal)
        begin = int(starts[low]) if low < self.rows else 0
        block = np.zeros((high - low, self.rows), dtype=self.dtype)
        first = 0 if self.diagonal else 1
        bit = self.data_type == "BIT"
        width = self.dtype.itemsize
        for row, length, start in zip(range(low, high), lengths[low:high].tolist(), starts[low:high].tolist()):
            if not length:
                continue
            start -= begin
            if bit:
                values = np.unpackbits(data[start:start + -(-length // 8)], bitorder="little")[:length]
            else:
                values = data[start:start + length * width].view(self.dtype)
            block[row - low, row + first:] = values
        return block

    def _unpack_triangle(self, payload: np.ndarray) -> np.ndarray:
        out = self.triangle_rows(payload, 0, self.rows)
        if self.matrix_type == "SYMMETRIC":
            out += np.triu(out, 1).T
        elif self.matrix_type == "ANTISYMMETRIC":
            out -= out.T
        return out

    def packed_view(self, payload: np.ndarray) -> np.ndarray:
        """The payload as stored, typed where elements are whole bytes (the diagonal, a dense array)."""
        if self.kind == DIAGONAL:
            return payload.view("<f8")
        if self.zero_copy:
            return self.dense_view(payload)
        return payload


def _fail(field_name: str, expected: Any, found: Any, offset: int | None) -> Exception:
    return ERRORS.invalid(f"metadata[{field_name!r}]", offset, expected, found)


def _dimension(metadata: dict, key: str, offset: int | None) -> int:
    value = metadata.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_DIMENSION:
        raise _fail(key, f"an integer in 0..{MAX_DIMENSION}", value if key in metadata else "no such key", offset)
    return value


def layout_from_metadata(metadata: dict, payload_length: int, offset: int | None = None) -> Layout:
    """Build the Layout the identity keys describe; ``offset`` (of the metadata block) goes into errors."""
    matrix_type = metadata.get("matrix_type")
    if matrix_type in OPAQUE_MATRIX_TYPES:
        shape = [metadata.get(key) for key in ("rows", "cols")]
        rows, cols = (value if isinstance(value, int) and not isinstance(value, bool) else 0 for value in shape)
        return Layout(str(matrix_type), str(metadata.get("data_type")), "none", rows, cols, opaque=True)
    if matrix_type not in MATRIX_TYPES:
        raise _fail("matrix_type", f"one of {', '.join(sorted(MATRIX_TYPES | dict.fromkeys(OPAQUE_MATRIX_TYPES)))}",
                    matrix_type, offset)
    data_types, kind, type_diagonal = MATRIX_TYPES[matrix_type]
    data_type = metadata.get("data_type")
    if data_type not in data_types:
        raise _fail("data_type", f"one of {', '.join(sorted(data_types))} for {matrix_type}", data_type, offset)
    assert isinstance(matrix_type, str) and isinstance(data_type, str)  # both are keys of the tables above
    rows = _dimension(metadata, "rows", offset)
    cols = _dimension(metadata, "cols", offset)
    if rows * cols > MAX_DIMENSION:
        raise _fail("rows", f"rows * cols at most {MAX_DIMENSION}", f"{rows} * {cols}", offset)
    layout_map = metadata.get("payload_layout", {})
    if not isinstance(layout_map, dict):
        raise _fail("payload_layout", "a map {kind, params}", type(layout_map).__name__, offset)
    found_kind = layout_map.get("kind", kind)
    if found_kind != kind:
        raise _fail("payload_layout.kind", f"{kind!r} for {matrix_type}", found_kind, offset)
    params = layout_map.get("params", {})
    if not isinstance(params, dict):
        raise _fail("payload_layout.params", "a map", type(params).__name__, offset)
    view = metadata.get("view", {})
    is_transposed = bool(view.get("is_transposed", False)) if isinstance(view, dict) else False
    if kind != DENSE and rows != cols:
        raise _fail("cols", f"cols == rows ({rows}) for {matrix_type}", cols, offset)
    if matrix_type == "VECTOR":
        if cols != 1:
            raise _fail("cols", "1 for a VECTOR", cols, offset)
    elif kind == DENSE and is_transposed and rows != cols and "order" not in params:
        # pycauset <= 0.6.1 writes the logical (transposed) shape; its files have no params.
        rows, cols = cols, rows
    _check_params(params, matrix_type, data_type, cols, offset)
    diagonal = bool(type_diagonal)
    if type_diagonal is None:
        diagonal = _triangle_diagonal(params, rows, data_type, payload_length, offset)
    return Layout(matrix_type, data_type, kind, rows, cols, dict(params), diagonal, is_transposed)


def _check_params(params: dict, matrix_type: str, data_type: str, cols: int, offset: int | None) -> None:
    expected: dict[str, Any] = {"order": "row_major", "bit_order": "lsb_first", "triangle": "upper",
                                "row_align_bytes": ROW_ALIGN_BYTES}
    if matrix_type == "DENSE_FLOAT" and data_type == "BIT":
        expected["row_stride_bytes"] = dense_bit_stride(cols)
    if data_type == "COMPLEX_FLOAT16":
        expected["complex_layout"] = "planar"
    for key, wanted in expected.items():
        if key in params and params[key] != wanted:
            raise _fail(f"payload_layout.params.{key}", wanted, params[key], offset)


def _triangle_diagonal(params: dict, n: int, data_type: str, payload_length: int, offset: int | None) -> bool:
    if "diagonal" in params:
        if not isinstance(params["diagonal"], bool):
            raise _fail("payload_layout.params.diagonal", "a bool", params["diagonal"], offset)
        return params["diagonal"]
    # pycauset 0.6.1 does not record has_diagonal; its payload_length tells the two layouts apart.
    return n > 0 and payload_length == triangle_bytes(n, data_type, True)


def check_payload_length(layout: Layout, payload_length: int, offset: int) -> None:
    """Raise unless ``payload_length`` is the layout's size (or that plus the pre-0.6.1 raw header)."""
    if layout.opaque:
        return
    expected = layout.nbytes()
    if payload_length not in (expected, expected + PRE_061_EXTRA_BYTES):
        raise ERRORS.invalid("active slot payload_length", offset,
                             f"{expected} bytes for {layout.matrix_type}/{layout.data_type} "
                             f"{layout.rows}x{layout.cols} (or {expected + PRE_061_EXTRA_BYTES}, "
                             "the pre-0.6.1 quirk)", payload_length)


@dataclass(frozen=True)
class PackedMatrix:
    """A matrix already packed into one of the container's layouts, ready for ``save``."""

    matrix_type: str
    data_type: str
    kind: str
    rows: int
    cols: int
    params: dict
    payload: np.ndarray

    def layout(self) -> Layout:
        """The Layout this packed payload follows."""
        return Layout(self.matrix_type, self.data_type, self.kind, self.rows, self.cols, self.params,
                      bool(self.params.get("diagonal", False)))


def data_type_of(dtype: np.dtype) -> str:
    """The container's data_type name for a numpy dtype; UnsupportedError for the others."""
    name = _DATA_TYPE_OF_KIND.get((dtype.kind, dtype.itemsize))
    if name is None:
        raise UnsupportedError(f"pycauset: dtype {dtype} has no container data_type "
                               "(float16/32/64, complex64/128, int8-64, uint8-64, bool)")
    return name


def dense_params(data_type: str, cols: int, vector: bool) -> dict:
    """The complete payload_layout.params arrayio writes for a dense payload."""
    params: dict[str, Any] = {"order": "row_major"}
    if data_type == "BIT":
        params["bit_order"] = "lsb_first"
        if not vector:
            params["row_stride_bytes"] = dense_bit_stride(cols)
    return params


def _square(matrix: Any, what: str) -> np.ndarray:
    array = np.asarray(matrix)
    if array.ndim != 2 or array.shape[0] != array.shape[1]:
        raise UnsupportedError(f"pycauset {what}: needs a square 2-D matrix, got shape {array.shape}")
    return array


def _pack_triangle(upper: np.ndarray, data_type: str, with_diagonal: bool) -> np.ndarray:
    n = upper.shape[0]
    _lengths, starts = _row_offsets(n, data_type, with_diagonal)
    payload = np.zeros(triangle_bytes(n, data_type, with_diagonal), dtype=np.uint8)
    first = 0 if with_diagonal else 1
    for row, start in enumerate(starts.tolist()):
        values = upper[row, row + first:]
        if data_type == "BIT":
            packed = np.packbits(values, bitorder="little")
        else:
            packed = np.ascontiguousarray(values, dtype=DATA_TYPES[data_type]).view(np.uint8)
        payload[start:start + packed.size] = packed
    return payload


def _triangle_params(with_diagonal: bool, bits: bool) -> dict:
    params: dict[str, Any] = {"triangle": "upper", "diagonal": with_diagonal, "row_align_bytes": ROW_ALIGN_BYTES}
    if bits:
        params["bit_order"] = "lsb_first"
    return params


def triangular(matrix: Any, *, diagonal: bool = False) -> PackedMatrix:
    """Pack an upper-triangular float (TRIANGULAR_FLOAT) or int32 (TRIANGULAR_INTEGER) matrix."""
    array = _square(matrix, "triangular")
    keep = np.triu(np.ones(array.shape, dtype=bool), 0 if diagonal else 1)
    if np.any(array[~keep]):
        raise UnsupportedError("pycauset triangular: entries below the diagonal"
                               + ("" if diagonal else " or on it") + " must be zero")
    if array.dtype.kind in "iub":
        if array.size and (array.min() < -2**31 or array.max() >= 2**31):
            raise UnsupportedError("pycauset triangular: integer values must fit int32")
        matrix_type, data_type = "TRIANGULAR_INTEGER", "INT32"
    elif array.dtype.kind == "f":
        matrix_type, data_type = "TRIANGULAR_FLOAT", "FLOAT64"
    else:
        raise UnsupportedError(f"pycauset triangular: needs a float or integer matrix, got {array.dtype}")
    n = array.shape[0]
    return PackedMatrix(matrix_type, data_type, TRIANGULAR, n, n, _triangle_params(diagonal, False),
                        _pack_triangle(array, data_type, diagonal))


def causal(matrix: Any) -> PackedMatrix:
    """Pack a strictly upper-triangular bool matrix as CAUSAL/BIT (a causal set's relation)."""
    array = _square(matrix, "causal")
    if array.dtype != bool:
        raise UnsupportedError(f"pycauset causal: needs a bool matrix, got {array.dtype}")
    if np.any(np.tril(array)):
        raise UnsupportedError("pycauset causal: the matrix must be strictly upper triangular")
    n = array.shape[0]
    return PackedMatrix("CAUSAL", "BIT", TRIANGULAR, n, n, _triangle_params(False, True),
                        _pack_triangle(array, "BIT", False))


def symmetric(matrix: Any) -> PackedMatrix:
    """Pack a symmetric real matrix (A == A.T) as SYMMETRIC/FLOAT64: the upper triangle with the diagonal."""
    array = _square(matrix, "symmetric")
    if array.dtype.kind not in "fiub" or not np.array_equal(array, array.T):
        raise UnsupportedError("pycauset symmetric: needs a real matrix equal to its transpose")
    n = array.shape[0]
    return PackedMatrix("SYMMETRIC", "FLOAT64", TRIANGULAR, n, n, _triangle_params(True, False),
                        _pack_triangle(array.astype(np.float64), "FLOAT64", True))


def antisymmetric(matrix: Any) -> PackedMatrix:
    """Pack a real matrix with A == -A.T as ANTISYMMETRIC/FLOAT64 (the diagonal stored as zeros)."""
    array = _square(matrix, "antisymmetric")
    if array.dtype.kind not in "fi" or not np.array_equal(array, -array.T):
        raise UnsupportedError("pycauset antisymmetric: needs a real matrix equal to minus its transpose")
    n = array.shape[0]
    return PackedMatrix("ANTISYMMETRIC", "FLOAT64", TRIANGULAR, n, n, _triangle_params(True, False),
                        _pack_triangle(array.astype(np.float64), "FLOAT64", True))


def diagonal(values: Any) -> PackedMatrix:
    """Pack a diagonal matrix (from its 1-D diagonal, or a 2-D matrix zero off the diagonal) as DIAGONAL/FLOAT64."""
    array = np.asarray(values)
    if array.ndim == 2:
        square = _square(array, "diagonal")
        if np.any(square - np.diag(np.diag(square))):
            raise UnsupportedError("pycauset diagonal: off-diagonal entries must be zero")
        array = np.diag(square)
    if array.ndim != 1 or array.dtype.kind not in "fiub":
        raise UnsupportedError(f"pycauset diagonal: needs real 1-D values or a square matrix, got {array.shape}")
    entries = np.ascontiguousarray(array, dtype="<f8")
    return PackedMatrix("DIAGONAL", "FLOAT64", DIAGONAL, entries.size, entries.size, {},
                        entries.view(np.uint8))
