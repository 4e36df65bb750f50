"""Benchmark arrayio.bloscpack against bloscpack 0.16.0 and np.save/np.load, in one run.

    python benchmarks/bloscpack.py [--size 1G] [--repeat 3] [--quick] [--json PATH]

For a float64 array of --size bytes, smooth (linspace) and hard (random normal): pack and unpack
with ours, the reference and np.save/np.load; a 1 MiB slice through ``arrayio.bloscpack.open``
against the full unpack; peak resident memory of each unpack. Every case runs in a fresh
subprocess (timings are the minimum of --repeat runs, page cache warm, no fsync of np.save).
Numbers come from whatever machine runs this; on a shared 2-core box they are noisy.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _rows

ROOT = Path(__file__).resolve().parents[1]
CASES = ("ours_pack", "ours_pack_nofsync", "reference_pack", "np_save", "ours_unpack", "reference_unpack", "np_load",
         "ours_slice")


def _size(text: str) -> int:
    units = {"K": 2**10, "M": 2**20, "G": 2**30}
    return int(float(text[:-1]) * units[text[-1]]) if text[-1] in units else int(text)


def _data(kind: str, size: int):
    import numpy as np

    count = size // 8
    if kind == "linspace":
        return np.linspace(0, 100, count)
    return np.random.default_rng(42).standard_normal(count)


def _resident() -> tuple[int, int]:
    """(current, peak) resident set of this process in bytes."""
    fields = {}
    with open("/proc/self/status") as status:
        for line in status:
            key, _, value = line.partition(":")
            fields[key] = value
    return int(fields["VmRSS"].split()[0]) * 1024, int(fields["VmHWM"].split()[0]) * 1024


def _reference():
    import collections
    import collections.abc

    collections.MutableMapping = collections.abc.MutableMapping
    here = str(Path(__file__).resolve().parent)
    sys.path[:] = [entry for entry in sys.path if os.path.abspath(entry or ".") != here]
    sys.modules.pop("bloscpack", None)  # this script is called bloscpack.py too
    import bloscpack

    return bloscpack


def run_case(case: str, kind: str, size: int, folder: Path, repeat: int) -> dict:
    """One case in this (fresh) process; returns seconds (min over repeats) and memory."""
    import numpy as np

    if case.startswith("ours"):
        # imported only for our cases: it turns on python-blosc's GIL release for the process
        sys.path.insert(0, str(ROOT / "src"))
        import arrayio.bloscpack as ours
        from arrayio.bloscpack._writer import pack_ndarray

    paths = {"ours": folder / f"{kind}.ours.blp", "reference": folder / f"{kind}.ref.blp",
             "np": folder / f"{kind}.npy"}
    reference = _reference() if case.startswith("reference") else None
    array = _data(kind, size) if "_pack" in case or case == "np_save" else None
    baseline, _ = _resident()
    actions = {
        "ours_pack": lambda: ours.pack_ndarray_to_file(array, paths["ours"]),
        "ours_pack_nofsync": lambda: _plain_write(paths["ours"], lambda stream: pack_ndarray(
            stream, array, "1M", None, None, None)),
        "reference_pack": lambda: reference.pack_ndarray_to_file(array, str(paths["reference"])),
        "np_save": lambda: np.save(paths["np"], array),
        "ours_unpack": lambda: ours.unpack_ndarray_from_file(paths["ours"]),
        "reference_unpack": lambda: reference.unpack_ndarray_from_file(str(paths["reference"])),
        "np_load": lambda: np.load(paths["np"]),
    }
    if case == "ours_slice":
        rows = 2**20 // 8
        start = size // 16 + 12345

        def one_slice():
            with ours.open(str(paths["ours"])) as reader:
                return reader[start:start + rows]

        best = min(_timed(one_slice) for _ in range(max(repeat, 5)))
        assert np.array_equal(one_slice(), _data(kind, size)[start:start + rows])
        return {"seconds": best[0], "cpu": best[1]}
    seconds, cpu = min(_timed(actions[case]) for _ in range(repeat))
    _, peak = _resident()
    result = {"seconds": seconds, "cpu": cpu, "peak_rss": peak, "baseline_rss": baseline}
    if case.endswith("pack") and not case.endswith("unpack"):
        result["file_size"] = os.path.getsize(paths["ours" if case.startswith("ours") else "reference"])
    if case.endswith("unpack") or case == "np_load":
        assert np.array_equal(actions[case](), _data(kind, size))
    return result


def _timed(action) -> tuple[float, float]:
    """(wall seconds, CPU seconds of all threads) of one call."""
    before = resource.getrusage(resource.RUSAGE_SELF)
    start = time.perf_counter()
    action()
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_SELF)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _plain_write(path: Path, write) -> None:
    """Write through a plain file: what the reference does (no temp file, no fsync)."""
    with open(path, "wb") as stream:
        write(stream)


def _spawn(case: str, kind: str, size: int, folder: Path, repeat: int) -> dict:
    output = subprocess.run([sys.executable, __file__, "--case", case, "--kind", kind, "--size", str(size),
                             "--folder", str(folder), "--repeat", str(repeat)],
                            check=True, stdout=subprocess.PIPE, text=True).stdout
    return json.loads(output.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", default="1G", help="array size in bytes (K/M/G suffixes), default 1G")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--case", choices=CASES, help=argparse.SUPPRESS)
    parser.add_argument("--kind", help=argparse.SUPPRESS)
    parser.add_argument("--folder", help=argparse.SUPPRESS)
    _rows.add_arguments(parser)
    options = parser.parse_args()
    if options.quick and not options.case:
        options.size, options.repeat = "32M", 1
    size = _size(options.size)
    if options.case:
        print(json.dumps(run_case(options.case, options.kind, size, Path(options.folder), options.repeat)))
        return
    print(f"bloscpack benchmark: float64 arrays of {size / 2**30:.2f} GiB, min of {options.repeat} runs, "
          f"{os.cpu_count()} cores")
    rows = []
    with tempfile.TemporaryDirectory(prefix="arrayio-bench-", dir=os.environ.get("BENCH_DIR")) as folder:
        for kind in ("linspace", "normal"):
            results = {case: _spawn(case, kind, size, Path(folder), options.repeat) for case in CASES}
            for path in Path(folder).glob(f"{kind}.*"):
                path.unlink()
            _report(kind, size, results)
            rows += _report_rows(kind, results)
    _rows.write(options.json_path, "bloscpack", f"float64 arrays of {size / 2**20:.0f} MiB (linspace and random "
                f"normal), min of {options.repeat} runs, a fresh process per case", rows)


def _report_rows(kind: str, results: dict) -> list[dict]:
    """The run_all.py rows of one data kind: ours against bloscpack 0.16.0 and np.save / np.load."""
    seconds = {case: result["seconds"] for case, result in results.items()}
    return [
        _rows.row("bloscpack", f"pack {kind}", seconds["ours_pack"], reference=seconds["reference_pack"],
                  reference_name="bloscpack 0.16.0", limit=seconds["np_save"], limit_name="np.save",
                  target=">= 1.5x faster than the reference", note="ours fsyncs, the reference does not"),
        _rows.row("bloscpack", f"unpack {kind}", seconds["ours_unpack"], reference=seconds["reference_unpack"],
                  reference_name="bloscpack 0.16.0", limit=seconds["np_load"], limit_name="np.load",
                  target=">= 1.5x faster; <= 1.3x np.load"),
        _rows.row("bloscpack", f"1 MiB slice {kind}", seconds["ours_slice"], reference=seconds["reference_unpack"],
                  reference_name="bloscpack 0.16.0 whole unpack: no slicing there",
                  target=">= 100x faster than a full unpack"),
    ]


def _report(kind: str, size: int, results: dict) -> None:
    seconds = {case: result["seconds"] for case, result in results.items()}
    print(f"\n== {kind} ==")
    for case in CASES:
        result = results[case]
        extra = ""
        if "peak_rss" in result and "unpack" in case or case == "np_load":
            extra = (f"  peak RSS {result['peak_rss'] / size:.2f}x array "
                     f"({(result['peak_rss'] - result['baseline_rss']) / size:.2f}x above the interpreter)")
        if "file_size" in result:
            extra = f"  file {result['file_size'] / 2**20:.1f} MiB (ratio {size / result['file_size']:.1f})"
        print(f"  {case:17s} {result['seconds']:8.3f} s  (cpu {result['cpu']:6.3f} s){extra}")
    print(f"  pack:   reference/ours = {seconds['reference_pack'] / seconds['ours_pack']:.2f}x faster "
          f"(target >= 1.5; ours fsyncs, the reference does not);  without our fsync "
          f"{seconds['reference_pack'] / seconds['ours_pack_nofsync']:.2f}x;  ours/np.save = "
          f"{seconds['ours_pack'] / seconds['np_save']:.2f}")
    print(f"  unpack: reference/ours = {seconds['reference_unpack'] / seconds['ours_unpack']:.2f}x faster "
          f"(target >= 1.5);  ours/np.load = {seconds['ours_unpack'] / seconds['np_load']:.2f} "
          f"(target <= 1.3 for linspace)")
    print(f"  1 MiB slice: full unpack/slice = {seconds['ours_unpack'] / seconds['ours_slice']:.0f}x faster "
          f"(target >= 100)")
    print(f"  unpack peak RSS: ours {results['ours_unpack']['peak_rss'] / size:.2f}x, reference "
          f"{results['reference_unpack']['peak_rss'] / size:.2f}x, np.load "
          f"{results['np_load']['peak_rss'] / size:.2f}x the array (target <= 1.1)")


if __name__ == "__main__":
    main()
