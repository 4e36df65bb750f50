"""Benchmark the xarray engine "arrayio" and the VirtualiZarr read path against the native readers, in one run.

    python benchmarks/virtual.py [--key-size 256M] [--blp-size 256M] [--repeat 3] [--quick] [--json PATH]

1. a whole kastore key: ``xr.open_dataset(engine="arrayio")[key].values``, and zarr reading the
   VirtualiZarr ManifestStore (``Parser()`` + obstore's LocalStore, the chunks fetched by byte range),
   against the native reader + copy, and a plain memory copy of the same bytes (the limit);
2. a region of a bloscpack file (10% of its rows, then one chunk's rows) through the engine and
   through the ManifestStore (zarr's Blosc codec decoding the file's frames) against
   ``arrayio.bloscpack.open(...)[region]``;
3. building the virtual dataset of a tskit tree sequence (``virtualizarr.open_virtual_dataset`` of
   every table) and opening it with the engine, against ``tskit.load``.

Timings are the minimum of --repeat runs with a warm page cache; on a shared 2-core machine they are
noisy, so read the ratios.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import _baselines
import _rows

HERE = str(Path(__file__).resolve().parent)
sys.path[:] = [entry for entry in sys.path if os.path.abspath(entry or ".") != HERE]  # benchmarks/zarr.py is not zarr
sys.path.insert(0, str(Path(HERE).parent / "src"))

_size, _best = _rows.size, _rows.best


def _registry():
    from obspec_utils.registry import ObjectStoreRegistry
    from obstore.store import LocalStore

    return ObjectStoreRegistry({"file://": LocalStore()})


def _manifest_array(path: Path, name: str, group: str | None = None):
    import zarr

    from arrayio.virtualizarr import Parser

    store = Parser(group=group)(path.resolve().as_uri(), _registry())
    return zarr.open_group(store=store, mode="r", zarr_format=3)[name]


def key_read(folder: Path, size: int, repeat: int) -> dict:
    import xarray as xr

    path, native, copy = _baselines.kastore_key(folder, size, "t/big", repeat)
    with xr.open_dataset(path, engine="arrayio", group="t", cache=False) as dataset:  # each read reads
        engine = _best(lambda: dataset["big"].values, repeat)
    virtual_array = _manifest_array(path, "big", group="t")
    virtual = _best(lambda: virtual_array[:], repeat)
    return {"bytes": size, "native_copy_s": native, "memcpy_s": copy, "engine_s": engine, "virtual_s": virtual}


def region_read(folder: Path, size: int, repeat: int) -> dict:
    import numpy as np
    import xarray as xr

    import arrayio.bloscpack as blp

    rows = size // (8 * 512)
    rows -= rows % 256  # whole Blosc chunks only: a short last chunk would make the array computed
    path = folder / "region.blp"
    values = np.round(np.random.default_rng(2).standard_normal((rows, 512)), 2)
    blp.pack_ndarray_to_file(values, path, chunk_size=1 << 20)  # 256 rows of 4 KiB per chunk
    del values
    results: dict = {"bytes": size, "rows": rows}
    virtual_array = _manifest_array(path, "array")
    with blp.open(path) as reader, xr.open_dataset(path, engine="arrayio", cache=False) as dataset:
        variable = dataset["array"]
        for name, region in (("tenth", slice(rows // 3, rows // 3 + rows // 10)), ("one_chunk", slice(2560, 2816))):
            native = _best(lambda region=region: reader[region], repeat)
            engine = _best(lambda region=region: variable[region].values, repeat)
            virtual = _best(lambda region=region: virtual_array[region], repeat)
            results[name] = {"rows": region.stop - region.start, "native_s": native, "engine_s": engine,
                             "virtual_s": virtual}
    return results


def tskit_open(folder: Path, repeat: int, samples: int) -> dict:
    import msprime
    import tskit
    import virtualizarr
    import xarray as xr

    from arrayio.virtualizarr import Parser

    ts = msprime.sim_ancestry(samples=samples, sequence_length=1e7, recombination_rate=1e-8, population_size=1e4,
                              random_seed=4)
    msprime.sim_mutations(ts, rate=1e-8, random_seed=4).dump(folder / "sim.trees")
    path = folder / "sim.trees"
    url, registry = path.resolve().as_uri(), _registry()
    tables = ["nodes", "edges", "sites", "mutations", "individuals", "populations", "migrations", "provenances"]

    def virtual_tables():
        return [virtualizarr.open_virtual_dataset(url, parser=Parser(group=table), registry=registry,
                                                  loadable_variables=[]) for table in tables]

    def engine_tables():
        return [xr.open_dataset(path, engine="arrayio", group=table) for table in tables]

    virtual_tables(), engine_tables()  # imports and first-use setup are not what is measured
    return {"file_bytes": path.stat().st_size, "tables": len(tables),
            "tskit_load_s": _best(lambda: tskit.load(path), repeat),
            "virtual_s": _best(virtual_tables, repeat), "engine_s": _best(engine_tables, repeat)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--key-size", default="256M")
    parser.add_argument("--blp-size", default="256M")
    parser.add_argument("--samples", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3)
    _rows.add_arguments(parser)
    args = parser.parse_args()
    if args.quick:
        args.key_size, args.blp_size, args.samples, args.repeat = "32M", "32M", 200, 1
    with tempfile.TemporaryDirectory(prefix="arrayio-virtual-bench-") as name:
        folder = Path(name)
        key = key_read(folder, _size(args.key_size), args.repeat)
        region = region_read(folder, _size(args.blp_size), max(args.repeat, 10))  # ms-scale: more runs
        tskit = tskit_open(folder, args.repeat, args.samples)
    mib = key["bytes"] / 2**20
    rows = [
        _rows.row("virtual", f"whole kastore key of {mib:.0f} MiB, xarray engine", key["engine_s"],
                  reference=key["native_copy_s"], reference_name="native read + copy",
                  limit=key["memcpy_s"], limit_name="memcpy"),
        _rows.row("virtual", f"whole kastore key of {mib:.0f} MiB, VirtualiZarr manifest + zarr", key["virtual_s"],
                  reference=key["native_copy_s"], reference_name="native read + copy",
                  limit=key["memcpy_s"], limit_name="memcpy"),
    ]
    for name in ("tenth", "one_chunk"):
        case = region[name]
        rows += [
            _rows.row("virtual", f"bloscpack region of {case['rows']} rows, xarray engine", case["engine_s"] * 1e3,
                      reference=case["native_s"] * 1e3, reference_name="arrayio.bloscpack.open()[region]",
                      unit="ms"),
            _rows.row("virtual", f"bloscpack region of {case['rows']} rows, VirtualiZarr manifest + zarr Blosc",
                      case["virtual_s"] * 1e3, reference=case["native_s"] * 1e3,
                      reference_name="arrayio.bloscpack.open()[region]", unit="ms"),
        ]
    rows += [
        _rows.row("virtual", f"virtual datasets of {tskit['tables']} tskit tables", tskit["virtual_s"] * 1e3,
                  reference=tskit["tskit_load_s"] * 1e3, reference_name="tskit.load", unit="ms"),
        _rows.row("virtual", f"xarray engine datasets of {tskit['tables']} tskit tables", tskit["engine_s"] * 1e3,
                  reference=tskit["tskit_load_s"] * 1e3, reference_name="tskit.load", unit="ms"),
    ]
    print(f"data: kastore key {args.key_size}, bloscpack {args.blp_size}, tskit {args.samples} samples "
          f"({tskit['file_bytes'] / 2**20:.1f} MiB), best of {args.repeat}")
    for item in rows:
        ratio = f"{item['ratio_reference']:.2f}x" if item["ratio_reference"] else "-"
        limit = f", {item['ratio_limit']:.2f}x {item['limit_name']}" if item["ratio_limit"] else ""
        print(f"{item['case']:<70} {item['ours']:10.4f} {item['unit']:<3} {ratio} {item['reference_name']}{limit}")
    _rows.write(args.json_path, "virtual", f"kastore key {args.key_size}, bloscpack {args.blp_size}, tskit "
                f"{args.samples} samples, best of {args.repeat}", rows)


if __name__ == "__main__":
    main()
