"""A short coverage-guided campaign of the harnesses around the readers (fuzz/run.py --format lerobot,
views, remote): the LeRobot ingest, the zarr/kerchunk/convert views and the remote Source against a
fuzzed loopback server. Any finding fails the suite; the long run is by hand (docs/reliability.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SECONDS_PER_HARNESS = 8
HARNESSES = ["lerobot", "views", "remote"]
# Harnesses side by side, one core each: the same per-harness budget in less of the suite's time.
JOBS = min(2, os.cpu_count() or 1)

pytest.importorskip("atheris")
pytest.importorskip("pyarrow")
pytest.importorskip("zarr")


@pytest.mark.slow
def test_short_campaign_around_the_readers_finds_nothing(tmp_path):
    figures = tmp_path / "figures.json"
    found = tmp_path / "found"
    command = [sys.executable, str(ROOT / "fuzz" / "run.py"), "--seconds", str(SECONDS_PER_HARNESS),
               "--work", str(tmp_path / "work"), "--regressions", str(found), "--minimize-seconds", "20",
               "--json", str(figures), "--jobs", str(JOBS)]
    for harness in HARNESSES:
        command += ["--format", harness]
    process = subprocess.run(command, check=False, cwd=ROOT, capture_output=True, text=True, timeout=600,
                             env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    results = json.loads(figures.read_text())
    saved = sorted(str(path.relative_to(found)) for path in found.rglob("*") if path.is_file())
    assert process.returncode == 0 and not saved, (
        f"fuzzing found {saved}; copy them into tests/regressions/<harness>/ and fix what escaped\n"
        f"{process.stdout}\n{process.stderr[-3000:]}")
    assert [result["format"] for result in results] == HARNESSES
    for result in results:
        assert result["executions"] > 20, result
        assert result["coverage_edges"] > 50, result
