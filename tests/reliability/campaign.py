"""The reliability campaign, run by hand: faults and kills for every writer, one Markdown table.

    PYTHONPATH=src python tests/reliability/campaign.py --kills 200 [--writer append] [--dir /dev/shm]

For each writer: the fault matrix (every I/O call failing with ENOSPC, EIO and EDQUOT) and a kill
campaign (a SIGKILL before every I/O call, then ``--kills`` at seeded random times over the
writer's measured duration). Every outcome is checked as in the tests (old or new file, validate
clean); a violation stops the run with the AssertionError. The tables go into docs/reliability.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from reliability_faults import fault_matrix  # noqa: E402
from reliability_kills import kill_campaign  # noqa: E402
from reliability_writers import CASES  # noqa: E402


def main() -> None:
    """Run the campaign and print the tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=200, help="random-time kills per writer (default 200)")
    parser.add_argument("--writer", default="", help="only writers whose name contains this")
    parser.add_argument("--dir", default="/dev/shm" if os.access("/dev/shm", os.W_OK) else None,
                        help="folder for the files (default /dev/shm when writable)")
    parser.add_argument("--seed", type=int, default=2026)
    options = parser.parse_args()
    cases = [case for case in CASES if options.writer in case.name]
    root = Path(tempfile.mkdtemp(prefix="arrayio-campaign-", dir=options.dir))
    started = time.monotonic()
    fault_rows, kill_rows = [], []
    try:
        for number, case in enumerate(cases):
            folder = root / f"{number}"
            faults = fault_matrix(case, folder / "faults")
            outcomes = ", ".join(f"{operation} → {outcome}: {count}"
                                 for (operation, outcome), count in sorted(faults.outcomes.items()))
            fault_rows.append(f"| {case.name} | {faults.calls} | {faults.faults} | {outcomes} | 0 |")
            kills = kill_campaign(case, folder / "kills", options.kills, seed=options.seed + number)
            kill_rows.append(
                f"| {case.name} | {kills.duration_ms:.1f} | {sum(kills.op_kills.values())} "
                f"({kills.op_kills['old']} old, {kills.op_kills['new']} new) | {sum(kills.random_kills.values())} "
                f"({kills.random_kills['old']} old, {kills.random_kills['new']} new; "
                f"{kills.finished_first} after the end) | 0 | {kills.stale_temp_files} |")
            print(f"{case.name}: done ({time.monotonic() - started:.0f} s)", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"Campaign: {platform.node()}, {os.cpu_count()} cores, files in {options.dir or 'the temp folder'}, "
          f"seed {options.seed}, {time.monotonic() - started:.0f} s\n")
    print("| writer | I/O calls | faults injected | operation → outcome: faults | neither old nor new |")
    print("| --- | --- | --- | --- | --- |")
    print("\n".join(fault_rows))
    print()
    print("| writer | duration, median of 4 (ms) | kills at I/O calls | kills at random times | neither old nor new "
          "| temp files left by kills |")
    print("| --- | --- | --- | --- | --- | --- |")
    print("\n".join(kill_rows))


if __name__ == "__main__":
    main()
