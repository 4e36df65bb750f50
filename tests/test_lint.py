"""ruff and mypy over src/ are part of the test run: any finding fails with the tool's own report."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("command", [["ruff", "check", "src"], ["mypy", "src/arrayio"]], ids=["ruff", "mypy"])
def test_source_is_clean(command: list[str]) -> None:
    result = subprocess.run([sys.executable, "-m", *command], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, f"{' '.join(command)} reported:\n{result.stdout}{result.stderr}"
