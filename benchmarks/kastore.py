"""kastore benchmark: arrayio against kastore 0.3.6 (both engines) and the plain I/O limit.

    python benchmarks/kastore.py [--gb 1.0] [--keys 100000] [--repeat 3] [--dir DIR] [--quick] [--json PATH]

Every case runs in a fresh child process (so peak RSS is its own) on the same
data; writers create a new file, readers start after a warm-up read (hot page
cache, as in the notes' figures). Times
are the best of --repeat runs. Printed ratios: ours / theirs (below 1 = we are
faster) and ours / the limit (a plain write or read of the same bytes).

Data: "big" = 20 keys, ~1 GB in all (the ten dtypes in turn; key "small" is
1 MiB, the other 19 share the rest), "many" = 100,000 keys of 0-6 int32s.
"touch" reads one element per 4 KiB page of every array (the first element of
an array under 4 KiB), which forces every page of a mapped file into memory
without adding arithmetic.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _rows

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src"
DTYPES = ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float32", "float64"]


# --------------------------------------------------------------------------- data (rebuilt in every child)

def big_data(gigabytes: float) -> dict:
    """20 keys, ~``gigabytes`` GB: one 1 MiB key 'small', 19 large ones."""
    import numpy as np

    total = int(gigabytes * 1e9)
    small = 1 << 20
    share = (total - small) // 19
    data = {"small": np.arange(small // 8, dtype=np.float64)}
    for index in range(19):
        dtype = np.dtype(DTYPES[index % 10])
        data[f"key_{index:02d}"] = np.arange(share // dtype.itemsize).astype(dtype, copy=False)
    return data


def many_data(count: int) -> dict:
    """``count`` keys of 0-6 int32 elements."""
    import numpy as np

    return {f"key_{index}": np.arange(index % 7, dtype=np.int32) for index in range(count)}


def touch(array) -> int:
    """Read one element per 4 KiB page (forces mapped pages in, no real arithmetic)."""
    if array.nbytes <= 4096:
        return len(array[:1].tobytes())
    step = max(1, 4096 // array.dtype.itemsize)
    return int(array[::step].astype(bool).sum())


# --------------------------------------------------------------------------- child cases

def _rss_kb(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field):
                return int(line.split()[1])
    return 0


def _reference():
    import kastore

    return kastore


def case(name: str, path: str, args: argparse.Namespace) -> float:
    """Run one case once in this process; returns seconds."""
    import numpy as np

    import arrayio.kastore as ours

    data_for = {"big": lambda: big_data(args.gb), "many": lambda: many_data(args.keys)}
    op, _, dataset = name.rpartition("@")
    if op.startswith("dump"):
        data = data_for[dataset]()
        start = time.perf_counter()
        if op == "dump ours":
            ours.dump(data, path)
        elif op == "dump ref-python":
            _reference().dump(data, path, engine="python")
        elif op == "dump ref-c":
            _reference().dump(data, path, engine="c")
        elif op in ("dump plain", "dump plain+fsync"):
            with open(path, "wb") as stream:
                for array in data.values():
                    stream.write(memoryview(array).cast("B"))
                stream.flush()
                if op == "dump plain+fsync":
                    os.fsync(stream.fileno())
        elif op == "dump kast":
            import arrayio.kast as kast

            kast.dump(data, path)
        else:
            raise SystemExit(f"unknown case {name}")
        return time.perf_counter() - start
    start = time.perf_counter()
    if op == "read plain":
        with open(path, "rb") as stream:
            stream.read()
    elif op == "touch ours":
        with ours.load(path) as store:
            for key in store:
                touch(store[key])
    elif op == "touch ours read_all":
        with ours.load(path, read_all=True) as store:
            for key in store:
                touch(store[key])
    elif op in ("touch ref-python", "touch ref-python read_all", "touch ref-c"):
        engine = "c" if op.endswith("ref-c") else "python"
        store = _reference().load(path, engine=engine, read_all=op.endswith("read_all"))
        for key in store:
            touch(np.asarray(store[key]))
    elif op == "one ours":
        with ours.load(path) as store:
            touch(store["small"])
    elif op in ("one ref-python", "one ref-python read_all", "one ref-c"):
        engine = "c" if op.endswith("ref-c") else "python"
        store = _reference().load(path, engine=engine, read_all=op.endswith("read_all"))
        touch(np.asarray(store["small"]))
    elif op in ("touch kast", "one kast"):
        import arrayio.kast as kast

        with kast.load(path) as store:
            for key in (store if op.startswith("touch") else ["small"]):
                touch(store[key])
    else:
        raise SystemExit(f"unknown case {name}")
    return time.perf_counter() - start


def child(args: argparse.Namespace) -> None:
    """Entry point of a child process: run one case, print JSON with time and memory."""
    # This script is itself named kastore.py: keep its folder off the path so that
    # ``import kastore`` finds the reference package.
    sys.path[:] = [entry for entry in sys.path if Path(entry or ".").resolve() != HERE]
    import numpy  # noqa: F401 - imported before the baseline so it is not counted

    import arrayio.kastore  # noqa: F401
    if "kast" in args.child:
        import arrayio.kast  # noqa: F401 - imported outside the timed region, like kastore

    baseline = _rss_kb("VmRSS:")
    try:
        seconds = case(args.child, args.path, args)
        result = {"seconds": seconds, "peak_mb": (_rss_kb("VmHWM:") - baseline) / 1024}
    except Exception as error:  # the reference fails on some inputs; report it as a result
        result = {"error": f"{type(error).__name__}: {str(error)[:120]}"}
    print(json.dumps(result))


# --------------------------------------------------------------------------- parent

def run(name: str, path: Path, args: argparse.Namespace, repeat: int | None = None) -> dict:
    """Best of ``repeat`` fresh-process runs of one case."""
    best: dict = {}
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]))
    for _ in range(repeat or args.repeat):
        if name.startswith("dump"):
            # Every writer creates a new file: none pays for freeing the previous run's pages.
            path.unlink(missing_ok=True)
        else:
            with open(path, "rb") as stream:  # warm the page cache for every reader alike
                while stream.read(1 << 24):
                    pass
        command = [sys.executable, __file__, "--child", name, "--path", str(path), "--gb", str(args.gb),
                   "--keys", str(args.keys)]
        output = subprocess.run(command, capture_output=True, text=True, env=env, timeout=3600)
        lines = output.stdout.strip().splitlines()
        result = json.loads(lines[-1]) if lines else {"error": output.stderr.strip()[-200:]}
        if "error" in result:
            return result
        if not best or result["seconds"] < best["seconds"]:
            best = result
    return best


def fmt(result: dict) -> str:
    if "error" in result:
        return f"fails: {result['error']}"
    return f"{result['seconds']:8.3f} s  peak +{result['peak_mb']:7.1f} MB"


def ratio(ours: dict, theirs: dict) -> str:
    if "error" in ours or "error" in theirs:
        return "   n/a"
    value = ours["seconds"] / theirs["seconds"]
    return f"{value:6.3f}" if value >= 0.01 else f"{value:.5f} ({1 / value:,.0f}x faster)"


def report_rows(r: dict, args: argparse.Namespace, has_kast: bool) -> list[dict]:
    """The run_all.py rows: ours against kastore 0.3.6 and the plain I/O limit."""
    def seconds(name: str) -> float | None:
        return r.get(name, {}).get("seconds")

    size = f"{args.gb:g} GB"
    rows = [
        _rows.row("kastore", f"dump {size}", seconds("dump ours@big"), reference=seconds("dump ref-c@big"),
                  reference_name="kastore C", limit=seconds("dump plain+fsync@big"), limit_name="write + fsync",
                  target="<= 1.2 x limit"),
        _rows.row("kastore", f"load + touch all, {size}", seconds("touch ours@big"),
                  reference=seconds("touch ref-c@big"), reference_name="kastore C",
                  limit=seconds("read plain@big"), limit_name="plain read", target="<= 1.2 x limit"),
        _rows.row("kastore", f"load + one key, {size}", seconds("one ours@big"),
                  reference=seconds("one ref-python read_all@big"), reference_name="kastore read_all",
                  target=">= 100x faster than read_all"),
        _rows.row("kastore", f"dump {args.keys:,} keys", seconds("dump ours@many"),
                  reference=seconds("dump ref-c@many"), reference_name="kastore C", target=">= 10x faster"),
        _rows.row("kastore", f"load + touch {args.keys:,} keys", seconds("touch ours@many"),
                  reference=seconds("touch ref-c@many"), reference_name="kastore C"),
    ]
    if has_kast:
        rows += [
            _rows.row("kastore", f"kast dump {size}", seconds("dump kast@big"), reference=seconds("dump ours@big"),
                      reference_name="our kastore", limit=seconds("dump plain+fsync@big"), limit_name="write + fsync"),
            _rows.row("kastore", f"kast load + touch all, {size}", seconds("touch kast@big"),
                      reference=seconds("touch ours@big"), reference_name="our kastore",
                      limit=seconds("read plain@big"), limit_name="plain read"),
        ]
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gb", type=float, default=1.0, help="size of the 20-key data set in GB")
    parser.add_argument("--keys", type=int, default=100_000, help="key count of the many-key data set")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dir", default=None, help="folder for the files (default: a temp folder)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--path", help=argparse.SUPPRESS)
    _rows.add_arguments(parser)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    if args.quick:
        args.gb, args.keys, args.repeat = 0.05, 5000, 1
    has_kast = (SRC / "arrayio" / "kast").exists()
    folder = Path(args.dir or tempfile.mkdtemp(prefix="arrayio-bench-"))
    folder.mkdir(parents=True, exist_ok=True)
    big, many = folder / "big.kas", folder / "many.kas"
    results: dict[str, dict] = {}
    print(f"kastore benchmark: {args.gb} GB in 20 keys, {args.keys} small keys; best of {args.repeat}; "
          f"files in {folder}", flush=True)

    plan = [
        ("dump plain@big", big), ("dump plain+fsync@big", big), ("dump ref-python@big", big),
        ("dump ref-c@big", big), ("dump ours@big", big),
        ("read plain@big", big), ("touch ours@big", big), ("touch ours read_all@big", big),
        ("touch ref-python@big", big), ("touch ref-python read_all@big", big), ("touch ref-c@big", big),
        ("one ours@big", big), ("one ref-python@big", big), ("one ref-python read_all@big", big),
        ("one ref-c@big", big),
        ("dump ours@many", many), ("touch ours@many", many), ("touch ref-python@many", many),
        ("touch ref-c@many", many), ("dump ref-python@many", folder / "many-ref.kas"),
        ("dump ref-c@many", folder / "many-ref.kas"),
    ]
    if has_kast:
        plan += [("dump kast@big", folder / "big.kast"), ("touch kast@big", folder / "big.kast"),
                 ("one kast@big", folder / "big.kast")]
    for name, path in plan:
        # The reference C writer is quadratic in the key count: one run is plenty.
        repeat = 1 if name == "dump ref-c@many" else None
        results[name] = run(name, path, args, repeat)
        print(f"  {name:34s} {fmt(results[name])}", flush=True)
        if name == "dump ref-c@big":
            run("dump ours@big", big, args, 1)  # leave our file as the one the readers use

    r = results
    lines = [
        "",
        "ratios (time; < 1 means arrayio is faster)                      target",
        f"  dump 1 GB / plain write+fsync        {ratio(r['dump ours@big'], r['dump plain+fsync@big'])}   <= 1.2",
        f"  dump 1 GB / plain write (no fsync)   {ratio(r['dump ours@big'], r['dump plain@big'])}",
        f"  dump 1 GB / ref python               {ratio(r['dump ours@big'], r['dump ref-python@big'])}",
        f"  dump 1 GB / ref c                    {ratio(r['dump ours@big'], r['dump ref-c@big'])}",
        f"  load+touch all / plain read          {ratio(r['touch ours@big'], r['read plain@big'])}   <= 1.2",
        f"  load+touch all / ref python lazy     {ratio(r['touch ours@big'], r['touch ref-python@big'])}",
        f"  load+touch all / ref python read_all {ratio(r['touch ours@big'], r['touch ref-python read_all@big'])}",
        f"  load+touch all / ref c               {ratio(r['touch ours@big'], r['touch ref-c@big'])}",
        f"  read_all+touch / plain read          {ratio(r['touch ours read_all@big'], r['read plain@big'])}",
        f"  load+one key / ref read_all=True     {ratio(r['one ours@big'], r['one ref-python read_all@big'])}"
        "   <= 0.01 (>= 100x faster)",
        f"  load+one key / ref python lazy       {ratio(r['one ours@big'], r['one ref-python@big'])}",
        f"  load+one key / ref c                 {ratio(r['one ours@big'], r['one ref-c@big'])}",
        f"  load+one key peak RSS above interpreter: "
        f"{r['one ours@big'].get('peak_mb', float('nan')):.1f} MB                      < 50 MB",
        f"  100k-key dump / ref c                {ratio(r['dump ours@many'], r['dump ref-c@many'])}"
        "   <= 0.1 (>= 10x faster)",
        f"  100k-key dump / ref python           {ratio(r['dump ours@many'], r['dump ref-python@many'])}"
        "   (the reference python writer fails above 65,535 keys)",
        f"  100k-key load+touch / ref python     {ratio(r['touch ours@many'], r['touch ref-python@many'])}",
        f"  100k-key load+touch / ref c          {ratio(r['touch ours@many'], r['touch ref-c@many'])}",
    ]
    if has_kast:
        lines += [
            f"  kast dump / kastore dump             {ratio(r['dump kast@big'], r['dump ours@big'])}",
            f"  kast dump / plain write+fsync        {ratio(r['dump kast@big'], r['dump plain+fsync@big'])}",
            f"  kast load+touch / kastore            {ratio(r['touch kast@big'], r['touch ours@big'])}",
            f"  kast load+touch / plain read         {ratio(r['touch kast@big'], r['read plain@big'])}",
            f"  kast load+one key / kastore          {ratio(r['one kast@big'], r['one ours@big'])}",
        ]
    print("\n".join(lines))
    _rows.write(args.json_path, "kastore", f"{args.gb} GB in 20 keys and {args.keys:,} keys of 0-6 int32s; "
                f"best of {args.repeat}, a fresh process per case", report_rows(results, args, has_kast))
    if not args.dir:
        for path in folder.iterdir():
            path.unlink()
        folder.rmdir()


if __name__ == "__main__":
    main()
