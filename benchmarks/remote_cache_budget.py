"""Memory of a process reading many remote objects: every object's cache under one ``remote_cache_bytes``
budget, against each object's own 32 MiB alone (the default, the budget being off).

    python benchmarks/remote_cache_budget.py [--objects 48] [--mib 32] [--budget-mib 512] [--quick] [--json PATH]

The objects are served over HTTP by the tests' range server in another process. A fresh process per case
opens every object and reads it whole, 8 MiB at a time (each read kept in the object's cache), then
reports its peak resident memory, the bytes its caches hold, and the rate. The reference is the same code
with the budget off. The limit is the budget itself.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:] = [str(HERE.parent / "src")] + [entry for entry in sys.path if Path(entry or ".").resolve() != HERE]
sys.path.append(str(HERE))

import _rows  # noqa: E402
from kdb_remote_training import DelayedHttp  # noqa: E402 - the range server in its own process

AREA = "remote-cache-budget"
READ = 8 << 20

READER = """
import json, resource, sys, time
sys.path.insert(0, sys.argv[1])
import arrayio
from arrayio import limits
limits.set(remote_cache_bytes=int(sys.argv[2]))
urls = sys.argv[3:]
started = time.perf_counter()
remotes = [arrayio.RemoteFile(url) for url in urls]
for remote in remotes:
    for offset in range(0, remote.size, %d):
        remote.read(offset, min(%d, remote.size - offset))
elapsed = time.perf_counter() - started
print(json.dumps({"seconds": elapsed, "held": sum(remote._cache.held for remote in remotes),
                  "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                  "bytes": sum(remote.size for remote in remotes)}))
""" % (READ, READ)


def read_all(urls: list[str], budget: int) -> dict:
    """Peak RSS, bytes held by the caches, seconds and bytes read of a fresh process reading every URL whole."""
    done = subprocess.run([sys.executable, "-c", READER, str(HERE.parent / "src"), str(budget), *urls],
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=48)
    parser.add_argument("--mib", type=int, default=32, help="MiB per object (the default cache of one)")
    parser.add_argument("--budget-mib", type=int, default=512, help="the remote_cache_bytes budget, in MiB")
    _rows.add_arguments(parser)
    args = parser.parse_args(argv)
    if args.quick:
        args.objects, args.mib = 6, 8
    if args.quick:
        args.budget_mib = 16
    if args.objects < 1 or args.mib < 1 or args.budget_mib < 1:
        parser.error("--objects, --mib and --budget-mib must be at least 1")
    from arrayio import limits

    budget = args.budget_mib << 20
    with tempfile.TemporaryDirectory() as scratch:
        paths = []
        for number in range(args.objects):
            path = Path(scratch) / f"object-{number:03d}.bin"
            path.write_bytes(os.urandom(args.mib << 20))
            paths.append(path)
        server = DelayedHttp(0.0, paths)
        try:
            before = read_all(server.urls, limits.NO_BUDGET)
            after = read_all(server.urls, budget)
        finally:
            server.stop()
    data = (f"{args.objects} objects of {args.mib} MiB over HTTP on loopback (the range server in another process), "
            f"each read whole in 8 MiB reads by a fresh process; budget {budget >> 20} MiB; "
            f"load average {os.getloadavg()[0]:.1f} at the start")
    print(data)
    for label, figures in (("each object's own cache only (the budget off)", before), ("one budget for all", after)):
        print(f"{label}: caches hold {figures['held'] / 2**20:,.0f} MiB, peak RSS {figures['peak_rss'] / 2**20:,.0f} "
              f"MiB, {figures['bytes'] / figures['seconds'] / 1e6:,.0f} MB/s")
    rows = [_rows.row(AREA, "bytes the caches hold after reading every object", after["held"] / 2**20,
                      reference=before["held"] / 2**20, reference_name="each object's own 32 MiB cache only",
                      limit=budget / 2**20, limit_name="remote_cache_bytes", unit="MiB", target="<= the budget"),
            _rows.row(AREA, "peak resident memory", after["peak_rss"] / 2**20, reference=before["peak_rss"] / 2**20,
                      reference_name="each object's own 32 MiB cache only", unit="MiB"),
            _rows.row(AREA, "read rate", after["bytes"] / after["seconds"] / 1e6,
                      reference=before["bytes"] / before["seconds"] / 1e6,
                      reference_name="each object's own 32 MiB cache only", unit="MB/s", higher_is_better=True)]
    _rows.write(args.json_path, AREA, data, rows)


if __name__ == "__main__":
    main()
