"""Remote benchmark: requests, bytes and time to read one item of a big file over HTTP, and dask throughput.

    python benchmarks/remote.py [--gb 1.0] [--dask-gb 1.0] [--episodes 2000] [--dir DIR] [--no-dask]
                                [--quick] [--json PATH]

Every file is served by the tests' HTTP range server (tests/remote/remote_servers.py) on 127.0.0.1, which
counts the requests it receives and the body bytes it sends: the figures below are the server's. For
each format: open a file of --gb (kdb: --episodes episodes) from its URL and read one item (a 10 MB
kastore key, one bloscpack chunk, one kdb episode, one kdb frame, a 1 MB row block of a pycauset matrix), against
the reference reading the same item (it needs the whole file) and against the limit: one ranged GET
of exactly the item's bytes. Goal: bytes <= 1.01 x item + 64 KiB, at most 5 requests in all.

Then ``to_dask(url).sum().compute()`` on a --dask-gb bloscpack file with a LocalCluster of 2 worker
processes, the file served by the tests' ``FileServer`` (``os.sendfile``) in another process, against the
same sum over the same chunks already in the workers' memory (persisted: dask's own scheduling cost) and a
local ``unpack_ndarray_from_file(path).sum()``. Goal: within 1.5x of the in-memory run. One run of each
(after one warm-up of the cluster and the page cache). ``--quick``: 0.03 GB files, 200 episodes, a 0.1 GB
dask file.

At the wire (issue 22), files served by ``FileServer`` in another process (fast enough that the clients,
not the server, set the pace: one ``http.client`` connection moves > 1.5 GB/s on loopback): a --key-gb
kastore key read whole through the obstore client, through the fsspec client (``storage_options={"client":
"fsspec"}``, parallel parts as today) and through the fsspec client in one GET (as every read went before
issue 22), against the limit: the same bytes fetched by --concurrency plain ``http.client`` ranged GETs of
8 MiB into one buffer; a 100-chunk bloscpack slice (both clients, against the same limit for its byte
span); one kdb batch of 256 random frames from 8 shards through ``FrameDataset`` (both clients). Goals:
obstore >= 0.8 of the limit and >= 3x fsspec for the key (the "goal rows" print both fsspec ratios).
``--no-wire`` skips them, ``--only-wire`` runs only them.
"""

from __future__ import annotations

import argparse
import http.client
import mmap
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # for _rows, also in dask's spawned workers, whose path lacks this folder
import _rows  # noqa: E402

# This folder holds kastore.py, bloscpack.py ... benchmarks that would shadow the reference packages.
sys.path[:] = [str(HERE.parent / "src"), str(HERE.parent / "tests" / "remote"), str(HERE.parent / "tests")] + [
    entry for entry in sys.path if Path(entry or ".").resolve() != HERE]

import fsspec
import references
from remote_servers import FileServer, RangeServer

from arrayio import bloscpack, kastore, kdb, pycauset
from arrayio import dask as arrayio_dask

KEY_BYTES = 10 * 10**6
ROW_BLOCK_BYTES = 1 << 20
SLACK = 64 << 10
REPEAT = 3


def _random(nbytes: int, dtype: str, seed: int) -> np.ndarray:
    return np.frombuffer(np.random.default_rng(seed).bytes(nbytes), dtype=dtype)


def write_files(folder: Path, gigabytes: float, dask_gigabytes: float, episodes: int, with_dask: bool) -> dict:
    """The benchmark's files (written once, reused when present)."""
    total = int(gigabytes * 1e9)
    files = {"kastore": folder / "big.kas", "bloscpack": folder / "big.blp", "kdb": folder / "big.kdb",
             "pycauset": folder / "big.pycauset", "dask": folder / "dask.blp"}
    if not files["kastore"].exists():
        half = (total - KEY_BYTES) // 2
        kastore.dump({"a": _random(half, "u1", 1), "target": _random(KEY_BYTES, "<u8", 2).copy(),
                      "z": _random(half, "u1", 3)}, files["kastore"])
    if not files["bloscpack"].exists():
        bloscpack.pack_ndarray_to_file(_random(total // 2048 * 2048, "<u2", 4).reshape(-1, 1024),
                                       files["bloscpack"], chunk_size=1 << 20)
    if not files["kdb"].exists():
        rng = np.random.default_rng(5)
        images = rng.integers(0, 255, (10, 48, 48, 3), dtype=np.uint8)
        with kdb.Writer(files["kdb"], created_timestamp=0) as out:
            for index in range(episodes):
                out.add_episode(rng.standard_normal((10, 14)).astype(np.float32),
                                rng.standard_normal((10, 7)).astype(np.float32), images={"front": images},
                                task=f"task {index}")
    if not files["pycauset"].exists():
        cols = 16384
        rows = total // (cols * 8)
        pycauset.save(np.arange(rows * cols, dtype=np.float64).reshape(rows, cols), files["pycauset"])
    if with_dask and not files["dask"].exists():
        size = int(dask_gigabytes * 1e9) // 2048 * 2048
        bloscpack.pack_ndarray_to_file(_random(size, "<u2", 6).reshape(-1, 1024), files["dask"],
                                       chunk_size=1 << 20)
    return files


class Measure:
    """Server-side requests and bytes, and wall time, of one block of code."""

    def __init__(self, server: RangeServer) -> None:
        self.server = server

    def __call__(self, action, repeat: int = 1):
        """(result, requests, bytes, best time of ``repeat`` runs); the counts are those of one run.

        Repeated runs start with an untimed one: the server's pages of the item are then in memory
        for ours as they are for the limit's GETs that follow.
        """
        if repeat > 1:
            action()
        best = float("inf")
        for _ in range(repeat):
            self.server.counts.reset()
            start = time.perf_counter()
            result = action()
            best = min(best, time.perf_counter() - start)
        requests, sent = self.server.counts.total()
        return result, requests, sent, best


def _limit(url: str, offset: int, length: int) -> float:
    """Best time of one ranged GET of exactly the item's bytes."""
    fs, path = fsspec.core.url_to_fs(url)
    best = float("inf")
    for _ in range(REPEAT):
        start = time.perf_counter()
        fs.cat_file(path, start=offset, end=offset + length)
        best = min(best, time.perf_counter() - start)
    return best


def case_kastore(url: str, measure: Measure) -> dict:
    def ours():
        with kastore.load(url) as store:
            return np.array(store["target"]), store.extent("target")[0]
    (array, offset), requests, sent, elapsed = measure(ours, REPEAT)

    def reference():
        import kastore as reference_kastore

        with fsspec.open(url, "rb").open() as handle:
            store = reference_kastore.load(handle)
            return np.array(store["target"])
    expected, ref_requests, ref_sent, ref_elapsed = measure(reference)
    assert np.array_equal(array, expected)
    return {"item": "one 10 MB key", "item_bytes": array.nbytes, "requests": requests, "bytes": sent, "seconds": elapsed,
                "ref": "kastore.load(fsspec.open(url).open())", "ref_requests": ref_requests, "ref_bytes": ref_sent,
                "ref_seconds": ref_elapsed, "limit_seconds": _limit(url, offset, array.nbytes)}


def case_bloscpack(url: str, measure: Measure) -> dict:
    with bloscpack.open(url) as reader:
        chunk = reader.nchunks * 3 // 8

    def ours():
        with bloscpack.open(url) as reader:
            rows = reader.header.chunk_size // (1024 * 2)
            block = reader[chunk * rows:(chunk + 1) * rows]
            start, stop = int(reader.positions[chunk]), int(reader.positions[chunk + 1])
            return block, rows, start, stop
    (block, rows, start, stop), requests, sent, elapsed = measure(ours, REPEAT)

    def reference():
        with fsspec.open(url, "rb") as handle:
            whole = references.bloscpack().unpack_ndarray_from_bytes(handle.read())
        return whole[chunk * rows:(chunk + 1) * rows]
    expected, ref_requests, ref_sent, ref_elapsed = measure(reference)
    assert np.array_equal(block, expected)
    return {"item": "one 1 MiB chunk", "item_bytes": stop - start, "requests": requests, "bytes": sent, "seconds": elapsed,
                "ref": "bloscpack.unpack_ndarray_from_bytes(fsspec read)", "ref_requests": ref_requests,
                "ref_bytes": ref_sent, "ref_seconds": ref_elapsed, "limit_seconds": _limit(url, start, stop - start)}


def case_kdb(url: str, measure: Measure) -> dict:
    with kdb.open(url) as reader:
        position = len(reader) * 5 // 8

    def ours():
        with kdb.open(url) as reader:
            episode = reader.read_episode(position)
            images = np.asarray(episode.images["front"])  # decoded lazily: read while the file is open
            entry = reader.entry(position)
            return (episode.steps.copy(), images, entry.meta_offset,
                    entry.meta_length + entry.actions_length + entry.images_length)
    (steps, images, offset, length), requests, sent, elapsed = measure(ours, REPEAT)

    def reference():
        # kinodb has no Python package: the baseline reads the whole object, then parses it locally.
        data = fsspec.open(url, "rb").open().read()
        with kdb.open(data) as reader:
            episode = reader.read_episode(position)
            return episode.steps.copy(), np.asarray(episode.images["front"])
    (ref_steps, ref_images), ref_requests, ref_sent, ref_elapsed = measure(reference)
    assert np.array_equal(steps, ref_steps) and np.array_equal(images, ref_images)
    return {"item": "one episode (10 frames + images)", "item_bytes": length, "requests": requests, "bytes": sent,
                "seconds": elapsed, "ref": "whole object read, then parsed (no Python kinodb)", "ref_requests": ref_requests,
                "ref_bytes": ref_sent, "ref_seconds": ref_elapsed, "limit_seconds": _limit(url, offset, length)}


def case_kdb_frame(url: str, measure: Measure) -> dict:
    """One frame (its state/action row and decoded image) of an episode: frames are not indexed, so the
    reader fetches the episode's image section up to the frame (docs/formats/kdb.md, "Reading remotely")."""
    with kdb.open(url) as reader:
        position = len(reader) * 3 // 8
        frame = reader.entry(position).num_frames * 7 // 10

    def ours():
        with kdb.open(url) as reader:
            read = reader.read_frame(position, frame)
            entry = reader.entry(position)
            start, stop = reader.frame_offset(position, frame), reader.frame_offset(position, frame + 1)
            return (read.state.copy(), read.images["front"], start, stop - start,
                    entry.actions_length // entry.num_frames)
    (state, image, start, length, row), requests, sent, elapsed = measure(ours, REPEAT)

    def reference():
        data = fsspec.open(url, "rb").open().read()
        with kdb.open(data) as reader:
            read = reader.read_frame(position, frame)
            return read.state.copy(), read.images["front"]
    (ref_state, ref_image), ref_requests, ref_sent, ref_elapsed = measure(reference)
    assert np.array_equal(state, ref_state) and np.array_equal(image, ref_image)
    return {"item": f"one frame (frame {frame}: state/action row + image)", "item_bytes": row + length,
            "requests": requests, "bytes": sent, "seconds": elapsed,
            "ref": "whole object read, then parsed (no Python kinodb)", "ref_requests": ref_requests,
            "ref_bytes": ref_sent, "ref_seconds": ref_elapsed, "limit_seconds": _limit(url, start, length)}


def case_kdb_tree(url: str, measure: Measure) -> dict:
    """The tree every view describes the file by (zarr, kerchunk, dask, ``arrayio tree``): every episode's
    metadata and the cameras of its first frame. What it must read: the index, every metadata blob and each
    first frame's records (here its even share of the section)."""
    from arrayio._tree import tree_of

    def ours():
        with kdb.open(url) as reader:
            described = {name: array.shape for name, array in tree_of(reader).arrays()}
            index = reader.header.index_offset, len(reader) * 64
            needed = index[1] + sum(entry.meta_length + -(-entry.images_length // max(1, entry.num_frames))
                                    for entry in map(reader.entry, range(len(reader))))
            return described, index, needed
    (described, index, needed), requests, sent, elapsed = measure(ours, REPEAT)

    def reference():
        data = fsspec.open(url, "rb").open().read()
        with kdb.open(data) as reader:
            return {name: array.shape for name, array in tree_of(reader).arrays()}
    expected, ref_requests, ref_sent, ref_elapsed = measure(reference)
    assert described == expected
    return {"item": "the tree (every episode's metadata and cameras)", "item_bytes": needed, "requests": requests,
            "bytes": sent, "seconds": elapsed, "ref": "whole object read, then described", "ref_requests": ref_requests,
            "ref_bytes": ref_sent, "ref_seconds": ref_elapsed, "limit_seconds": _limit(url, *index),
            "target": "requests: a few several-range GETs; bytes <= 1.01 x what it must read + 64 KiB",
            "limit_name": "one ranged GET of the index (a lower bound: the rest is scattered)"}


def case_pycauset(url: str, measure: Measure, folder: Path) -> dict:
    def ours():
        with pycauset.load(url) as container:
            rows = ROW_BLOCK_BYTES // (container.layout.cols * 8)
            first = container.layout.rows // 2
            return (container.read_rows(first, first + rows), first, container.payload_offset,
                    container.layout.cols)
    (block, first, payload_offset, cols), requests, sent, elapsed = measure(ours, REPEAT)

    def reference():
        local = folder / "downloaded.pycauset"
        fsspec.open(url, "rb").fs.get_file(fsspec.core.url_to_fs(url)[1], str(local))
        reference_pycauset = references.pycauset(str(folder))
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                matrix = reference_pycauset.load(str(local))
                rows = np.asarray(reference_pycauset.to_numpy(matrix, allow_huge=True))[first:first + len(block)]
        finally:
            local.unlink()
        return rows
    expected, ref_requests, ref_sent, ref_elapsed = measure(reference)
    assert np.array_equal(block, expected)
    start = payload_offset + first * cols * 8
    return {"item": "a 1 MiB row block", "item_bytes": block.nbytes, "requests": requests, "bytes": sent, "seconds": elapsed,
                "ref": "download + pycauset.load", "ref_requests": ref_requests, "ref_bytes": ref_sent,
                "ref_seconds": ref_elapsed, "limit_seconds": _limit(url, start, block.nbytes)}


# --------------------------------------------------------------------------- at the wire (issue 22)

PART_BYTES = 8 << 20
WIRE_REPEAT = 2
CLIENTS = ("obstore", "fsspec")


def _best(action, repeat: int = WIRE_REPEAT):
    """(the result of the last run, best time of ``repeat`` runs after one untimed warm-up)."""
    result = action()
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        result = action()
        best = min(best, time.perf_counter() - start)
    return result, best


class ConcurrentGets:
    """The limit: ``length`` bytes at ``start`` fetched the plainest way, ``concurrency`` threads, each with one
    kept-alive ``http.client`` connection, sending ranged GETs of PART_BYTES read straight into one buffer
    (``np.empty``: a zeroed ``bytearray`` would cost a memset of the whole length on one thread first).
    Calling it fetches once; use it in a ``with`` block (its threads)."""

    def __init__(self, url: str, start: int, length: int, concurrency: int) -> None:
        self.parts = urlsplit(url)
        self.start, self.length = start, length
        self.local = threading.local()
        self.pool = ThreadPoolExecutor(concurrency)

    def _fetch(self, view: memoryview, offset: int) -> None:
        connection = getattr(self.local, "connection", None)
        if connection is None:
            connection = self.local.connection = http.client.HTTPConnection(self.parts.hostname, self.parts.port,
                                                                            timeout=60)
        end = min(self.start + self.length, offset + PART_BYTES)
        connection.request("GET", self.parts.path, headers={"Range": f"bytes={offset}-{end - 1}"})
        response = connection.getresponse()
        target = view[offset - self.start:end - self.start]
        count = 0
        while count < len(target):
            got = response.readinto(target[count:])
            if not got:
                break
            count += got
        assert response.status == 206 and count == len(target)

    def __call__(self) -> None:
        view = memoryview(np.empty(self.length, np.uint8))
        list(self.pool.map(lambda offset: self._fetch(view, offset),
                           range(self.start, self.start + self.length, PART_BYTES)))

    def __enter__(self) -> ConcurrentGets:
        return self

    def __exit__(self, *exc: object) -> None:
        self.pool.shutdown()


def limit_concurrent(url: str, start: int, length: int, concurrency: int) -> float:
    """Best time of the limit (:class:`ConcurrentGets`) for these bytes."""
    with ConcurrentGets(url, start, length, concurrency) as fetch:
        return _best(fetch)[1]


def _interleaved(actions: dict, rounds: int) -> tuple[dict, dict, dict]:
    """({label: result of its last run}, {label: best time}, {label: least CPU time of this process}) of every
    action, one untimed warm-up each, then ``rounds`` rounds running each once in turn: on a shared machine
    every one meets the same moments of load."""
    results = {label: action() for label, action in actions.items()}
    best = dict.fromkeys(actions, float("inf"))
    cpu = dict.fromkeys(actions, float("inf"))
    for _round in range(rounds):
        for label, action in actions.items():
            start, start_cpu = time.perf_counter(), time.process_time()
            results[label] = action()
            best[label] = min(best[label], time.perf_counter() - start)
            cpu[label] = min(cpu[label], time.process_time() - start_cpu)
    return results, best, cpu


KEY_ROUNDS = 3


def case_key_at_the_wire(served: ServedFiles, path: Path, concurrency: int) -> list[dict]:
    """One big kastore key read whole, through each client, and the limit for its bytes, in interleaved rounds.

    "The fsspec transport" is arrayio with ``storage_options={"client": "fsspec"}``: today it also splits the
    read into concurrent ranged GETs (through fsspec's aiohttp session); "as before issue 22" is the same
    client reading the key in one GET, which is how every remote read went before obstore and the parts.
    """
    url = served.url(path)
    variants = {"obstore client": {"client": "obstore"}, "fsspec client": {"client": "fsspec"},
                "fsspec client, one GET (as before issue 22)": {"client": "fsspec", "part_bytes": 1 << 40}}
    with kastore.load(url) as store:
        offset, nbytes = store.extent("key")[0], store["key"].nbytes
    counted = {}

    def reader(label: str, options: dict):
        def read() -> int:
            served.counts()
            with kastore.load(url, storage_options={**options, "concurrency": concurrency}) as store:
                check = int(store["key"][::1 << 13].sum())
            counted[label] = served.counts()
            return check
        return read

    limit_label = "limit"
    with ConcurrentGets(url, offset, nbytes, concurrency) as limit_fetch:
        actions = {label: reader(label, options) for label, options in variants.items()}
        results, seconds, cpu = _interleaved({**actions, limit_label: limit_fetch}, KEY_ROUNDS)
    assert len({results[label] for label in variants}) == 1
    limit = seconds[limit_label]
    limit_name = f"{concurrency} concurrent http.client ranged GETs of {PART_BYTES >> 20} MiB into one buffer"
    new, before = "fsspec client", "fsspec client, one GET (as before issue 22)"
    rows = []
    for label in variants:
        requests, sent = counted[label]
        rows.append(_rows.row("remote", f"wire: {nbytes / 2**30:.2f} GiB kastore key, {label}", seconds[label],
                              reference=seconds[new], reference_name=f"the {new} (parallel parts)", limit=limit,
                              limit_name=limit_name,
                              target=">= 0.8 of the limit, >= 3x fsspec" if label == "obstore client" else "",
                              note=f"{requests} requests, {sent / nbytes:.3f}x its bytes (server's counts), "
                                   f"{nbytes / seconds[label] / 1e9:.2f} GB/s, {cpu[label]:.2f} s of CPU"))
    ours = seconds["obstore client"]
    print(f"\ngoal rows, {nbytes / 2**30:.2f} GiB kastore key, best of {KEY_ROUNDS} interleaved rounds (load average "
          f"{os.getloadavg()[0]:.1f}): limit {limit:.3f} s ({nbytes / limit / 1e9:.2f} GB/s, {limit_name})")
    print(f"  obstore client / limit speed: {limit / ours:.2f} (goal >= 0.8)")
    print(f"  obstore client vs the fsspec client (parallel parts, now): {seconds[new] / ours:.2f}x (goal >= 3x; at "
          f"most {seconds[new] / limit:.2f}x at the limit's speed)")
    print(f"  obstore client vs the fsspec client, one GET (as before issue 22): {seconds[before] / ours:.2f}x")
    print("  client CPU seconds (this process, least of the rounds): " + ", ".join(
        f"{label} {cpu[label]:.2f}" for label in (*variants, limit_label)), flush=True)
    return rows


def case_slice_at_the_wire(url: str, concurrency: int, chunks: int = 100) -> list[dict]:
    """A bloscpack slice across ``chunks`` chunks, through each client, and the limit for its byte span."""
    rows = []
    with bloscpack.open(url) as reader:
        first = max(0, reader.nchunks // 3)
        chunks = min(chunks, reader.nchunks - first - 1)  # positions[first + chunks] is where the slice ends
        rows_per_chunk = reader.header.chunk_size // (reader.dtype.itemsize * int(np.prod(reader.shape[1:])))
        start, stop = int(reader.positions[first]), int(reader.positions[first + chunks])
    def reader(client: str):
        def read() -> tuple:
            with bloscpack.open(url, storage_options={"client": client, "concurrency": concurrency}) as reader:
                block = reader[first * rows_per_chunk:(first + chunks) * rows_per_chunk]
                return float(block[::97].sum()), reader.source.stats.requests
        return read

    with ConcurrentGets(url, start, stop - start, concurrency) as limit_fetch:
        facts, seconds, _cpu = _interleaved({**{client: reader(client) for client in CLIENTS}, "limit": limit_fetch},
                                            WIRE_REPEAT)
    assert facts["obstore"][0] == facts["fsspec"][0]
    limit = seconds["limit"]
    for client in CLIENTS:
        rows.append(_rows.row("remote", f"wire: bloscpack slice of {chunks} chunks ({(stop - start) / 1e6:.0f} MB), "
                              f"{client} client", seconds[client], reference=seconds["fsspec"],
                              reference_name="the fsspec client", limit=limit,
                              limit_name=f"{concurrency} concurrent http.client ranged GETs of its bytes",
                              note=f"{facts[client][1]} requests (open included)"))
    return rows


def write_shards(folder: Path, shards: int = 8, episodes: int = 64, frames: int = 20) -> list[Path]:
    """kdb shards of JPEG episodes (96x96, one camera) for the batch case."""
    paths = []
    rng = np.random.default_rng(7)
    for number in range(shards):
        path = folder / f"shard-{number}.kdb"
        paths.append(path)
        if path.exists():
            continue
        with kdb.Writer(path, compress="jpeg", created_timestamp=0) as out:
            for index in range(episodes):
                out.add_episode(rng.standard_normal((frames, 14)).astype(np.float32),
                                rng.standard_normal((frames, 7)).astype(np.float32),
                                images={"front": rng.integers(0, 255, (frames, 96, 96, 3), dtype=np.uint8)},
                                task=f"shard {number} task {index}")
    return paths


def case_kdb_batch(urls: list[str], batch: int = 256) -> list[dict]:
    """One batch of ``batch`` random frames from the shards through FrameDataset, through each client."""
    from arrayio.robot.torch import FrameDataset

    rows, seconds, facts = [], {}, {}
    for client in CLIENTS:
        def read(client: str = client) -> tuple:
            dataset = FrameDataset(urls, image_format="uint8", storage_options={"client": client})
            items = np.random.default_rng(11).choice(len(dataset), batch, replace=False).tolist()
            samples = dataset.__getitems__(items)
            first = samples[0] if isinstance(samples, list) else samples
            return len(dataset), repr(type(first))
        facts[client], seconds[client] = _best(read)
    for client in CLIENTS:
        rows.append(_rows.row("remote", f"wire: kdb batch of {batch} random frames from {len(urls)} shards, "
                              f"{client} client (open included)", seconds[client], reference=seconds["fsspec"],
                              reference_name="the fsspec client", note=f"{facts[client][0]} frames in all"))
    return rows


def run_wire(args: argparse.Namespace, folder: Path) -> list[dict]:
    """The at-the-wire cases, their files served by a range server in another process."""
    key_bytes = int(args.key_gb * 2**30) // 8 * 8
    key_file = folder / f"key-{key_bytes}.kas"
    if not key_file.exists():
        kastore.dump({"head": np.arange(10), "key": np.arange(key_bytes // 8, dtype="<u8")}, key_file)
    files = write_files(folder, args.gb, args.dask_gb, args.episodes, False)
    shards = write_shards(folder)
    rows = []
    with ServedFiles([key_file, files["bloscpack"], *shards]) as served:
        rows += case_key_at_the_wire(served, key_file, args.concurrency)
        rows += case_slice_at_the_wire(served.url(files["bloscpack"]), args.concurrency)
        rows += case_kdb_batch([served.url(path) for path in shards])
    print(f"\nat the wire (load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")
    print("| case | time | reference / this | this / limit |")
    print("| --- | ---: | ---: | ---: |")
    for row in rows:
        speedup = f"{row['reference'] / row['ours']:.2f}x" if row["reference"] else ""
        of_limit = f"{row['ratio_limit']:.2f}" if row["ratio_limit"] else ""
        print(f"| {row['case']} ({row['note']}) | {row['ours'] * 1e3:.0f} ms | {speedup} | {of_limit} |", flush=True)
    return rows


SERVE_FILES = """
import sys
sys.path.insert(0, sys.argv[1])
from remote_servers import FileServer
server = FileServer(sys.argv[2:])
server.start()
print(server.url, flush=True)
sys.stdin.read()
server.stop()
"""


class ServedFiles:
    """Files served by the tests' ``FileServer`` (``os.sendfile``, a thread per connection) in another process,
    as a real server would be, so that its work does not share this process's interpreter; ``url(path)`` is a
    file's URL and ``counts()`` the (requests, bytes) it served since the last call, by its own count."""

    def __init__(self, paths: list[Path]) -> None:
        self.process = subprocess.Popen([sys.executable, "-c", SERVE_FILES, str(HERE.parent / "tests" / "remote"),
                                         *map(str, paths)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.base = self.process.stdout.readline().strip()

    def url(self, path: Path) -> str:
        return f"{self.base}/{path.name}"

    def counts(self) -> tuple[int, int]:
        """(requests, body bytes) the server sent since the previous call, by its own count."""
        parts = urlsplit(self.base)
        connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
        try:
            connection.request("GET", FileServer.COUNTS_PATH)
            requests, sent = connection.getresponse().read().split()
        finally:
            connection.close()
        return int(requests), int(sent)

    def __enter__(self) -> ServedFiles:
        return self

    def __exit__(self, *exc: object) -> None:
        self.process.stdin.close()
        self.process.wait(timeout=60)


# The blockings measured: to_dask's default (runs of chunks up to 64 MiB a task) and a task per chunk (as before).
DASK_BLOCKINGS = {"runs of chunks up to 64 MiB (default)": arrayio_dask.BLOCK_BYTES, "a task per 1 MiB chunk": 1}


def case_dask(path: Path, threads: int) -> dict:
    """The dask runs, the file served by the sendfile server in another process (as a real server would be),
    and the time its bytes take over the wire alone (the limit's concurrent plain GETs)."""
    with ServedFiles([path]) as served:
        url = served.url(path)
        result = _dask_runs(url, path, threads, served)
        size = path.stat().st_size
        result["wire"] = limit_concurrent(url, 0, size, 8)
        return result


def _ones_block(block_info: dict) -> np.ndarray:
    """A chunk written in the worker (fresh memory, like a decoded chunk), nothing read."""
    return np.ones(block_info[None]["chunk-shape"], dtype=block_info[None]["dtype"])


def _timed(action) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def _dask_runs(url: str, path: Path, threads: int, served: ServedFiles) -> dict:
    import dask.array
    from distributed import Client, LocalCluster, wait

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cluster = LocalCluster(n_workers=2, threads_per_worker=threads, processes=True, host="127.0.0.1",
                               dashboard_address=None)
        client = Client(cluster)
    runs, sums = {}, set()
    try:
        for label, block_bytes in DASK_BLOCKINGS.items():
            array = arrayio_dask.to_dask(url, block_bytes=block_bytes)
            sums.add(int(array.sum().compute()))  # warm-up: worker imports, open files, page cache
            served.counts()
            remote = _timed(lambda: sums.add(int(array.sum().compute())))
            requests, sent = served.counts()
            persisted = array.persist()
            wait(persisted)
            memory = _timed(lambda: sums.add(int(persisted.sum().compute())))
            del persisted
            # The same chunks made in the workers without reading anything: what dask's scheduling of
            # root tasks (queued, a round trip each) costs by itself, the floor for any reader.
            made = dask.array.map_blocks(_ones_block, chunks=array.chunks, dtype=array.dtype,
                                         meta=np.empty((0,) * array.ndim, dtype=array.dtype))
            made.sum().compute()
            no_io = _timed(lambda: made.sum().compute())
            runs[label] = {"tasks": array.numblocks[0], "remote": remote, "memory": memory, "no_io": no_io,
                           "requests": requests, "sent": sent}
    finally:
        client.close()
        cluster.close()
    local = _timed(lambda: sums.add(int(bloscpack.unpack_ndarray_from_file(path).sum())))
    assert len(sums) == 1
    with bloscpack.open(path) as reader:
        chunks = reader.nchunks
    return {"nbytes": array.nbytes, "file_bytes": path.stat().st_size, "chunks": chunks, "runs": runs,
            "local": local}


def print_dask(row: dict, threads: int) -> list[dict]:
    """The dask table and its goal row; the benchmark's rows."""
    nbytes = row["nbytes"]
    print(f"\ndask: {nbytes / 1e9:.2f} GB of uint16 in a {row['file_bytes'] / 1e9:.2f} GB bloscpack file of "
          f"{row['chunks']} chunks, LocalCluster(2 processes x {threads} threads), load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print("| blocking | run | time | throughput | ratio to in-memory (same blocking) |")
    print("| --- | --- | ---: | ---: | ---: |")
    rows = []
    for label, run in row["runs"].items():
        served = f"{run['requests']} requests, {run['sent'] / row['file_bytes']:.3f}x the file (server's counts)"
        for name, seconds in ((f"to_dask(url).sum() over HTTP ({served})", run["remote"]),
                              ("same chunks persisted in worker memory", run["memory"]),
                              ("same chunks made in the workers, no I/O (np.ones)", run["no_io"])):
            print(f"| {label}, {run['tasks']} tasks | {name} | {seconds:.2f} s | {nbytes / seconds / 1e9:.2f} GB/s | "
                  f"{seconds / run['memory']:.2f}x |")
        rows.append(_rows.row("remote", f"dask: to_dask(url).sum(), {label}", run["remote"], reference=row["local"],
                              reference_name="local unpack_ndarray_from_file(path).sum(), no cluster",
                              limit=run["memory"], limit_name="same chunks persisted in worker memory",
                              target="<= 1.5x in-memory" if run is next(iter(row["runs"].values())) else "",
                              note=f"{run['tasks']} tasks"))
    for name, seconds in (("local unpack_ndarray_from_file(path).sum(), one process", row["local"]),
                          ("the file's bytes over the wire alone: 8 concurrent http.client GETs", row["wire"])):
        print(f"| | {name} | {seconds:.2f} s | {row['file_bytes'] / seconds / 1e9:.2f} GB/s | |")
    default, per_chunk = row["runs"].values()
    print(f"\ngoal row, dask: to_dask(url).sum() over HTTP / the same chunks in worker memory = "
          f"{default['remote'] / default['memory']:.2f}x (goal <= 1.5x); over HTTP, default blocking against a task "
          f"per chunk: {per_chunk['remote'] / default['remote']:.1f}x faster; the wire alone takes "
          f"{row['wire'] / default['memory']:.2f}x the in-memory sum", flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gb", type=float, default=1.0)
    parser.add_argument("--dask-gb", type=float, default=1.0)
    parser.add_argument("--episodes", type=int, default=2000)
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--no-dask", action="store_true")
    parser.add_argument("--only-dask", action="store_true")
    parser.add_argument("--threads", type=int, default=1, help="threads per dask worker (both dask runs)")
    parser.add_argument("--key-gb", type=float, default=1.0, help="GiB of the kastore key read at the wire")
    parser.add_argument("--concurrency", type=int, default=8, help="concurrent GETs (ours and the limit's)")
    parser.add_argument("--no-wire", action="store_true")
    parser.add_argument("--only-wire", action="store_true")
    _rows.add_arguments(parser)
    args = parser.parse_args()
    if args.quick:
        args.gb, args.dask_gb, args.episodes, args.key_gb = 0.03, 0.1, 200, 0.0625
    folder = args.dir or Path(tempfile.mkdtemp(prefix="arrayio-remote-bench-"))
    try:
        rows = run(args, folder)
    finally:
        if args.dir is None:
            shutil.rmtree(folder, ignore_errors=True)
    sizes = f"{args.gb:g} GB files ({args.episodes} kdb episodes)"
    if not args.no_dask:
        sizes += f", a {args.dask_gb:g} GB bloscpack file for dask (LocalCluster, 2 processes x {args.threads} threads)"
    _rows.write(args.json_path, "remote", f"{sizes}; HTTP range server on 127.0.0.1, best of {REPEAT}", rows)


def run(args: argparse.Namespace, folder: Path) -> list[dict]:
    """Every case, printed as a table; their rows."""
    folder.mkdir(parents=True, exist_ok=True)
    wire = [] if args.no_wire else run_wire(args, folder)
    if args.only_wire:
        return wire
    files = write_files(folder, args.gb, args.dask_gb, args.episodes, not args.no_dask)
    server = RangeServer()
    maps = []
    for name, path in files.items():
        if path.exists() and name != "dask":
            with open(path, "rb") as handle:
                maps.append(mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ))
            server.put(path.name, maps[-1])
    server.start()
    measure = Measure(server)
    url = {name: f"{server.url}/{path.name}" for name, path in files.items() if name != "dask"}
    for address in url.values():  # warm-up: imports, the HTTP session, the server's page cache
        _limit(address, 0, 1)
    sizes = ", ".join(f"{name} {path.stat().st_size / 1e9:.2f} GB" for name, path in files.items() if path.exists())
    print(f"files in {folder}; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; sizes: {sizes}")
    print("| format | item | item bytes | requests | bytes / (item + 64 KiB) | time | reference requests | "
          "reference bytes | reference time | limit (one GET of the item) | ours / limit |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    cases = [] if args.only_dask else [("kastore", lambda: case_kastore(url["kastore"], measure)),
             ("bloscpack", lambda: case_bloscpack(url["bloscpack"], measure)),
             ("kdb", lambda: case_kdb(url["kdb"], measure)),
             ("kdb", lambda: case_kdb_frame(url["kdb"], measure)),
             ("kdb", lambda: case_kdb_tree(url["kdb"], measure)),
             ("pycauset", lambda: case_pycauset(url["pycauset"], measure, folder))]
    rows = []
    for name, case in cases:
        row = case()
        rows.append(_rows.row("remote", f"{name}: {row['item']}", row["seconds"], reference=row["ref_seconds"],
                              reference_name=row["ref"], limit=row["limit_seconds"],
                              limit_name=row.get("limit_name", "one ranged GET of the item"),
                              target=row.get("target", "<= 5 requests"), note=f"{row['requests']} requests"))
        rows.append(_rows.row("remote", f"{name}: bytes sent", row["bytes"], reference=row["ref_bytes"],
                              reference_name="reference", limit=row["item_bytes"], limit_name="the item's bytes",
                              unit="bytes", target="<= 1.01 x item + 64 KiB"))
        print(f"| {name} | {row['item']} | {row['item_bytes']:,} | {row['requests']} | "
              f"{row['bytes'] / (row['item_bytes'] + SLACK):.3f} | {row['seconds'] * 1e3:.1f} ms | "
              f"{row['ref_requests']} | {row['ref_bytes']:,} | {row['ref_seconds']:.2f} s | "
              f"{row['limit_seconds'] * 1e3:.1f} ms | {row['seconds'] / row['limit_seconds']:.2f}x |", flush=True)
    if not args.no_dask:
        rows += print_dask(case_dask(files["dask"], args.threads), args.threads)
    server.stop()
    return wire + rows


if __name__ == "__main__":
    main()
