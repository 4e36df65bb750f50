"""Remote benchmark: requests, bytes and time to read one item of a big file over HTTP, and dask throughput.

    python benchmarks/remote.py [--gb 1.0] [--dask-gb 2.0] [--episodes 2000] [--dir DIR] [--no-dask]
                                [--quick] [--json PATH]

Every file is served by the tests' HTTP range server (tests/remote/remote_servers.py) on 127.0.0.1, which
counts the requests it receives and the body bytes it sends: the figures below are the server's. For
each format: open a file of --gb (kdb: --episodes episodes) from its URL and read one item (a 10 MB
kastore key, one bloscpack chunk, one kdb episode, one kdb frame, a 1 MB row block of a pycauset matrix), against
the reference reading the same item (it needs the whole file) and against the limit: one ranged GET
of exactly the item's bytes. Goal: bytes <= 1.01 x item + 64 KiB, at most 5 requests in all.

Then ``to_dask(url).sum().compute()`` on a --dask-gb bloscpack file with a LocalCluster of 2 worker
processes, against the same sum over the same chunks already in the workers' memory (persisted:
dask's own scheduling cost) and a local ``unpack_ndarray_from_file(path).sum()``. Goal: within 1.5x
of the in-memory run. One run of each (after one warm-up of the cluster and the page cache).
``--quick``: 0.03 GB files, 200 episodes, a 0.1 GB dask file.
"""

from __future__ import annotations

import argparse
import mmap
import os
import shutil
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # for _rows, also in dask's spawned workers, whose path lacks this folder
import _rows  # noqa: E402

# This folder holds kastore.py, bloscpack.py ... benchmarks that would shadow the reference packages.
sys.path[:] = [str(HERE.parent / "src"), str(HERE.parent / "tests" / "remote"), str(HERE.parent / "tests")] + [
    entry for entry in sys.path if Path(entry or ".").resolve() != HERE]

import fsspec
import references
from remote_servers import RangeServer

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


SERVE_ONE_FILE = """
import mmap, sys
sys.path.insert(0, sys.argv[2])
from remote_servers import RangeServer
server = RangeServer()
with open(sys.argv[1], "rb") as handle:
    data = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
url = server.put("dask.blp", data)
server.start()
print(url, flush=True)
sys.stdin.read()
server.stop()
"""


def case_dask(path: Path, threads: int) -> dict:
    """The dask run, its file served by a server in another process (as a real server would be)."""
    import subprocess

    server = subprocess.Popen([sys.executable, "-c", SERVE_ONE_FILE, str(path), str(HERE.parent / "tests" / "remote")],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        return _dask_runs(server.stdout.readline().strip(), path, threads)
    finally:
        server.stdin.close()
        server.wait(timeout=60)


def _ones_block(block_info: dict) -> np.ndarray:
    """A chunk written in the worker (fresh memory, like a decoded chunk), nothing read."""
    return np.ones(block_info[None]["chunk-shape"], dtype=block_info[None]["dtype"])


def _dask_runs(url: str, path: Path, threads: int) -> dict:
    import dask.array
    from distributed import Client, LocalCluster, wait

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cluster = LocalCluster(n_workers=2, threads_per_worker=threads, processes=True, host="127.0.0.1",
                               dashboard_address=None)
        client = Client(cluster)
    try:
        array = arrayio_dask.to_dask(url)
        array.sum().compute()  # warm-up: worker imports, open files, page cache
        start = time.perf_counter()
        remote_sum = array.sum().compute()
        remote = time.perf_counter() - start
        persisted = array.persist()
        wait(persisted)
        start = time.perf_counter()
        memory_sum = persisted.sum().compute()
        memory = time.perf_counter() - start
        del persisted
        # The same chunks made in the workers without reading anything: what dask's scheduling of
        # root tasks (queued, a round trip each) costs by itself, the floor for any reader.
        made = dask.array.map_blocks(_ones_block, chunks=array.chunks, dtype=array.dtype,
                                     meta=np.empty((0,) * array.ndim, dtype=array.dtype))
        made.sum().compute()
        start = time.perf_counter()
        made.sum().compute()
        no_io = time.perf_counter() - start
    finally:
        client.close()
        cluster.close()
    start = time.perf_counter()
    local_sum = bloscpack.unpack_ndarray_from_file(path).sum()
    local = time.perf_counter() - start
    assert remote_sum == memory_sum == local_sum
    return {"nbytes": array.nbytes, "file_bytes": path.stat().st_size, "chunks": array.numblocks[0], "remote": remote,
                "memory": memory, "no_io": no_io, "local": local}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gb", type=float, default=1.0)
    parser.add_argument("--dask-gb", type=float, default=2.0)
    parser.add_argument("--episodes", type=int, default=2000)
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--no-dask", action="store_true")
    parser.add_argument("--only-dask", action="store_true")
    parser.add_argument("--threads", type=int, default=1, help="threads per dask worker (both dask runs)")
    _rows.add_arguments(parser)
    args = parser.parse_args()
    if args.quick:
        args.gb, args.dask_gb, args.episodes = 0.03, 0.1, 200
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
             ("pycauset", lambda: case_pycauset(url["pycauset"], measure, folder))]
    rows = []
    for name, case in cases:
        row = case()
        rows.append(_rows.row("remote", f"{name}: {row['item']}", row["seconds"], reference=row["ref_seconds"],
                              reference_name=row["ref"], limit=row["limit_seconds"],
                              limit_name="one ranged GET of the item", target="<= 5 requests",
                              note=f"{row['requests']} requests"))
        rows.append(_rows.row("remote", f"{name}: bytes sent", row["bytes"], reference=row["ref_bytes"],
                              reference_name="reference", limit=row["item_bytes"], limit_name="the item's bytes",
                              unit="bytes", target="<= 1.01 x item + 64 KiB"))
        print(f"| {name} | {row['item']} | {row['item_bytes']:,} | {row['requests']} | "
              f"{row['bytes'] / (row['item_bytes'] + SLACK):.3f} | {row['seconds'] * 1e3:.1f} ms | "
              f"{row['ref_requests']} | {row['ref_bytes']:,} | {row['ref_seconds']:.2f} s | "
              f"{row['limit_seconds'] * 1e3:.1f} ms | {row['seconds'] / row['limit_seconds']:.2f}x |", flush=True)
    if not args.no_dask:
        row = case_dask(files["dask"], args.threads)
        print()
        print(f"dask: {row['nbytes'] / 1e9:.2f} GB of uint16 in a {row['file_bytes'] / 1e9:.2f} GB bloscpack file, "
              f"{row['chunks']} chunks, LocalCluster(2 processes x {args.threads} threads)")
        print("| run | time | throughput | ratio to in-memory |")
        print("| --- | ---: | ---: | ---: |")
        for label, seconds in (("to_dask(url).sum() over HTTP", row["remote"]),
                               ("same chunks persisted in worker memory", row["memory"]),
                               ("same chunks made in the workers, no I/O (np.ones)", row["no_io"]),
                               ("local unpack_ndarray_from_file(path).sum()", row["local"])):
            print(f"| {label} | {seconds:.2f} s | {row['nbytes'] / seconds / 1e9:.2f} GB/s | "
                  f"{seconds / row['memory']:.2f}x |")
        rows.append(_rows.row("remote", "dask: to_dask(url).sum()", row["remote"], reference=row["local"],
                              reference_name="local unpack_ndarray_from_file(path).sum(), no cluster",
                              limit=row["memory"], limit_name="same chunks persisted in worker memory",
                              target="<= 1.5x in-memory"))
    server.stop()
    return rows


if __name__ == "__main__":
    main()
