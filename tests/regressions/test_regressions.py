"""Replay every input the fuzzing campaign found (tests/regressions/<format>/) and every seed through the
fuzz harnesses: the only allowed outcomes are success or an arrayio.FormatError (fuzz/_common.py).

Findings replay twice: here, for a readable traceback, and under the fuzzer itself (atheris, given
files instead of folders, runs each once), so that the 1 s limit and the address-space limit that
caught over-allocations apply too.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "fuzz"))

import _common

HERE = Path(__file__).resolve().parent
FINDINGS = sorted(path for path in HERE.glob("*/*") if path.parent.name in _common.HARNESSES and path.is_file())
FORMATS_WITH_FINDINGS = sorted({path.parent.name for path in FINDINGS})


@pytest.fixture(scope="module")
def runners():
    made = {format: _common.Runner(format, _common.harness(format).exercise) for format in _common.HARNESSES}
    yield made
    for runner in made.values():
        runner.close()


@pytest.mark.parametrize("path", FINDINGS, ids=[f"{path.parent.name}/{path.name}" for path in FINDINGS])
def test_finding_stays_fixed(path, runners):
    runners[path.parent.name].check(path.read_bytes())


@pytest.mark.parametrize("format", FORMATS_WITH_FINDINGS)
def test_findings_pass_under_the_fuzzers_limits(format):
    pytest.importorskip("atheris")
    files = [str(path) for path in FINDINGS if path.parent.name == format]
    process = subprocess.run(
        [sys.executable, str(ROOT / "fuzz" / "atheris_main.py"), f"-timeout={_common.TIMEOUT_S.get(format, 1)}",
         *files],
        check=False, cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src"), "ARRAYIO_FUZZ_FORMAT": format})
    assert process.returncode == 0, process.stdout[-3000:] + process.stderr[-3000:]
    assert process.stderr.count("Running: ") == len(files), process.stderr[-3000:]


@pytest.mark.parametrize("format", _common.HARNESSES)
def test_seeds_read_cleanly(format, runners):
    seeds = sorted((ROOT / "fuzz" / "seeds" / format).iterdir())
    assert len(seeds) > (2 if format in _common.AROUND else 10)
    for seed in seeds:
        runners[format].check(seed.read_bytes())


def test_only_format_errors_are_allowed():
    import arrayio

    assert _common.allowed("kdb", b"x", arrayio.TruncatedError("short"))
    assert not _common.allowed("kdb", b"x", ValueError("plain"))
    assert not _common.allowed("bloscpack", b"", EOFError())
    assert not _common.allowed("kastore", b"", EOFError())  # a bare EOFError: empty stores raise NoStoreError
    import arrayio.kastore

    assert _common.allowed("kastore", b"", arrayio.kastore.NoStoreError("empty"))
    assert not _common.allowed("pycauset", b"x", arrayio.UnsupportedError("over the limit"))
