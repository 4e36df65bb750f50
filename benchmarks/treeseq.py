"""Tree sequences for tskit users: arrayio.tskit.load against tskit.load, locally and over loopback HTTP,
and .trees <-> .tsz against tszip.

Cases (each in a fresh subprocess, so the peak resident set is the case's own: ``VmHWM`` after the
case minus the resident set after the imports, and ``resident`` what the result still holds when the
case returns; times are the best of --repeat runs, page cache warm):

* local load: ``arrayio.tskit.load(path)`` vs ``tskit.load(path)``; limit: reading the file's bytes;
  ``TableCollection.load`` alone tells what the tables cost and, subtracted from ``tskit.load``, what
  building the TreeSequence (tskit's tree indexes) costs: the floor of any loader returning one;
* HTTP load: ``arrayio.tskit.load(url)`` (parallel ranged reads into memory) vs downloading the whole
  object to a temporary file then ``tskit.load``; limit: one GET of the whole object into memory; once
  from the loopback server as fast as it sends, once paced to ``--paced-mbps`` a connection (what one
  connection to an object store gets), where ranged reads in parallel can show;
* metadata only over HTTP: ``load(url, skip_tables=True)`` vs download + ``tskit.load(skip_tables=True)``,
  with the requests the server counted;
* ``.trees -> .tsz``: ``arrayio.tskit.to_tszip`` vs ``tszip.compress`` (time and size);
* ``.tsz -> .trees``: ``arrayio.tskit.tszip_to_trees`` vs ``tszip.decompress`` + ``dump``.

The tree sequence is an msprime simulation written once into the temp folder (about 160 MB; --quick:
about 16 MB) and reused by later runs. The goal rows of issue 23 are printed last, each with its floor.
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

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import _rows  # noqa: E402

sys.path[:] = [str(HERE.parent / "src"), str(HERE.parent / "tests" / "remote")] + [
    entry for entry in sys.path if Path(entry or ".").resolve() != HERE]

AREA = "treeseq"
# (samples, sequence length, mutation rate): about 160 MB and 16 MB
SIZES = {"full": (20_000, 5e7, 1.2e-7), "quick": (5_000, 2e7, 1e-8)}


def _sample(quick: bool) -> Path:
    samples, length, rate = SIZES["quick" if quick else "full"]
    path = Path(tempfile.gettempdir()) / f"arrayio-bench-treeseq-{samples}-{int(length)}-{rate:g}.trees"
    if not path.exists():
        import msprime

        ancestry = msprime.sim_ancestry(samples, sequence_length=length, recombination_rate=1e-8,
                                        population_size=10_000, random_seed=11)
        msprime.sim_mutations(ancestry, rate=rate, random_seed=12).dump(str(path) + ".tmp")
        os.replace(str(path) + ".tmp", path)
    return path


def _resident() -> int:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _high_water() -> int:
    """This process's peak resident bytes (VmHWM): ru_maxrss would also count the parent's resident set
    at fork (Linux keeps it across exec), which here holds the served files."""
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _run_case(case: str, path: Path, url: str, scratch: Path) -> dict:
    """One case in this (fresh) process: seconds and peak resident bytes above the baseline."""
    import urllib.request  # noqa: F401 - imports stay out of the timed calls, on both sides
    from concurrent.futures import ThreadPoolExecutor  # noqa: F401

    import fsspec.implementations.http  # noqa: F401
    import tskit
    import tszip

    from arrayio import tskit as arrayio_tskit

    def download(skip_tables: bool = False) -> object:
        target = scratch / "downloaded.trees"
        with urllib.request.urlopen(url) as response, open(target, "wb") as out:
            while chunk := response.read(8 << 20):
                out.write(chunk)
        return tskit.load(target, skip_tables=skip_tables)

    def get_whole() -> bytes:
        with urllib.request.urlopen(url) as response:
            return response.read()

    cases = {
        "local:ours": lambda: arrayio_tskit.load(path),
        "local:tskit": lambda: tskit.load(path),
        "local:limit": lambda: path.read_bytes(),
        "local:tables": lambda: tskit.TableCollection.load(path),
        "local:ours-tables": lambda: arrayio_tskit.load(path, tables=arrayio_tskit.TABLES),
        "http:ours": lambda: arrayio_tskit.load(url),
        "http:tskit": download,
        "http:limit": get_whole,
        "meta:ours": lambda: arrayio_tskit.load(url, skip_tables=True),
        "meta:tskit": lambda: download(skip_tables=True),
        "tsz:ours": lambda: arrayio_tskit.to_tszip(path, scratch / "ours.tsz"),
        "tsz:tszip": lambda: tszip.compress(tskit.load(path), scratch / "theirs.tsz"),
        "trees:ours": lambda: arrayio_tskit.tszip_to_trees(scratch / "theirs.tsz", scratch / "ours.trees"),
        "trees:tszip": lambda: tszip.decompress(scratch / "theirs.tsz").dump(scratch / "theirs.trees"),
    }
    baseline = _resident()
    start = time.perf_counter()
    result = cases[case]()
    seconds = time.perf_counter() - start
    peak = _high_water()
    resident = _resident()
    del result
    sizes = {name: os.path.getsize(scratch / name) for name in ("ours.tsz", "theirs.tsz")
             if (scratch / name).exists()}
    return {"seconds": seconds, "peak": max(0, peak - baseline), "resident": max(0, resident - baseline),
            "sizes": sizes}


def _measure(case: str, path: Path, url: str, scratch: Path, repeat: int) -> dict:
    best: dict = {}
    for _ in range(repeat):
        output = subprocess.run([sys.executable, __file__, "--case", case, "--path", str(path), "--url", url,
                                 "--scratch", str(scratch)], check=True, stdout=subprocess.PIPE, text=True).stdout
        result = json.loads(output.strip().splitlines()[-1])
        if not best or result["seconds"] < best["seconds"]:
            best = result
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    _rows.add_arguments(parser)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--paced-mbps", type=float, default=100.0,
                        help="bytes/s (in MB) each connection of the paced server sends (0: leave the case out)")
    parser.add_argument("--loads-only", action="store_true",
                        help="leave out the .tsz cases (minutes on the full file): the load goals alone")
    parser.add_argument("--case")
    parser.add_argument("--path")
    parser.add_argument("--url")
    parser.add_argument("--scratch")
    args = parser.parse_args()
    if args.case:
        print(json.dumps(_run_case(args.case, Path(args.path), args.url, Path(args.scratch))))
        return
    from remote_servers import RangeServer

    path = _sample(args.quick)
    size = path.stat().st_size
    server, paced = RangeServer(), RangeServer()
    paced.rate = args.paced_mbps * 1e6
    server.start()
    paced.start()
    rows = []
    try:
        url = server.put("bench.trees", path.read_bytes())
        paced_url = paced.put("bench.trees", path.read_bytes())
        with tempfile.TemporaryDirectory(prefix="arrayio-bench-treeseq-") as folder:
            scratch = Path(folder)
            got = {case: _measure(case, path, url, scratch, args.repeat) for case in (
                "local:ours", "local:tskit", "local:limit", "local:tables", "local:ours-tables",
                "http:ours", "http:tskit", "http:limit")}
            server.counts.reset()
            got["meta:ours"] = _measure("meta:ours", path, url, scratch, args.repeat)
            meta_requests = server.counts.total()[0] / args.repeat
            got["meta:tskit"] = _measure("meta:tskit", path, url, scratch, args.repeat)
            if args.paced_mbps:
                for side in ("ours", "tskit", "limit"):
                    got[f"paced:{side}"] = _measure(f"http:{side}", path, paced_url, scratch, args.repeat)
            for case in () if args.loads_only else ("tsz:tszip", "tsz:ours", "trees:ours", "trees:tszip"):
                got[case] = _measure(case, path, url, scratch, args.repeat)
        rows = _table(got, size, meta_requests, args.paced_mbps)
    finally:
        server.stop()
        paced.stop()
    data = f"msprime tree sequence of {size / 1e6:.1f} MB; best of {args.repeat} fresh processes per case"
    print(f"{AREA}: {data}; load average {os.getloadavg()[0]:.1f}")
    for item in rows:
        print(f"  {item['case']:<48} ours {item['ours']:.3f} {item['unit']}  {item['reference_name']} "
              f"{item['reference']:.3f}  ratio {item['ratio_reference']:.2f}"
              + (f"  limit ({item['limit_name']}) {item['limit']:.3f}" if item["limit"] is not None else "")
              + (f"  ({item['note']})" if item["note"] else ""))
    _print_goals(got, size)
    _rows.write(args.json_path, AREA, data, rows)


def _table(got: dict, size: int, meta_requests: float, paced_mbps: float) -> list[dict]:
    megabytes = size / 1e6
    rows = [
        _rows.row(AREA, f"load {megabytes:.0f} MB local", got["local:ours"]["seconds"],
                  reference=got["local:tskit"]["seconds"], reference_name="tskit.load",
                  limit=got["local:limit"]["seconds"], limit_name="read the file", target="<= 1.0x"),
        _rows.row(AREA, f"load {megabytes:.0f} MB local: peak RSS", got["local:ours"]["peak"] / 1e6,
                  reference=got["local:tskit"]["peak"] / 1e6, reference_name="tskit.load",
                  limit=got["local:tskit"]["resident"] / 1e6, limit_name="the TreeSequence itself", unit="MB",
                  target="<= 0.6x"),
        _rows.row(AREA, f"TableCollection of {megabytes:.0f} MB: peak RSS", got["local:ours-tables"]["peak"] / 1e6,
                  reference=got["local:tables"]["peak"] / 1e6, reference_name="TableCollection.load",
                  limit=got["local:tables"]["resident"] / 1e6, limit_name="the tables themselves", unit="MB",
                  note="load(path, tables=TABLES), built a table at a time"),
        _rows.row(AREA, f"load {megabytes:.0f} MB over loopback HTTP", got["http:ours"]["seconds"],
                  reference=got["http:tskit"]["seconds"], reference_name="download + tskit.load",
                  limit=got["http:limit"]["seconds"], limit_name="one GET", target="<= 0.6x"),
        _rows.row(AREA, "metadata only over loopback HTTP", got["meta:ours"]["seconds"],
                  reference=got["meta:tskit"]["seconds"], reference_name="download + tskit.load(skip_tables)",
                  note=f"{meta_requests:g} requests", target="<= 3 requests"),
    ]
    if "paced:ours" in got:
        rows.append(_rows.row(AREA, f"load {megabytes:.0f} MB over HTTP at {paced_mbps:g} MB/s a connection",
                              got["paced:ours"]["seconds"], reference=got["paced:tskit"]["seconds"],
                              reference_name="download + tskit.load", limit=got["paced:limit"]["seconds"],
                              limit_name="one GET"))
    if "tsz:ours" not in got:
        return rows
    rows.append(_rows.row(AREA, ".trees -> .tsz", got["tsz:ours"]["seconds"], reference=got["tsz:tszip"]["seconds"],
                          reference_name="tszip.compress"))
    sizes = got["tsz:ours"]["sizes"]
    rows.append(_rows.row(AREA, ".tsz size", sizes.get("ours.tsz", 0) / 1e6, reference=sizes.get("theirs.tsz", 0) / 1e6,
                          reference_name="tszip.compress", unit="MB", note=f".trees is {megabytes:.1f} MB"))
    rows.append(_rows.row(AREA, ".tsz -> .trees", got["trees:ours"]["seconds"],
                          reference=got["trees:tszip"]["seconds"], reference_name="tszip.decompress + dump"))
    return rows


def _print_goals(got: dict, size: int) -> None:
    """The goals of issue 23, each with what it measured and the floor no loader returning a TreeSequence
    passes: building the TreeSequence (tskit.load less TableCollection.load) after the last byte arrived,
    and holding the TreeSequence itself."""
    build = max(0.0, got["local:tskit"]["seconds"] - got["local:tables"]["seconds"])
    http_floor = got["http:limit"]["seconds"] + build
    resident = got["local:tskit"]["resident"]
    tables = got["local:tables"]["resident"]

    def line(goal: str, ratio: float, target: float, floor: str) -> None:
        print(f"  {goal:<58} {ratio:5.2f}x  {'met' if ratio <= target else 'NOT MET'}   {floor}")

    print("goals (issue 23):")
    line("local load time <= 1.0x tskit.load", got["local:ours"]["seconds"] / got["local:tskit"]["seconds"], 1.0,
         f"floor: reading the file {got['local:limit']['seconds']:.3f} s")
    line("local load peak RSS <= 0.6x tskit.load", got["local:ours"]["peak"] / got["local:tskit"]["peak"], 0.6,
         f"floor: the TreeSequence itself {resident / 1e6:.0f} MB = "
         f"{resident / max(1, got['local:tskit']['peak']):.2f}x"
         f" (tables alone {tables / 1e6:.0f} MB, file {size / 1e6:.0f} MB)")
    line("load over loopback HTTP <= 0.6x download + tskit.load",
         got["http:ours"]["seconds"] / got["http:tskit"]["seconds"], 0.6,
         f"floor: one GET {got['http:limit']['seconds']:.3f} s + building the TreeSequence {build:.3f} s = "
         f"{http_floor / got['http:tskit']['seconds']:.2f}x")
    if "paced:ours" in got:
        line("  the same, paced like an object store connection",
             got["paced:ours"]["seconds"] / got["paced:tskit"]["seconds"], 0.6,
             f"one GET {got['paced:limit']['seconds']:.3f} s")


if __name__ == "__main__":
    main()
