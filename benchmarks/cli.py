"""Benchmark ``arrayio cat`` against ``kastore dump`` (kastore 0.3.6), in one run.

    python benchmarks/cli.py [--values 50000000] [--dump-values 2000000] [--repeat 3] [--quick] [--json PATH]

1. ``arrayio cat big.kas key | head -1`` on an int64 array of --values values: wall time and
   peak RSS of the arrayio process, against the floor of starting the command at all
   (``arrayio --version``) and against the array's size (what formatting it whole would touch).
2. ``arrayio cat FILE KEY > /dev/null`` and ``python -m kastore dump FILE KEY > /dev/null`` on
   --dump-values random int64 values: lines per second of each, and the ratio; the limit is
   Python's own ``"\\n".join(map(str, array.tolist()))`` in one process (no I/O, no streaming).

Every run is a fresh subprocess; times are the minimum of --repeat runs with a warm page cache.
``--quick``: 2,000,000 and 200,000 values, best of 2.
On a shared 2-core box the numbers are noisy: read the ratios, not the absolute times.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _rows
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
ARRAYIO = [sys.executable, "-m", "arrayio"]


def _timed(argv: list[str], *, pipe_to_head: bool = False) -> tuple[float, float]:
    """Wall seconds and peak RSS (MiB) of one run of ``argv`` (stdout to ``head -1`` or /dev/null)."""
    start = time.perf_counter()
    if pipe_to_head:
        with subprocess.Popen(argv, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL) as process, \
                subprocess.Popen(["head", "-1"], stdin=process.stdout, stdout=subprocess.DEVNULL) as head:
            process.stdout.close()
            head.wait()
            _, _, usage = os.wait4(process.pid, 0)
            process.returncode = 0
    else:
        with open(os.devnull, "wb") as sink, subprocess.Popen(argv, env=ENV, stdout=sink) as process:
            _, _, usage = os.wait4(process.pid, 0)
            process.returncode = 0
    return time.perf_counter() - start, usage.ru_maxrss / 1024


def _best(argv: list[str], repeat: int, **kwargs: bool) -> tuple[float, float]:
    runs = [_timed(argv, **kwargs) for _ in range(repeat)]
    return min(run[0] for run in runs), max(run[1] for run in runs)


def main() -> None:
    """Run both benchmarks and print the figures and ratios."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--values", type=int, default=50_000_000)
    parser.add_argument("--dump-values", type=int, default=2_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    _rows.add_arguments(parser)
    options = parser.parse_args()
    if options.quick:
        options.values, options.dump_values, options.repeat = 2_000_000, 200_000, 2
    sys.path.insert(0, str(ROOT / "src"))
    from arrayio import kastore

    with tempfile.TemporaryDirectory() as folder:
        big = Path(folder) / "big.kas"
        values = np.zeros(options.values, dtype=np.int64)
        values[:3] = [7, 8, 9]
        kastore.dump({"big": values}, big)
        del values
        floor, floor_rss = _best([*ARRAYIO, "--version"], options.repeat)
        head, head_rss = _best([*ARRAYIO, "cat", str(big), "big"], options.repeat, pipe_to_head=True)
        array_mib = options.values * 8 / 2**20
        print(f"cat | head -1 on {options.values:,} int64 ({array_mib:.0f} MiB):")
        print(f"  arrayio cat: {head:.2f} s, peak RSS {head_rss:.0f} MiB")
        print(f"  start-up floor (arrayio --version): {floor:.2f} s, {floor_rss:.0f} MiB")
        print(f"  ratio to the floor: time {head / floor:.2f}x, memory {head_rss / floor_rss:.2f}x; "
              f"peak RSS is {head_rss / array_mib:.1%} of the array")
        big.unlink()

        small = Path(folder) / "dump.kas"
        array = np.random.default_rng(1).integers(0, 10**9, options.dump_values)
        kastore.dump({"v": array}, small)
        ours, ours_rss = _best([*ARRAYIO, "cat", str(small), "v"], options.repeat)
        theirs, theirs_rss = _best([sys.executable, "-m", "kastore", "dump", str(small), "v"], options.repeat)
        start = time.perf_counter()
        text = "\n".join(map(str, array.tolist()))
        limit = time.perf_counter() - start
        del text
        print(f"full dump of {options.dump_values:,} int64 to /dev/null:")
        print(f"  arrayio cat: {ours:.2f} s ({options.dump_values / ours / 1e6:.2f} M lines/s), "
              f"peak RSS {ours_rss:.0f} MiB")
        print(f"  kastore dump: {theirs:.2f} s ({options.dump_values / theirs / 1e6:.2f} M lines/s), "
              f"peak RSS {theirs_rss:.0f} MiB")
        print(f"  in-process str/join limit: {limit:.2f} s (+ start-up {floor:.2f} s)")
        print(f"  ratio: arrayio is {theirs / ours:.2f}x kastore dump's speed, {ours / (limit + floor):.2f}x the limit's "
              f"time, {ours_rss / theirs_rss:.2f}x its memory")
    rows = [_rows.row("cli", f"cat piped to head -1, {array_mib:.0f} MiB array", head, limit=floor,
                      limit_name="arrayio --version", note=f"peak RSS {head_rss:.0f} MiB"),
            _rows.row("cli", "cat piped to head -1, peak RSS", head_rss, limit=floor_rss,
                      limit_name="arrayio --version", unit="MiB", note=f"{head_rss / array_mib:.1%} of the array"),
            _rows.row("cli", f"cat, {options.dump_values:,} values", options.dump_values / ours,
                      reference=options.dump_values / theirs, reference_name="python -m kastore dump",
                      limit=options.dump_values / (limit + floor), limit_name="str/join in process + start-up",
                      unit="lines/s", higher_is_better=True),
            _rows.row("cli", "cat, peak RSS", ours_rss, reference=theirs_rss, reference_name="python -m kastore dump",
                      unit="MiB")]
    _rows.write(options.json_path, "cli", f"cat piped to head -1 on {options.values:,} int64, full cat of "
                f"{options.dump_values:,} int64; best of {options.repeat}, a fresh process each", rows)


if __name__ == "__main__":
    main()
