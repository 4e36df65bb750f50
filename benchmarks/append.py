"""What the crash-safe bloscpack append costs: ours (copy beside, rename) against the reference (in place).

    PYTHONPATH=src python benchmarks/append.py [--sizes 64M,256M,1G] [--repeat 3] [--dir /tmp]
                                               [--quick] [--json PATH]

For files of each size (random bytes of 16 symbols, 1 MiB chunks, room for 64 more chunks),
appends 1 MiB with ``arrayio.bloscpack.append`` and with bloscpack 0.16.0's in-place append,
and times the two limits of ours: an fsync'd write of the appended chunks alone (what an
in-place append must at least do) and the kernel copy of the file (``copy_file_range`` +
fsync, what ours adds where the file system cannot reflink). Minimum of --repeat runs, page
cache warm (``--quick``: 4M,16M, best of 2). Numbers come from whatever machine runs this; on
a shared 2-core box they are noisy.
"""

from __future__ import annotations

import argparse
import collections
import collections.abc
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import _rows  # before this folder leaves the path
import numpy as np

# benchmarks/bloscpack.py would shadow the reference package: drop this folder from the path
sys.path[:] = [entry for entry in sys.path if Path(entry or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from arrayio import bloscpack  # noqa: E402


def _size(text: str) -> int:
    units = {"K": 2**10, "M": 2**20, "G": 2**30}
    return int(float(text[:-1]) * units[text[-1]]) if text[-1] in units else int(text)


def _reference_append():
    if not hasattr(collections, "MutableMapping"):
        collections.MutableMapping = collections.abc.MutableMapping  # bloscpack 0.16 predates Python 3.10
    from bloscpack.append import append

    return append


def _timed(action, prepare, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        prepare()
        started = time.perf_counter()
        action()
        best = min(best, time.perf_counter() - started)
    return best


def _copy_limit(path: Path, copy: Path) -> None:
    with open(path, "rb") as source, open(copy, "wb") as target:
        size = os.fstat(source.fileno()).st_size
        done = 0
        while done < size:
            done += os.copy_file_range(source.fileno(), target.fileno(), size - done)
        os.fsync(target.fileno())


def _write_limit(path: Path, data: bytes) -> None:
    with open(path, "ab") as target:
        target.write(data)
        target.flush()
        os.fsync(target.fileno())


def main() -> None:
    """Print one table row per size."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="64M,256M")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dir", default=None)
    _rows.add_arguments(parser)
    options = parser.parse_args()
    if options.quick:
        options.sizes, options.repeat = "4M,16M", 2
    rows = []
    reference_append = _reference_append()
    folder = Path(tempfile.mkdtemp(prefix="arrayio-append-", dir=options.dir))
    extra = folder / "extra.bin"
    appended = np.random.default_rng(1).integers(0, 16, 2**20, dtype=np.uint8).tobytes()
    extra.write_bytes(appended)
    print(f"files in {folder.parent}; append 1 MiB; minimum of {options.repeat} runs\n")
    print("| file size | ours (s) | reference in place (s) | ours / reference | write 1 MiB + fsync (s) "
          "| kernel copy of the file + fsync (s) | ours / (copy + write) |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    try:
        for text in options.sizes.split(","):
            size = _size(text)
            data = np.random.default_rng(0).integers(0, 16, size, dtype=np.uint8).tobytes()
            original = folder / "original.blp"
            bloscpack.pack_bytes_to_file(data[:size - 2**19], original, chunk_size=2**20,
                                         bloscpack_args={"max_app_chunks": 64})
            target = folder / "target.blp"

            def fresh() -> None:
                shutil.copyfile(original, target)
                with open(target, "rb+") as handle:
                    os.fsync(handle.fileno())

            ours = _timed(lambda: bloscpack.append(target, extra), fresh, options.repeat)
            theirs = _timed(lambda: reference_append(str(target), str(extra)), fresh, options.repeat)
            write = _timed(lambda: _write_limit(folder / "w.bin", appended),
                           lambda: (folder / "w.bin").unlink(missing_ok=True), options.repeat)
            copy = _timed(lambda: _copy_limit(original, folder / "copy.blp"),
                          lambda: (folder / "copy.blp").unlink(missing_ok=True), options.repeat)
            print(f"| {text} | {ours:.3f} | {theirs:.3f} | {ours / theirs:.1f} | {write:.3f} | {copy:.3f} "
                  f"| {ours / (copy + write):.2f} |")
            rows.append(_rows.row("append", f"append 1 MiB to {text}", ours, reference=theirs,
                                  reference_name="bloscpack 0.16 in place", limit=copy + write,
                                  limit_name="kernel copy + fsync'd write", note="crash-safe: copy beside, rename"))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    _rows.write(options.json_path, "append", f"bloscpack files of {options.sizes} (1 MiB chunks), 1 MiB appended; "
                f"best of {options.repeat}", rows)


if __name__ == "__main__":
    main()
