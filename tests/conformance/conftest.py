"""The conformance suite runs every test once per registered format (zarr's StoreTests idea).

A format registered in ``arrayio._registry.FORMATS`` gets every test here; the
only per-format knowledge the suite holds is in ``formats.py`` (how to read a
file completely and where its header/index bytes are), and a test fails
when a registered format is missing there.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from arrayio._registry import FORMATS, module_for

# The loopback HTTP range server and moto's S3 server of the remote tests, reused for the views' suite.
_REMOTE = Path(__file__).resolve().parents[1] / "remote"
if str(_REMOTE) not in sys.path:
    sys.path.insert(0, str(_REMOTE))
_spec = importlib.util.spec_from_file_location("remote_fixtures", _REMOTE / "conftest.py")
assert _spec is not None and _spec.loader is not None
_remote = sys.modules.setdefault("remote_fixtures", importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(_remote)
http_server, s3_server, s3_options, s3_put = _remote.http_server, _remote.s3_server, _remote.s3_options, \
    _remote.s3_put


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
