"""Leaving bloscpack: .blp -> python-blosc2 .b2nd / .b2frame (and back) throughput against the read limit.

Cases, each the best of --repeat runs on a warm page cache, in MB/s of array data:

* ``.blp -> .b2nd``: ``arrayio.blosc2.from_bloscpack`` vs the naive migration (the reference bloscpack's
  ``unpack_ndarray_from_file`` then ``blosc2.asarray(urlpath=...)``); limit: decoding the .blp alone
  (arrayio's parallel ``read()``), what any conversion must at least do;
* ``.blp -> .b2nd, 1-D``: the same values as one column, whose chunks are carried over without encoding;
* ``.blp -> .b2frame`` (the byte-payload form, chunks carried over) against the same limit;
* ``.b2nd -> .blp``: ``arrayio.blosc2.to_bloscpack`` vs ``blosc2.open(...)[:]`` then the reference
  ``pack_ndarray_to_file``.

Data: a float64 array of smooth values with noise (zstd level 5, byte shuffle, 1 MiB chunks), 400 MB
(--quick: 40 MB).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import _rows  # noqa: E402

sys.path[:] = [str(HERE.parent / "src"), str(HERE.parent / "tests")] + [
    entry for entry in sys.path if Path(entry or ".").resolve() != HERE]

import blosc2  # noqa: E402
import references  # noqa: E402

import arrayio.bloscpack as blp  # noqa: E402
from arrayio import blosc2 as migrate  # noqa: E402

AREA = "blosc2"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    _rows.add_arguments(parser)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    megabytes = 40 if args.quick else 400
    rows_count = megabytes * (1 << 20) // 8 // 100
    rng = np.random.default_rng(1)
    array = np.cumsum(rng.standard_normal((rows_count, 100)), axis=0).round(3)
    reference = references.bloscpack()
    with tempfile.TemporaryDirectory(prefix="arrayio-bench-blosc2-") as folder:
        scratch = Path(folder)
        source = scratch / "a.blp"
        blp.pack_ndarray_to_file(array, source, chunk_size="1M", blosc_args={"cname": "zstd", "clevel": 5})
        flat = scratch / "flat.blp"  # the same values as one column: chunks and blocks of whole rows
        blp.pack_ndarray_to_file(array.reshape(-1), flat, chunk_size="1M", blosc_args={"cname": "zstd", "clevel": 5})
        nbytes = array.nbytes
        del array

        def naive_b2nd() -> None:
            values = reference.unpack_ndarray_from_file(str(source))
            blosc2.asarray(values, urlpath=str(scratch / "naive.b2nd"), mode="w",
                           cparams={"codec": blosc2.Codec.ZSTD, "clevel": 5})

        def naive_blp() -> None:
            reference.pack_ndarray_to_file(blosc2.open(str(scratch / "a.b2nd"))[:], str(scratch / "naive.blp"),
                                           blosc_args=reference.BloscArgs(cname="zstd", clevel=5))

        def read_limit() -> None:
            with blp.open(source) as reader:
                reader.read()

        limit = _rows.best(read_limit, args.repeat)
        times = {
            "b2nd": _rows.best(lambda: migrate.from_bloscpack(source, scratch / "a.b2nd"), args.repeat),
            "b2nd naive": _rows.best(naive_b2nd, args.repeat),
            "b2nd 1-D": _rows.best(lambda: migrate.from_bloscpack(flat, scratch / "flat.b2nd"), args.repeat),
            "b2frame": _rows.best(lambda: migrate.from_bloscpack(source, scratch / "a.b2frame", kind="frame"),
                             args.repeat),
            "blp": _rows.best(lambda: migrate.to_bloscpack(scratch / "a.b2nd", scratch / "back.blp"), args.repeat),
            "blp naive": _rows.best(naive_blp, args.repeat),
        }
        sizes = {name: (scratch / name).stat().st_size for name in ("a.blp", "a.b2nd", "a.b2frame")}

    def rate(seconds: float) -> float:
        return nbytes / 1e6 / seconds

    rows = [
        _rows.row(AREA, ".blp -> .b2nd", rate(times["b2nd"]), reference=rate(times["b2nd naive"]),
                  reference_name="bloscpack unpack + blosc2.asarray", limit=rate(limit),
                  limit_name="decode the .blp", unit="MB/s", higher_is_better=True,
                  note=f".blp {sizes['a.blp'] / 1e6:.0f} MB -> .b2nd {sizes['a.b2nd'] / 1e6:.0f} MB"),
        _rows.row(AREA, ".blp -> .b2nd, 1-D", rate(times["b2nd 1-D"]), limit=rate(limit), limit_name="decode the .blp",
                  unit="MB/s", higher_is_better=True, note="full chunks carried over, not encoded again"),
        _rows.row(AREA, ".blp -> .b2frame", rate(times["b2frame"]), limit=rate(limit), limit_name="decode the .blp",
                  unit="MB/s", higher_is_better=True, note=f".b2frame {sizes['a.b2frame'] / 1e6:.0f} MB"),
        _rows.row(AREA, ".b2nd -> .blp", rate(times["blp"]), reference=rate(times["blp naive"]),
                  reference_name="blosc2.open()[:] + bloscpack pack", unit="MB/s", higher_is_better=True),
    ]
    data = f"float64 {rows_count} x 100 ({nbytes / 1e6:.0f} MB), zstd 5, 1 MiB chunks; best of {args.repeat}"
    print(f"{AREA}: {data}")
    for item in rows:
        print(f"  {item['case']:<18} ours {item['ours']:8.1f} MB/s"
              + (f"  {item['reference_name']} {item['reference']:.1f}" if item["reference"] else "")
              + (f"  limit ({item['limit_name']}) {item['limit']:.1f}" if item["limit"] else "")
              + f"  {item['note']}")
    print("goal (issue 23): .blp -> .b2nd throughput against the read limit, without re-encoding where it can")
    for item in rows[:3]:
        print(f"  {item['case']:<20} {item['ours'] / item['limit']:.2f} of decoding the .blp")
    print("  (chunks are carried over unencoded where they are whole rows in blocks of whole rows: 1-D arrays,"
          " .b2frame; the 100-column array's Blosc blocks cut rows, so its chunks are encoded again)")
    _rows.write(args.json_path, AREA, data, rows)


if __name__ == "__main__":
    main()
