"""kdb training loaders (issue 12) as their own area, so that run_all.py runs them too.

    python benchmarks/kdb_training.py [--train-frames 4000] [--quick] [--json PATH]

The same as ``python benchmarks/kdb.py --training``: DataLoader throughput for decode="cpu" and
decode="none" against h5py raw pixels, the single-worker ratio to the decode-only ceiling, a
weighted mixture of shard sets, decode="cuda" when a GPU is present, LeRobot AV1 ingest.
"""

from __future__ import annotations

import os
import sys

import kdb  # benchmarks/kdb.py, beside this file

if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    kdb.main(["--training", *sys.argv[1:]])
