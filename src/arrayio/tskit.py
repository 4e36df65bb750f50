"""Tree sequences for tskit users: ``.trees`` files (kastore files) from a path or any URL.

A tskit file is a kastore store whose keys are ``table/column`` names plus a
few top-level keys (``sequence_length``, ``time_units``, ``metadata``...).
This toolkit works over the public API of :mod:`arrayio.kastore`: the index
tells every table's row count and size without reading a column, so
:func:`info` reads the index and the small keys only (over a URL: the first
request, then every small key in one several-range GET where the server answers
those, as HTTP servers do; object stores answer one range a GET, so there it
is one request per place the small keys lie), and :func:`load` hands
tskit the mapped columns of a local file, or the columns fetched by parallel
ranged reads straight into memory for a URL (no temporary file).
``pip install "arrayio[tskit]"``.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np

from . import kastore
from ._binary import release_pages
from ._optional import require
from ._sources import RemoteFile, is_remote, is_url, resolve
from ._text import value_lines
from .errors import FormatError, Problem, UnsupportedError

__all__ = ["FORMAT_NAME", "TABLES", "info", "load", "open", "validate", "entries", "cat", "check_tree_sequence"]

FORMAT_NAME = "tskit"
# The tables of a tskit file, as its keys name them (tskit's own TableCollection attribute names).
TABLES = ("edges", "individuals", "migrations", "mutations", "nodes", "populations", "provenances", "sites")
_FILE_NAME = b"tskit.trees"
# What tskit reports for a file written before time units existed (no "time_units" key, e.g. SLiM 3.0's).
_UNKNOWN_TIME_UNITS = "unknown"
# Columns of UTF-8 text besides every metadata_schema (in .trees and .tsz files alike).
_TEXT_COLUMNS = ("time_units", "reference_sequence/data", "reference_sequence/url")
_SMALL_KEYS = ("format/name", "format/version", "sequence_length", "time_units", "uuid", "metadata_schema",
               "metadata")
# Small-key ranges closer than this are fetched in one request: a round trip costs more than the gap's bytes.
_GAP_BYTES = 256 << 10
_PART_BYTES = 8 << 20
# The end of the provenance text columns fetched with the small keys: the last record is rarely longer.
_TAIL_BYTES = 64 << 10


def _store(target: Any, storage_options: dict | None) -> kastore.Store:
    """The kastore store of a tskit file, its small keys and the tail of its provenances fetched (over a URL:
    in one request where the server answers several ranges at once, else nearby ones together)."""
    store = kastore.load(target, storage_options=storage_options)
    try:
        keys = [key for key in (*_SMALL_KEYS, *(f"{table}/metadata_schema" for table in TABLES)) if key in store]
        store.source.prefetch([*(store.extent(key) for key in keys), *_provenance_tail(store)], gap=_GAP_BYTES,
                              together=True)
        check_tree_sequence(store)
    except BaseException:
        store.close()
        raise
    return store


def check_tree_sequence(store: kastore.Store) -> None:
    """Raise a FormatError unless ``store`` is a tskit file (its ``format/name`` key says ``tskit.trees``)."""
    if "format/name" not in store:
        raise FormatError("tskit: a kastore file without the key 'format/name', not a tskit tree sequence",
                          format=FORMAT_NAME, field="format/name", expected=_FILE_NAME.decode(),
                          found="no such key").naming(store.file_name)
    name = bytes(_fetch(store, ["format/name"])["format/name"])
    if name != _FILE_NAME:
        raise FormatError(format=FORMAT_NAME, field="format/name", offset=store.extent("format/name")[0],
                          expected=_FILE_NAME.decode(), found=name).naming(store.file_name)


def _fetch(store: kastore.Store, keys: Iterable[str]) -> dict[str, np.ndarray]:
    """The arrays of ``keys`` (those present); over a URL, they are fetched together first."""
    present = [key for key in keys if key in store]
    store.source.prefetch([store.extent(key) for key in present], gap=_GAP_BYTES, together=True)
    return {key: store[key] for key in present}


def _provenance_tail(store: kastore.Store) -> list[tuple[int, int]]:
    """Byte ranges that hold the last provenance record in all but odd files: the last two entries of each
    offsets column and the last _TAIL_BYTES of each text column (fetched with the small keys, so that
    ``info`` needs no round trip more to show the record)."""
    if "provenances/record_offset" not in store or "provenances/timestamp_offset" not in store:
        return []
    spans = []
    for column in ("timestamp", "record"):
        start, length = store.extent(f"provenances/{column}_offset")
        itemsize = np.dtype(store.info(f"provenances/{column}_offset").dtype).itemsize
        spans.append((start + max(0, length - 2 * itemsize), min(length, 2 * itemsize)))
        if f"provenances/{column}" in store:
            start, length = store.extent(f"provenances/{column}")
            spans.append((start + max(0, length - _TAIL_BYTES), min(length, _TAIL_BYTES)))
    return spans


def _text(array: np.ndarray | None) -> str:
    return "" if array is None else np.asarray(array).tobytes().decode("utf-8")


def _schema(text: str) -> Any:
    """A metadata schema as JSON (None where the table has none)."""
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def _table_columns(store: kastore.Store) -> dict[str, list[str]]:
    columns: dict[str, list[str]] = {}
    for key in store:
        table, slash, column = key.partition("/")
        if slash and table in TABLES:
            columns.setdefault(table, []).append(column)
    return columns


def _rows(store: kastore.Store, table: str, columns: list[str]) -> int:
    """Rows of ``table`` from the index alone: an offsets column has one entry more than rows."""
    for column in columns:
        if column.endswith("_offset"):
            return max(0, store.info(f"{table}/{column}").shape[0] - 1)
    ragged = {column[:-len("_offset")] for column in columns if column.endswith("_offset")}
    for column in columns:
        if column not in ragged and column != "metadata_schema":
            return int(store.info(f"{table}/{column}").shape[0])
    return 0


def _last_provenance(store: kastore.Store, rows: int) -> dict[str, Any] | None:
    """The last provenance record: two offsets from the end of each offsets column, then its bytes."""
    if rows == 0:
        return None
    source = store.source
    found: dict[str, Any] = {}
    ends = {}
    for column in ("timestamp", "record"):
        key = f"provenances/{column}_offset"
        start, _length = store.extent(key)
        dtype = np.dtype(store.info(key).dtype).newbyteorder("<")
        ends[column] = np.frombuffer(bytes(source.view(start + dtype.itemsize * (rows - 1), 2 * dtype.itemsize,
                                                       key)), dtype)
    spans = [(store.extent(f"provenances/{column}")[0] + int(low), int(high - low))
             for column, (low, high) in ends.items()]
    source.prefetch(spans, gap=_GAP_BYTES)
    for column, (start, length) in zip(ends, spans):
        found[column] = bytes(source.view(start, length, f"provenances/{column} of row {rows - 1}")).decode("utf-8")
    record = found["record"]
    try:
        parsed: Any = json.loads(record)
    except ValueError:
        parsed = record
    return {"timestamp": found["timestamp"], "record": parsed}


def info(target: Any, storage_options: dict | None = None) -> dict[str, Any]:
    """What ``tskit info`` shows, from the index and the small keys only (never a whole column)."""
    with _store(target, storage_options) as store:
        return _facts(store)


def _facts(store: kastore.Store) -> dict[str, Any]:
    columns = _table_columns(store)
    schema_keys = [f"{table}/metadata_schema" for table in columns if "metadata_schema" in columns[table]]
    small = _fetch(store, [*_SMALL_KEYS, *schema_keys])
    version = small.get("format/version")
    tables: dict[str, Any] = {}
    for table in TABLES:
        names = columns.get(table, [])
        schema = small.get(f"{table}/metadata_schema")
        tables[table] = {"rows": _rows(store, table, names),
                         "bytes": sum(store.info(f"{table}/{column}").size for column in names),
                         "metadata_schema": _schema(_text(schema)) if schema is not None else None}
    provenance_rows = tables["provenances"]["rows"]
    length = small.get("sequence_length")
    sequence_length = float(length[0]) if length is not None and len(length) else None
    nbytes = {key: store.info(key).size for key in store}
    facts: dict[str, Any] = {
        "format": FORMAT_NAME,
        "version": ".".join(str(int(part)) for part in version) if version is not None else None,
        "file_size": store.source.size,
        "summary": (f"{tables['nodes']['rows']} nodes, {tables['edges']['rows']} edges, {tables['sites']['rows']} "
                    f"sites, {tables['mutations']['rows']} mutations; sequence length {sequence_length}"),
        "sequence_length": sequence_length,
        "time_units": _text(small["time_units"]) if "time_units" in small else _UNKNOWN_TIME_UNITS,
        "uuid": _text(small.get("uuid")),
        "metadata_schema": _schema(_text(small.get("metadata_schema"))),
        "metadata_bytes": nbytes.get("metadata", 0),
        "tables": tables,
        "provenances": {"count": provenance_rows, "last": _last_provenance(store, provenance_rows)},
        "indexes_bytes": sum(size for key, size in nbytes.items() if key.startswith("indexes/")),
        "reference_sequence_bytes": sum(size for key, size in nbytes.items()
                                        if key.startswith("reference_sequence/")),
    }
    return facts


# --------------------------------------------------------------------------- loading

def _wanted_keys(store: kastore.Store, tables: Iterable[str] | None, skip_tables: bool,
                 skip_reference_sequence: bool) -> list[str]:
    if tables is not None:
        chosen = set(tables)
        unknown = chosen - set(TABLES)
        if unknown:
            raise UnsupportedError(f"tskit: no such table {sorted(unknown)}; tables are {', '.join(TABLES)}")
    else:
        chosen = set() if skip_tables else set(TABLES)
    keys = []
    for key in store:
        group, slash, _column = key.partition("/")
        if not slash or group == "format":
            keys.append(key)
        elif group in TABLES:
            if group in chosen:
                keys.append(key)
        elif group == "indexes":
            if "edges" in chosen:
                keys.append(key)
        elif group == "reference_sequence":
            if not skip_reference_sequence:
                keys.append(key)
        else:
            keys.append(key)
    return keys


def _spans(store: kastore.Store, keys: list[str], gap: int) -> list[tuple[int, int]]:
    """The byte ranges of ``keys`` merged where they lie within ``gap`` bytes of each other."""
    merged: list[list[int]] = []
    for start, length in sorted(store.extent(key) for key in keys):
        if merged and start <= merged[-1][1] + gap:
            merged[-1][1] = max(merged[-1][1], start + length)
        else:
            merged.append([start, start + length])
    return [(start, stop - start) for start, stop in merged]


def _column_dict(store: kastore.Store, keys: list[str]) -> dict[str, Any]:
    """The keys as ``TableCollection.fromdict`` wants them (tables left out are empty, as skip_tables leaves them)."""
    tskit = require("tskit", "tree sequences")

    empty = tskit.TableCollection(1).asdict()
    data: dict[str, Any] = {"encoding_version": empty["encoding_version"]}
    for key in keys:
        if not key.startswith("format/") and key != "uuid":
            _put(data, key, _as_dict_value(empty, key, store[key]))
    for table in TABLES:
        data.setdefault(table, empty[table])
    return data


def _as_dict_value(empty: dict[str, Any], path: str, value: np.ndarray) -> Any:
    """A stored column as ``fromdict`` takes it: text as str, top-level and reference metadata as bytes,
    the sequence length as a float, table columns in the dtype of tskit's tables."""
    group, _slash, column = path.rpartition("/")
    if column == "metadata_schema" or path in _TEXT_COLUMNS:
        return _text(value)
    if column == "metadata" and group in ("", "reference_sequence"):
        return np.asarray(value).astype(np.uint8, copy=False).tobytes()  # tszip <= 0.2.5 stored int8
    if path == "sequence_length":
        return float(value[0])
    return _fitted(empty, group, column, value)


def _put(data: dict[str, Any], path: str, value: Any) -> None:
    """``data[group][column] = value`` for ``group/column``, ``data[path]`` at the top level."""
    group, _slash, column = path.rpartition("/")
    (data.setdefault(group, {}) if group else data)[column] = value


def _fitted(empty: dict[str, Any], group: str, column: str, value: np.ndarray) -> np.ndarray:
    """``value`` in the dtype tskit's tables take for the column: text stored as uint8 is viewed as int8
    (the same bytes), narrower integers (tszip's) are widened; unknown columns are left to tskit."""
    expected = getattr(empty.get(group, {}).get(column) if isinstance(empty.get(group), dict) else None, "dtype",
                       None)
    if expected is None or value.dtype == expected:
        return value
    if value.dtype.itemsize == expected.itemsize and value.dtype.kind in "iu" and expected.kind in "iu":
        return value.view(expected)
    return value.astype(expected)


def _fetched_store(remote: RemoteFile, tables: Iterable[str] | None, skip_tables: bool,
                   skip_reference_sequence: bool, threads: int) -> tuple[kastore.Store, list[str]]:
    """The index and the wanted keys of a remote file in one in-memory buffer: the index from the opening
    request, then the wanted keys: small ones (metadata only) in one several-range GET where the server can,
    else every run of them (runs closer than _GAP_BYTES joined) by ranged reads issued ``threads`` at a time
    straight into the buffer, so the wait is about two round trips."""
    with kastore.load(remote) as index:
        keys = _wanted_keys(index, tables, skip_tables, skip_reference_sequence)
        first_array = min((index.extent(key)[0] for key in index), default=index.file_size)
        spans = _spans(index, keys, _GAP_BYTES)
        buffer = bytearray(remote.size)  # pages nobody writes stay unbacked: only fetched ranges cost memory
        buffer[:first_array] = index.source.view(0, first_array, "kastore index")
        if sum(length for _start, length in spans) <= _PART_BYTES:  # small keys: one request where it can be
            index.source.prefetch(spans, together=True)
            for offset, length in spans:
                buffer[offset:offset + length] = index.source.view(offset, length, "tskit keys")
            spans = []
    for offset, data in remote.iter_ranges(spans, part=_PART_BYTES, threads=threads):
        buffer[offset:offset + len(data)] = data
    store = kastore.loads(buffer)
    check_tree_sequence(store)
    return store, keys


def _spooled(remote: RemoteFile, skip_reference_sequence: bool, threads: int) -> Any:
    """tskit's own loader reading an in-memory file (memfd) that parallel ranged reads filled in place: no
    file on disk, no copy on the way, and the object is held once besides what tskit reads. (A pipe fed while
    tskit reads would hold one copy less, but tskit keeps the GIL while it loads, so nothing could feed it.)"""
    import mmap
    import tempfile

    tskit = require("tskit", "tree sequences")

    memfd = getattr(os, "memfd_create", None)
    spool = io.open(memfd("arrayio-tskit"), "w+b") if memfd is not None else tempfile.TemporaryFile()
    with spool:
        spool.truncate(remote.size)
        if remote.size:
            with mmap.mmap(spool.fileno(), remote.size) as pages:
                remote.read_into(pages, concurrency=threads)
        return tskit.load(spool, skip_reference_sequence=skip_reference_sequence)


def load(target: Any, storage_options: dict | None = None, tables: Iterable[str] | None = None, *,
         skip_tables: bool = False, skip_reference_sequence: bool = False, threads: int = 8) -> Any:
    """A ``tskit.TreeSequence`` (a ``tskit.TableCollection`` when ``tables`` names a subset) of a path or URL.

    Equal to ``tskit.load`` table by table. The index is checked first (a file that is not a tree sequence
    is a FormatError naming the key). A whole tree sequence is read by tskit's own loader, which since
    tskit 1.0 holds the file once (building a TreeSequence from other memory would copy every table
    again): from the path, or over a URL from an in-memory file that parallel ranged reads (``threads``
    at a time) fill in place, with no file on disk. ``tables`` and ``skip_tables`` read only the keys asked
    for (a local file mapped, a URL's wanted keys fetched into memory: small ones in one several-range GET
    where the server answers those) and build the tables one at a time from them.
    """
    tskit = require("tskit", "tree sequences")

    remote = target if isinstance(target, RemoteFile) else \
        resolve(target, storage_options) if is_url(target) or is_remote(target) else None
    whole = tables is None and not skip_tables
    if remote is not None and whole:
        with kastore.load(remote) as index:  # the opening request, and format/name's when it lies beyond
            check_tree_sequence(index)
        return _spooled(remote, skip_reference_sequence, threads)
    if remote is not None:
        store, keys = _fetched_store(remote, tables, skip_tables, skip_reference_sequence, threads)
    else:
        store = _store(target, None)
        if whole:
            store.close()
            return tskit.load(target, skip_reference_sequence=skip_reference_sequence)
        keys = _wanted_keys(store, tables, skip_tables, skip_reference_sequence)
    with store:
        collection = _collection(store, keys)
    return collection if tables is not None else collection.tree_sequence()


def _collection(store: kastore.Store, keys: list[str]) -> Any:
    """The keys as a ``tskit.TableCollection`` built a table at a time: each table's columns are copied into
    tskit (``set_columns``) and the mapped pages they came from dropped before the next table is read, so a
    local file costs the tables plus one table's pages (``fromdict`` of every column at once held all the
    file's pages besides the tables: 1.8x ``TableCollection.load``'s peak on a 160 MB file)."""
    tskit = require("tskit", "tree sequences")

    groups: dict[str, list[str]] = {}
    for key in keys:
        group = key.partition("/")[0] if "/" in key else ""
        groups.setdefault(group if group in (*TABLES, "indexes") else "", []).append(key)
    collection = tskit.TableCollection.fromdict(_column_dict(store, groups.pop("", [])))
    empty = tskit.TableCollection(1).asdict()
    for group, names in groups.items():
        columns = {key.partition("/")[2]: _as_dict_value(empty, key, store[key]) for key in names}
        if group == "indexes":
            collection.indexes = tskit.TableCollectionIndexes(**columns)
        else:
            getattr(collection, group).set_columns(**columns)
        del columns
        extents = [store.extent(key) for key in names]
        start = min(offset for offset, _length in extents)
        release_pages(store.source, start, max(offset + length for offset, length in extents) - start)
    return collection


# --------------------------------------------------------------------------- the registry's view hooks

def open(target: Any, storage_options: dict | None = None) -> kastore.Store:  # noqa: A001 - the protocol name
    """The kastore store of a tskit file (checked to be one)."""
    return _store(target, storage_options)


def validate(target: Any) -> list[Problem]:
    """kastore's problems, then a FormatError's problem when the store is not a tskit file."""
    problems = kastore.validate(target)
    if problems:
        return problems
    try:
        with _store(target, None):
            return []
    except FormatError as error:
        return [Problem.from_error(error)]


def entries(target: Any) -> list[dict[str, Any]]:
    """One row per table (rows, bytes), then the top-level keys: what ``arrayio ls`` lists."""
    with _store(target, None) as store:
        facts = _facts(store)
        rows = [{"name": table, "rows": fact["rows"], "nbytes": fact["bytes"]}
                for table, fact in facts["tables"].items()]
        rows += [{"name": key, "rows": store.info(key).shape[0], "nbytes": store.info(key).size}
                 for key in store if "/" not in key or key.startswith(("format/", "indexes/", "reference_sequence/"))]
        return rows


def cat(target: Any, name: str, numbers: bool = False) -> Iterator[str]:
    """The values of one key (``nodes/time``), one per line, text keys as text unless ``numbers``;
    a table name prints its columns' keys."""
    with _store(target, None) as store:
        if name in TABLES:
            yield from (key for key in store if key.startswith(name + "/"))
            return
        yield from value_lines(store[name], numbers)



# --------------------------------------------------------------------------- tszip in and out

# Columns tszip stores as indexes into the sorted unique coordinates, and those it delta-filters.
_QUANTISED = ("edges/left", "edges/right", "migrations/left", "migrations/right", "sites/position")
_DELTA = ("edges/parent", "sites/position")


def _minimal(values: np.ndarray) -> np.ndarray:
    """Integers in the narrowest dtype of their kind that holds them (what tszip stores); others unchanged."""
    if values.dtype.kind not in "iu" or values.size == 0:
        return values
    low, high = int(values.min()), int(values.max())
    for size in (1, 2, 4, 8):
        dtype = np.dtype(f"{values.dtype.kind}{size}")
        info = np.iinfo(dtype)
        if info.min <= low and high <= info.max:
            return values.astype(dtype, copy=False)
    return values


def _tszip_columns(tables: Any) -> tuple[dict[str, np.ndarray], float]:
    """The columns of a TableCollection as tszip lays them out, and the sequence length (a root attribute)."""
    columns: dict[str, Any] = {}
    for key, value in tables.asdict().items():
        if isinstance(value, dict):
            columns.update({f"{key}/{name}": item for name, item in value.items()})
        else:
            columns[key] = value
    length = float(columns.pop("sequence_length"))
    columns["encoding_version"] = np.asarray(columns["encoding_version"])
    for name, value in columns.items():
        if name.endswith("metadata_schema") or name in _TEXT_COLUMNS:
            columns[name] = np.frombuffer(value.encode("utf-8"), np.uint8)
        elif name.endswith("metadata"):
            columns[name] = np.frombuffer(value, np.uint8)
    coordinates = np.unique(np.hstack([[0, length], *(columns[name] for name in _QUANTISED)]))
    for name in _QUANTISED:
        columns[name] = np.searchsorted(coordinates, columns[name])
    columns["coordinates"] = coordinates
    return {name: _minimal(np.asarray(value)) for name, value in columns.items()}, length


def to_tszip(source: Any, target: Any, storage_options: dict | None = None,
             progress: Callable[[int], None] | None = None, *, chunk: int | None = None) -> None:
    """Write the tree sequence in ``source`` (path or URL) as the tszip file ``target``, losslessly, as
    ``tszip.compress`` lays it out (``tszip.decompress`` gives back equal tables); ``progress(nbytes)``
    as each column is written."""
    from . import __version__, tszip

    chunk = tszip.DEFAULT_CHUNK if chunk is None else chunk
    columns, length = _tszip_columns(load(source, storage_options, tables=TABLES))
    attributes = {"format_name": tszip.FORMAT_NAME, "format_version": list(tszip.FORMAT_VERSION),
                  "sequence_length": length,
                  "provenance": {"schema_version": "1.0.0",
                                 "software": {"name": "arrayio", "version": __version__},
                                 "parameters": {"variants_only": False, "chunk_size": chunk}}}
    report = progress or (lambda nbytes: None)

    def arrays() -> Iterator[Any]:
        for name, values in columns.items():
            yield tszip.Array(name, values, delta="_offset" in name or name in _DELTA)
            report(values.nbytes)

    tszip.dump(arrays(), attributes, target, chunk=chunk)


def from_tszip(source: Any, storage_options: dict | None = None, progress: Callable[[int], None] | None = None) -> Any:
    """The ``tskit.TreeSequence`` in a tszip file (path or URL, read in ranges), as ``tszip.decompress`` gives it."""
    tskit = require("tskit", "tree sequences")

    from . import tszip

    with tszip.load(source, storage_options) as reader:
        if "coordinates" not in reader:
            raise FormatError("tszip: no 'coordinates' column, so the edge and site positions cannot be restored",
                              format=tszip.FORMAT_NAME, field="coordinates", expected="a column", found="none")
        reader.prefetch(list(reader))
        coordinates = reader["coordinates"]
        empty = tskit.TableCollection(1).asdict()
        data: dict[str, Any] = {"sequence_length": reader.attributes.get("sequence_length")}
        for path in reader:
            if path == "coordinates":
                continue
            value: Any = reader[path]
            if progress is not None:
                progress(value.nbytes)
            _put(data, path, coordinates[value] if path in _QUANTISED else _as_dict_value(empty, path, value))
    return tskit.TableCollection.fromdict(data).tree_sequence()


def tszip_to_trees(source: Any, target: Any, storage_options: dict | None = None,
                   progress: Callable[[int], None] | None = None) -> None:
    """Write the tree sequence of a tszip file as a ``.trees`` file (what ``tszip.decompress(...).dump`` writes)."""
    from ._edge import open_output

    tree_sequence = from_tszip(source, storage_options, progress)
    with open_output(target) as stream:
        tree_sequence.dump(stream)


# What arrayio.convert hands to this toolkit: (source, target extension) -> (function, the target's name).
CONVERSIONS: dict[tuple[str, str], tuple[str, str | None]] = {
    (".trees", ".tsz"): ("to_tszip", "tszip"),
    (".tsz", ".trees"): ("tszip_to_trees", "tskit"),
}
