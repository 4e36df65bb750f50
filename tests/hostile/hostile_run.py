"""Hostile inputs: each case runs in a fresh interpreter whose peak resident memory is measured.

A case is Python source run as ``__main__`` of a child process on this checkout's sources. The child
reports its peak RSS (``ru_maxrss``) when it exits, however it exits, and its data segment is capped
(RLIMIT_DATA) so that a regression fails fast with a MemoryError instead of taking the shared machine.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PEAK_LIMIT_MB = 512
DATA_CAP = 3 << 30

_PRELUDE = f"""
import atexit, resource, sys
resource.setrlimit(resource.RLIMIT_DATA, ({DATA_CAP}, resource.getrlimit(resource.RLIMIT_DATA)[1]))
atexit.register(lambda: print("PEAK_MB", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
                              file=sys.stderr))
"""


@dataclass
class Outcome:
    """What a hostile case did: exit status, output, and the child's peak resident memory in MiB."""

    returncode: int
    stdout: str
    stderr: str
    peak_mb: int

    @property
    def last_line(self) -> str:
        """The last line of stderr before the peak report (the error the case printed)."""
        lines = [line for line in self.stderr.splitlines() if not line.startswith("PEAK_MB")]
        return lines[-1] if lines else ""


def run_hostile(code: str, *args: str | os.PathLike, cwd: Path | None = None, env: dict | None = None,
                timeout: float = 120) -> Outcome:
    """Run ``code`` (dedented) in a child interpreter with ``args`` as sys.argv[1:]; measure its peak."""
    environment = {**os.environ, **(env or {})}
    environment["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), environment.get("PYTHONPATH", "")]).rstrip(
        os.pathsep)
    process = subprocess.run([sys.executable, "-c", _PRELUDE + textwrap.dedent(code), *map(str, args)],
                             capture_output=True, text=True, cwd=cwd, env=environment, timeout=timeout)
    peaks = [line.split()[1] for line in process.stderr.splitlines() if line.startswith("PEAK_MB")]
    return Outcome(process.returncode, process.stdout, process.stderr, int(peaks[-1]) if peaks else -1)


def run_cli_hostile(*args: str | os.PathLike, cwd: Path | None = None, env: dict | None = None) -> Outcome:
    """The ``arrayio`` command (``python -m arrayio``) as a hostile case."""
    return run_hostile("import runpy; sys.argv[0] = 'arrayio'; runpy.run_module('arrayio', run_name='__main__')",
                       *args, cwd=cwd, env=env)

