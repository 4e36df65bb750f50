"""Fixtures of the hostile-input tests; the child-process runner lives in hostile_run.py."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hostile_run import run_hostile

# lerobot_cases, kdb_cases: the datasets the kdb tests build
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "kdb"))


@pytest.fixture
def hostile():
    """The ``run_hostile`` helper."""
    return run_hostile
