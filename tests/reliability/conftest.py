"""Fixtures of the reliability tests."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest


@pytest.fixture
def memory_folder(tmp_path):
    """A folder in /dev/shm when there is one (a SIGKILL acts on the page cache whatever the
    file system; tmpfs spares the kill tests the disk's fsync latency), else tmp_path."""
    if not os.access("/dev/shm", os.W_OK):
        yield tmp_path
        return
    folder = Path(tempfile.mkdtemp(prefix="arrayio-reliability-", dir="/dev/shm"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
