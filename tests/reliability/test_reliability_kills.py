"""SIGKILL every writer at each of its I/O calls and at 20 random times (see reliability_kills.py)."""

from __future__ import annotations

import pytest
from reliability_kills import kill_campaign
from reliability_writers import CASES

KILLS = 20


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_killed_writer_leaves_old_or_new(case, memory_folder):
    report = kill_campaign(case, memory_folder, KILLS, seed=13)
    assert sum(report.random_kills.values()) == KILLS
    # a kill before the first call leaves the old file, one before the last call the new one
    assert report.op_kills["old"] >= 1 and report.op_kills["new"] >= 1, report
    print(f"\n{case.name}: {report.duration_ms:.1f} ms, kills at I/O calls {dict(report.op_kills)}, "
          f"random kills {dict(report.random_kills)} ({report.finished_first} after the end), "
          f"{report.stale_temp_files} stale temp files")
