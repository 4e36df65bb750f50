"""A short coverage-guided campaign (fuzz/run.py) on every format: any finding fails the suite."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SECONDS_PER_FORMAT = 14
# Formats side by side, one core each: the same per-format budget in less of the suite's time.
JOBS = min(2, os.cpu_count() or 1)

pytest.importorskip("atheris")


@pytest.mark.slow
def test_short_campaign_finds_nothing(tmp_path):
    figures = tmp_path / "figures.json"
    found = tmp_path / "found"
    process = subprocess.run(
        [sys.executable, str(ROOT / "fuzz" / "run.py"), "--seconds", str(SECONDS_PER_FORMAT),
         "--work", str(tmp_path / "work"), "--regressions", str(found), "--minimize-seconds", "20",
         "--json", str(figures), "--jobs", str(JOBS)],
        check=False, cwd=ROOT, capture_output=True, text=True, timeout=600,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    results = json.loads(figures.read_text())
    saved = sorted(str(path.relative_to(found)) for path in found.rglob("*") if path.is_file()) if found.exists() else []
    assert process.returncode == 0 and not saved, (
        f"fuzzing found {saved}; copy them into tests/regressions/<format>/ and fix the reader\n"
        f"{process.stdout}\n{process.stderr[-3000:]}")
    assert [result["format"] for result in results] == ["kastore", "kast", "bloscpack", "kdb", "pycauset"]
    for result in results:
        assert result["executions"] > 100, result
        assert result["coverage_edges"] > 100, result


def test_fewer_than_one_job_is_a_usage_error():
    process = subprocess.run([sys.executable, str(ROOT / "fuzz" / "run.py"), "--jobs", "0"], check=False,
                             cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert process.returncode == 2 and "--jobs: at least 1 format at a time, got 0" in process.stderr
