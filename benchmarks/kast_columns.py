"""KAST columns for the kastore benchmark, and a standalone run with ratios.

``measure(data, folder, repeat)`` times arrayio.kast on the caller's data (the
kastore benchmark passes its own, so both layouts see the same arrays):

    "kast dump"          dump to a new file (atomic: temp file, fsync, rename)
    "kast load+touch"    load (maps the file) and touch every page of every array
    "kast load+one key"  load and touch the key with the smallest array (the
                         cost of opening plus one lookup)

Times are the best of ``repeat`` runs, in seconds, with a hot page cache.

Run on its own, it builds ``--size`` GB of data the way benchmarks/kastore.py
does (20 keys over the ten dtypes, one of them 1 MiB) plus a many-keys set,
and prints kast against arrayio's kastore layout and the plain I/O limit:

    python benchmarks/kast_columns.py [--size 1.0] [--keys 100000] [--repeat 3] [--dir DIR]
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys
import tempfile
import time
from typing import Callable

import numpy

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "src"))

import arrayio.kast as kast  # noqa: E402 - after making this checkout's sources importable
import arrayio.kastore as kastore  # noqa: E402

DTYPES = ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float32", "float64"]


def touch(array: numpy.ndarray) -> int:
    """Read one element per 4 KiB page: every page of a mapped array comes in, no real arithmetic."""
    if array.nbytes <= 4096:
        return len(array[:1].tobytes())
    step = max(1, 4096 // array.dtype.itemsize)
    return int(array[::step].astype(bool).sum())


def warm(path: pathlib.Path) -> None:
    """Read the file once so every reader starts from a hot page cache."""
    with open(path, "rb") as stream:
        while stream.read(1 << 24):
            pass


def best_of(repeat: int, action: Callable[[], object], before: Callable[[], object] = lambda: None) -> float:
    """Best wall time of ``repeat`` runs of ``action`` (``before`` runs untimed ahead of each)."""
    best = float("inf")
    for _ in range(repeat):
        before()
        start = time.perf_counter()
        action()
        best = min(best, time.perf_counter() - start)
    return best


def _smallest_key(data: dict[str, numpy.ndarray]) -> str:
    return min(data, key=lambda key: (numpy.asarray(data[key]).nbytes, key))


def _layout_columns(module, suffix: str, data: dict[str, numpy.ndarray], folder: pathlib.Path,
                    repeat: int) -> dict[str, float]:
    path = folder / f"columns{suffix}"
    one = _smallest_key(data)

    def load_touch_all() -> None:
        with module.load(path) as store:
            for key in store:
                touch(store[key])

    def load_one() -> None:
        with module.load(path) as store:
            touch(store[one])

    name = module.FORMAT_NAME
    timings = {f"{name} dump": best_of(repeat, lambda: module.dump(data, path))}
    timings[f"{name} load+touch"] = best_of(repeat, load_touch_all, lambda: warm(path))
    timings[f"{name} load+one key"] = best_of(repeat, load_one, lambda: warm(path))
    path.unlink()
    return timings


def measure(data: dict[str, numpy.ndarray], folder: pathlib.Path, repeat: int) -> dict[str, float]:
    """Seconds for "kast dump", "kast load+touch" and "kast load+one key" on ``data`` (best of ``repeat``)."""
    return _layout_columns(kast, ".kast", data, pathlib.Path(folder), repeat)


# --------------------------------------------------------------------------- standalone run

def big_data(gigabytes: float) -> dict[str, numpy.ndarray]:
    """20 keys, ~``gigabytes`` GB: one 1 MiB key 'small', 19 large ones over the ten dtypes."""
    total = int(gigabytes * 1e9)
    small = 1 << 20
    share = max(8, (total - small) // 19)
    data = {"small": numpy.arange(small // 8, dtype=numpy.float64)}
    for index in range(19):
        dtype = numpy.dtype(DTYPES[index % 10])
        data[f"key_{index:02d}"] = numpy.arange(share // dtype.itemsize).astype(dtype, copy=False)
    return data


def many_data(count: int) -> dict[str, numpy.ndarray]:
    """``count`` keys of 0-6 int32 elements."""
    return {f"key_{index}": numpy.arange(index % 7, dtype=numpy.int32) for index in range(count)}


def plain_limits(data: dict[str, numpy.ndarray], folder: pathlib.Path, repeat: int) -> dict[str, float]:
    """A plain write (+fsync) of the arrays' bytes, and a plain read of that file."""
    path = folder / "plain.bin"

    def write() -> None:
        with open(path, "wb") as stream:
            for array in data.values():
                stream.write(memoryview(numpy.ascontiguousarray(array)).cast("B"))
            stream.flush()
            os.fsync(stream.fileno())

    def read() -> None:
        with open(path, "rb") as stream:
            stream.read()

    timings = {"plain write+fsync": best_of(repeat, write)}
    timings["plain read"] = best_of(repeat, read, lambda: warm(path))
    path.unlink()
    return timings


def report(title: str, data: dict[str, numpy.ndarray], folder: pathlib.Path, repeat: int) -> None:
    """Time kast, kastore and the plain limit on ``data`` and print the ratios (below 1: kast is faster)."""
    timings = {**measure(data, folder, repeat), **_layout_columns(kastore, ".kas", data, folder, repeat),
               **plain_limits(data, folder, repeat)}
    nbytes = sum(numpy.asarray(array).nbytes for array in data.values())
    print(f"\n{title}: {len(data)} keys, {nbytes / 1e9:.3f} GB of arrays")
    for name, seconds in timings.items():
        print(f"  {name:24s} {seconds:9.4f} s")
    rows = [
        ("kast dump / kastore dump", timings["kast dump"], timings["kastore dump"]),
        ("kast dump / plain write+fsync", timings["kast dump"], timings["plain write+fsync"]),
        ("kast load+touch / kastore", timings["kast load+touch"], timings["kastore load+touch"]),
        ("kast load+touch / plain read", timings["kast load+touch"], timings["plain read"]),
        ("kast load+one key / kastore", timings["kast load+one key"], timings["kastore load+one key"]),
        ("kast load+one key / plain read", timings["kast load+one key"], timings["plain read"]),
    ]
    for label, ours, theirs in rows:
        print(f"  {label:34s} {ours / theirs:8.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=float, default=1.0, help="GB of array data in the big set")
    parser.add_argument("--keys", type=int, default=100_000, help="keys in the many-keys set")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dir", type=pathlib.Path, default=None, help="folder for the files (default: a temp dir)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="kast-bench-") as folder:
        print(f"kast benchmark, best of {args.repeat}, hot page cache; shared busy 2-core machine, numbers are noisy")
        report("big", big_data(args.size), pathlib.Path(folder), args.repeat)
        report("many", many_data(args.keys), pathlib.Path(folder), args.repeat)


if __name__ == "__main__":
    main()
