"""benchmarks/run_all.py and the row convention: the report is built from the scripts' JSON rows,
the hand-written prose of docs/benchmarks.md is kept, and every script takes --quick and --json."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def load(name: str):
    spec = importlib.util.spec_from_file_location(f"benchmarks_{name}", BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def run_all(monkeypatch, tmp_path):
    """run_all.py with the benchmarks folder, the doc and the images redirected into tmp_path."""
    sys.path.insert(0, str(BENCHMARKS))  # run_all's scripts import _rows from their folder
    try:
        module = load("run_all")
    finally:
        sys.path.remove(str(BENCHMARKS))
    folder = tmp_path / "benchmarks"
    folder.mkdir()
    (folder / "_rows.py").write_text((BENCHMARKS / "_rows.py").read_text())
    monkeypatch.setattr(module, "HERE", folder)
    monkeypatch.setattr(module, "DOC", tmp_path / "docs" / "benchmarks.md")
    monkeypatch.setattr(module, "IMAGES", tmp_path / "docs" / "img")
    monkeypatch.setattr(module, "ROOT", tmp_path)
    (tmp_path / "docs").mkdir()
    return module


def test_rows_are_cost_ratios_for_times_and_rates():
    rows = load("_rows")
    time = rows.row("a", "dump", 2.0, reference=4.0, limit=1.0)
    assert (time["ratio_reference"], time["ratio_limit"]) == (0.5, 2.0)
    rate = rows.row("a", "frames", 300.0, reference=100.0, limit=600.0, unit="frames/s", higher_is_better=True)
    assert rate["ratio_reference"] == pytest.approx(1 / 3) and rate["ratio_limit"] == 2.0
    assert rows.row("a", "alone", 5.0)["ratio_reference"] is None


def test_run_all_writes_tables_and_charts_and_keeps_the_prose(run_all, monkeypatch, tmp_path):
    (run_all.HERE / "fast.py").write_text(textwrap.dedent('''
        import argparse
        import _rows
        parser = argparse.ArgumentParser()
        _rows.add_arguments(parser)
        args = parser.parse_args()
        size = "1 MB" if args.quick else "1 GB"
        _rows.write(args.json_path, "fast", f"{size} of zeros", [
            _rows.row("fast", "dump", 0.25, reference=1.0, reference_name="ref", limit=0.2, limit_name="write"),
            _rows.row("fast", "open", 0.0001, reference=1.0, reference_name="ref"),
            _rows.row("fast", "loader", 900.0, unit="frames/s", higher_is_better=True)])
        print("printed its own report")
    '''))
    (run_all.HERE / "broken.py").write_text("raise SystemExit('needs a GPU')\n")
    prose = "# Benchmarks\n\nIntro.\n\n## kastore\n\nHand-written figures.\n"
    run_all.DOC.write_text(prose)
    for _ in range(2):  # the second run replaces the block instead of adding one
        monkeypatch.setattr(sys, "argv", ["run_all.py", "--quick"])
        run_all.main()
    text = run_all.DOC.read_text()
    assert text.count(run_all.BEGIN) == 1 and text.count(run_all.END) == 1
    assert text.startswith("# Benchmarks\n\nIntro.\n\n" + run_all.BEGIN)
    assert text.endswith("## kastore\n\nHand-written figures.\n")
    assert "Data: 1 MB of zeros" in text and "Machine: " in text
    assert "| dump | 0.25 s | 1 s (ref) | 0.2 s (write) | **0.25** | 1.25 |" in text
    assert "**0.0001 (10,000x better)**" in text
    assert "| loader | 900.0 frames/s |" in text
    assert "### broken\n\nNot measured: `exit 1: needs a GPU`." in text
    for name in ("benchmarks.png", "benchmarks-fast.png"):
        assert (run_all.IMAGES / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not (run_all.IMAGES / "benchmarks-broken.png").exists()


SCRIPTS = sorted(path.stem for path in BENCHMARKS.glob("*.py") if not path.stem.startswith("_")
                 and path.stem != "run_all")


def test_every_area_is_measured_by_run_all():
    assert {"kastore", "bloscpack", "kdb", "kdb_training", "pycauset", "remote", "zarr", "cli", "append"} <= set(SCRIPTS)


@pytest.mark.parametrize("name", SCRIPTS)
def test_every_benchmark_script_takes_quick_and_json(name):
    result = subprocess.run([sys.executable, str(BENCHMARKS / f"{name}.py"), "--help"], capture_output=True,
                            text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert "--quick" in result.stdout and "--json" in result.stdout


def test_the_lerobot_head_to_head_refuses_more_batches_than_an_epoch_holds():
    # It timed the next batch past the epoch's last and died with StopIteration, after minutes of setup.
    result = subprocess.run([sys.executable, str(BENCHMARKS / "lerobot_vs_kdb.py"), "--batches", "95"],
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 2, result.stderr
    assert "--warmup 5 + --batches 95 is more than the 93 batches of 32 in one epoch of 20 x 150 frames" in \
        result.stderr


def test_the_export_check_finds_a_misplaced_frame_and_a_changed_column():
    sys.path.insert(0, str(BENCHMARKS))
    try:
        check = load("_lerobot_export")
    finally:
        sys.path.remove(str(BENCHMARKS))
    rng = np.random.default_rng(0)
    frames = np.array([0, 1, 2, 0, 1])
    expected = {"state": rng.random((5, 3), np.float32), "action": rng.random((5, 2), np.float32),
                "reward": np.zeros(5, np.float32), "episode": np.array([0, 0, 0, 1, 1]), "frame": frames,
                "task": np.array(["a"] * 3 + ["b"] * 2), "images_front": rng.integers(0, 256, (5, 4, 4, 3), np.uint8),
                "images_wrist": rng.integers(0, 256, (5, 2, 2, 3), np.uint8),
                "timestamp": frames / 10}
    found = {"observation_state": expected["state"], "action": expected["action"],
             "next_reward": expected["reward"], "episode_index": expected["episode"], "frame_index": frames,
             "tasks": expected["task"], "index": np.arange(5), "timestamp": (frames / 10).astype(np.float32),
             "images_front": expected["images_front"].copy(), "images_wrist": expected["images_wrist"].copy()}
    assert check.compare(found, expected, exact=True) == {"differ": [], "mean_error": 0.0, "max_error": 0.0,
                                                          "misplaced": 0, "ok": True}
    noisy = dict(found, images_front=np.clip(expected["images_front"].astype(int) + 2, 0, 255).astype(np.uint8))
    assert check.compare(noisy, expected, exact=False)["ok"] and not check.compare(noisy, expected, exact=True)["ok"]
    swapped = dict(found, images_wrist=expected["images_wrist"][[1, 0, 2, 3, 4]])  # frames 0, 1 trade places
    result = check.compare(swapped, expected, exact=False)
    assert result["misplaced"] == 2 and not result["ok"]
    shifted = dict(found, timestamp=found["timestamp"] + 0.1, episode_index=np.zeros(5, int))
    assert check.compare(shifted, expected, exact=False)["differ"] == ["episode_index", "timestamp"]
    assert check.compare(dict(found, images_wrist=found["images_front"]), expected, exact=False)["differ"] == [
        "images_wrist"]
    no_reward = {key: value for key, value in found.items() if key != "next_reward"}
    assert check.compare(no_reward, expected, exact=True)["differ"] == ["next_reward"]
    assert check.compare(no_reward, expected, exact=True, optional=("next_reward",))["ok"]
