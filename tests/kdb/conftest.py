"""Fixtures of the kdb tests (the data itself lives in kdb_cases.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from kdb_cases import write_sample


@pytest.fixture
def sample(tmp_path: Path) -> Path:
    """A three-episode, two-camera JPEG file."""
    return write_sample(tmp_path / "sample.kdb")
