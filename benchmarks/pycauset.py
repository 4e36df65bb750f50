"""Benchmark of the pycauset container: arrayio vs pycauset 0.6.1 vs np.save/np.load, in one run.

    python benchmarks/pycauset.py [--size BYTES] [--repeat N] [--folder DIR] [--quick] [--json PATH]

Measures, on one float64 matrix of --size bytes (default 1 GiB):

* save: arrayio (atomic: temp file, fsync, rename), pycauset.save (writes in
  place, no fsync), np.save, np.save + fsync, and the physical limit (one
  plain write of the same bytes + fsync);
* load (open, O(1)): arrayio.load(...).array, pycauset.load, np.load(mmap_mode="r");
  and load + read every byte (sum): arrayio, np.load (full read), a plain readinto;
* update_metadata on a 1 MiB and a --size payload (must cost the same);
* arrayio.load on a 1 MiB and a --size payload (must cost the same: O(1)).

Files live in a temporary folder (the page cache is warm for every
contender alike). Numbers come from a shared, busy 2-core machine.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

# This script is itself named pycauset.py: drop its folder from the path so that
# `import pycauset` finds the reference package, and put this checkout's src first.
_HERE = Path(__file__).resolve().parent
import _rows  # from this folder, before it leaves the path

sys.path[:] = [entry for entry in sys.path if Path(entry or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent / "src"))

from arrayio import pycauset as ours

best = _rows.best


def median(action, repeat: int) -> float:
    """The median of ``repeat`` runs, in seconds."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def plain_write(path: Path, array: np.ndarray) -> None:
    with open(path, "wb") as handle:
        handle.write(memoryview(array).cast("B"))
        handle.flush()
        os.fsync(handle.fileno())


def plain_read_sum(path: Path, size: int) -> float:
    buffer = np.empty(size, dtype=np.uint8)
    with open(path, "rb", buffering=0) as handle:
        handle.readinto(memoryview(buffer))
    return float(buffer.view(np.float64).sum())


def import_reference(folder: Path):
    """pycauset, imported from ``folder`` so its ./.pycauset backing folder lands there."""
    previous = os.getcwd()
    os.chdir(folder)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import pycauset
        pycauset.set_backing_dir(str(folder))
        return pycauset
    except ImportError:
        return None
    finally:
        os.chdir(previous)


def row(name: str, seconds: float, size: int) -> None:
    rate = f"{size / seconds / 1e9:8.2f} GB/s" if size and seconds > 0 else ""
    print(f"  {name:<44} {seconds * 1e3:12.3f} ms   {rate}")


def ratio(name: str, ours_seconds: float, theirs_seconds: float) -> None:
    print(f"  {name:<60} {ours_seconds / theirs_seconds:8.3f}")


def report_rows(results: dict[str, float], big: str) -> list[dict]:
    """The run_all.py rows: ours against pycauset 0.6.1 and the plain I/O limit."""
    return [
        _rows.row("pycauset", "save", results["save ours"], reference=results.get("save theirs"),
                  reference_name="pycauset 0.6.1, no fsync", limit=results["limit write"],
                  limit_name="write + fsync"),
        _rows.row("pycauset", "load (open)", results["load ours"], reference=results.get("load theirs"),
                  reference_name="pycauset 0.6.1", limit=results["np.load mmap"], limit_name="np.load mmap"),
        _rows.row("pycauset", "load + sum", results["read ours"], reference=results["read np"],
                  reference_name="np.load + sum", limit=results["limit read"], limit_name="readinto + sum"),
        _rows.row("pycauset", f"update_metadata, {big} payload", results[f"update {big}"],
                  limit=results["update 1 MiB"], limit_name="same on 1 MiB", target="same cost (O(1))"),
        _rows.row("pycauset", f"load, {big} payload", results[f"open {big}"],
                  limit=results["open 1 MiB"], limit_name="same on 1 MiB", target="same cost (O(1))"),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=1 << 30, help="payload bytes (default 1 GiB)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--folder", type=Path, default=None, help="where the temporary files go")
    _rows.add_arguments(parser)
    args = parser.parse_args()
    if args.quick:
        args.size, args.repeat = 16 << 20, 1

    folder = Path(tempfile.mkdtemp(prefix="pycauset-bench-", dir=args.folder))
    reference = import_reference(folder)
    cols = 4096
    rows = max(1, args.size // 8 // cols)
    matrix = np.random.default_rng(0).standard_normal((rows, cols))
    size = matrix.nbytes
    print(f"pycauset container benchmark: float64 {rows}x{cols} = {size / 2**20:.1f} MiB, best of {args.repeat}, "
          f"files in {folder}")
    try:
        paths = {name: folder / f"{name}" for name in ("ours.pycauset", "theirs.pycauset", "np.npy", "plain.bin")}
        results: dict[str, float] = {}

        print("save")
        results["save ours"] = best(lambda: ours.save(matrix, paths["ours.pycauset"]), args.repeat)
        row("arrayio save (temp + fsync + rename)", results["save ours"], size)
        if reference is not None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                theirs = reference.matrix(matrix)
                results["save theirs"] = best(lambda: reference.save(theirs, str(paths["theirs.pycauset"])),
                                              args.repeat)
                del theirs
            row("pycauset 0.6.1 save (in place, no fsync)", results["save theirs"], size)
        results["np.save"] = best(lambda: np.save(paths["np.npy"], matrix), args.repeat)
        row("np.save (no fsync)", results["np.save"], size)
        results["np.save+fsync"] = best(lambda: (np.save(paths["np.npy"], matrix), fsync_path(paths["np.npy"])),
                                        args.repeat)
        row("np.save + fsync", results["np.save+fsync"], size)
        results["limit write"] = best(lambda: plain_write(paths["plain.bin"], matrix), args.repeat)
        row("plain write + fsync (limit)", results["limit write"], size)

        print("load (open only)")
        results["load ours"] = median(lambda: ours.load(paths["ours.pycauset"]).array, 20)
        row("arrayio load().array (mmap)", results["load ours"], size)
        if reference is not None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                results["load theirs"] = median(lambda: reference.load(str(paths["theirs.pycauset"])), 20)
            row("pycauset 0.6.1 load", results["load theirs"], size)
        results["np.load mmap"] = median(lambda: np.load(paths["np.npy"], mmap_mode="r"), 20)
        row("np.load(mmap_mode='r')", results["np.load mmap"], size)

        print("load + read every value (sum)")
        expected = float(matrix.sum())
        matrix = None  # free the 1 GiB before the read cases
        results["read ours"] = best(lambda: float(ours.load(paths["ours.pycauset"]).array.sum()), args.repeat)
        row("arrayio load().array.sum()", results["read ours"], size)
        results["read np"] = best(lambda: float(np.load(paths["np.npy"]).sum()), args.repeat)
        row("np.load().sum() (full read)", results["read np"], size)
        results["limit read"] = best(lambda: plain_read_sum(paths["plain.bin"], size), args.repeat)
        row("plain readinto + sum (limit)", results["limit read"], size)
        assert np.isclose(float(ours.load(paths["ours.pycauset"]).array.sum()), expected)

        print("update_metadata and load vs payload size (median of 50)")
        small = folder / "small.pycauset"
        ours.save(np.zeros((1 << 20) // 8), small)
        counter = iter(range(10**9))
        for name, path in (("1 MiB", small), (f"{size / 2**20:.0f} MiB", paths["ours.pycauset"])):
            results[f"update {name}"] = median(
                lambda path=path: ours.update_metadata(path, {"properties": {"n": next(counter)}}), 50)
            row(f"update_metadata, {name} payload", results[f"update {name}"], 0)
            results[f"open {name}"] = median(lambda path=path: ours.load(path).array, 50)
            row(f"load().array, {name} payload", results[f"open {name}"], 0)
        big = f"{size / 2**20:.0f} MiB"

        print("ratios")
        if reference is not None:
            ratio("save: arrayio / pycauset 0.6.1", results["save ours"], results["save theirs"])
        ratio("save: arrayio / np.save (no fsync)", results["save ours"], results["np.save"])
        ratio("save: arrayio / np.save + fsync", results["save ours"], results["np.save+fsync"])
        ratio("save: arrayio / plain write + fsync (limit)", results["save ours"], results["limit write"])
        if reference is not None:
            ratio("load (open): arrayio / pycauset 0.6.1", results["load ours"], results["load theirs"])
        ratio("load (open): arrayio / np.load(mmap_mode='r')", results["load ours"], results["np.load mmap"])
        ratio("load + sum: arrayio / np.load().sum()", results["read ours"], results["read np"])
        ratio("load + sum: arrayio / plain readinto + sum (limit)", results["read ours"], results["limit read"])
        ratio(f"update_metadata: {big} / 1 MiB payload", results[f"update {big}"], results["update 1 MiB"])
        ratio(f"load (open): {big} / 1 MiB payload", results[f"open {big}"], results["open 1 MiB"])
        _rows.write(args.json_path, "pycauset", f"float64 {rows}x{cols} matrix = {size / 2**20:.0f} MiB, "
                    f"best of {args.repeat}", report_rows(results, big))
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10
        print(f"peak RSS of this process (all cases together): {peak:.0f} MiB")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
