"""The conformance suite runs every test once per registered format (zarr's StoreTests idea).

A format registered in ``arrayio._registry.FORMATS`` gets every test here; the
only per-format knowledge the suite holds is in ``formats.py`` (how to read a
file completely and where its header/index bytes are), and a test fails
when a registered format is missing there.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from arrayio._registry import FORMATS, module_for


@pytest.fixture(scope="session")
def demo_files(tmp_path_factory) -> dict[str, Path]:
    """Each format's demo file, written once per session (format name -> path)."""
    folder = tmp_path_factory.mktemp("conformance-demos")
    return {name: Path(module_for(name).demo(folder)) for name in FORMATS}


@pytest.fixture(params=sorted(FORMATS))
def format_name(request) -> str:
    """Every registered format in turn."""
    return request.param


@pytest.fixture
def demo(format_name, demo_files) -> Path:
    """The demo file of the format under test."""
    return demo_files[format_name]


@pytest.fixture
def module(format_name):
    """The module of the format under test."""
    return module_for(format_name)
