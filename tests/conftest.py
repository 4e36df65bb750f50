"""Fixtures shared by every test folder."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# CI shares two cores with whatever else runs: slow example generation is not a failure.
# derandomize: the examples follow from each test's name, so a failure reproduces on every run and machine.
settings.register_profile("arrayio", deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
settings.load_profile("arrayio")

# A shell starts background jobs with SIGINT ignored, and an ignored signal stays ignored across exec: the
# CLI children of the Ctrl-C tests would then never see their SIGINT. Children get the default back.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
TESTDATA = SHARED / "testdata"


def _entry_point() -> list[str]:
    script = Path(sys.executable).with_name("arrayio")
    if script.exists():
        return [str(script)]
    found = shutil.which("arrayio")
    return [found] if found else [sys.executable, "-m", "arrayio"]


def cli_command(*args: str | os.PathLike) -> tuple[list[str], dict[str, str]]:
    """The argv and environment that run the real ``arrayio`` console script on this checkout's sources."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return [*_entry_point(), *map(str, args)], env


def run_cli(*args: str, cwd: str | os.PathLike | None = None, input: bytes | None = None) -> subprocess.CompletedProcess:
    """Run the real ``arrayio`` console script with this checkout's sources first on the path."""
    argv, env = cli_command(*args)
    return subprocess.run(argv, capture_output=True, cwd=cwd, env=env, input=input, timeout=300)


@pytest.fixture
def cli():
    """The ``run_cli`` helper as a fixture."""
    return run_cli


@pytest.fixture(scope="session")
def testdata() -> Path:
    """The upstream test vectors in ../shared/testdata (never copied into the repo)."""
    if not TESTDATA.is_dir():
        pytest.skip("../shared/testdata is not next to this checkout")
    return TESTDATA


@pytest.fixture
def cli_argv():
    """The ``cli_command`` helper as a fixture: argv and environment, for pipelines and resource checks."""
    return cli_command
