"""The fault injector and the fault matrix: every writer, the N-th I/O call failing, for every N.

``arrayio._binary.fault_hook`` sees every create, write, fsync, truncate, rename and directory
fsync a writer makes (``_binary._os_call``). The injector counts them and makes the N-th raise
an OSError with the chosen errno, as a full disk (ENOSPC), a failing device (EIO) or an
exhausted quota (EDQUOT) would. ``fault_matrix`` runs a writer once undisturbed to count its
calls, then once per (N, errno), and checks after each fault:

* the error is a WriteError (or, for the CLI, one stderr line) naming the operation, the path
  and the errno;
* the target is the complete old file byte for byte, or, when the fault hit the directory
  fsync after the rename (the commit), the complete new one;
* no temporary file is left;
* the next undisturbed call succeeds and leaves the new file.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from reliability_writers import Case, CliFailure, temp_files

from arrayio import WriteError, _binary

ERRNOS = (errno.ENOSPC, errno.EIO, errno.EDQUOT)


class FaultInjector:
    """Counts the I/O calls through the seam; the ``fail_at``-th raises OSError(``code``)."""

    def __init__(self, fail_at: int | None = None, code: int = errno.ENOSPC) -> None:
        self.fail_at = fail_at
        self.code = code
        self.calls: list[tuple[str, str]] = []
        self.fired: tuple[str, str] | None = None

    def __call__(self, operation: str, path: str) -> None:
        self.calls.append((operation, path))
        if len(self.calls) == self.fail_at:
            self.fired = (operation, path)
            raise OSError(self.code, os.strerror(self.code))


@contextlib.contextmanager
def injected(injector: FaultInjector) -> Iterator[FaultInjector]:
    """Route the I/O seam through ``injector`` for the duration of the block."""
    previous = _binary.fault_hook
    _binary.fault_hook = injector
    try:
        yield injector
    finally:
        _binary.fault_hook = previous


@dataclass
class FaultReport:
    """What one writer's fault matrix did: faults injected and outcomes by operation."""

    name: str
    calls: int = 0
    faults: int = 0
    outcomes: Counter = field(default_factory=Counter)  # (operation, "old"/"new") -> count
    operations: list[str] = field(default_factory=list)


def check_error(error: BaseException, fired: tuple[str, str], code: int) -> None:
    """The raised error names the operation, the path and the errno the fault carried."""
    operation, path = fired
    if isinstance(error, CliFailure):
        assert error.code == 1, error
        line = error.stderr.strip()
        assert line == f"arrayio: {operation} of {path} failed: [Errno {code}] {os.strerror(code)}", line
        return
    assert isinstance(error, WriteError), repr(error)
    assert error.errno == code and error.operation == operation and error.path == path, (error, fired)
    assert f"{operation} of {path} failed: [Errno {code}]" in str(error), str(error)


def fault_matrix(case: Case, folder: Path, errnos: tuple[int, ...] = ERRNOS) -> FaultReport:
    """Inject a fault at every I/O call of ``case``'s writer with every errno; check each outcome."""
    report = FaultReport(case.name)
    work = folder / "work"
    inputs = folder / "inputs"
    inputs.mkdir(parents=True, exist_ok=True)
    new = case.new_bytes(folder / "scratch")
    target = work / case.target

    def fresh() -> bytes:
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir()
        case.prepare(target, inputs)
        return target.read_bytes()

    fresh()
    with injected(FaultInjector()) as counter:
        case.run(target, inputs)
    report.calls = len(counter.calls)
    report.operations = [operation for operation, _ in counter.calls]
    for fail_at in range(1, report.calls + 1):
        for code in errnos:
            old = fresh()
            injector = FaultInjector(fail_at, code)
            try:
                with injected(injector):
                    case.run(target, inputs)
            except (WriteError, CliFailure) as error:
                assert injector.fired is not None, f"{case.name}: {error!r} without an injected fault"
                check_error(error, injector.fired, code)
            else:
                raise AssertionError(f"{case.name}: call {fail_at} ({injector.fired}) failed with errno {code}, "
                                     "yet the writer reported success")
            operation = injector.fired[0]
            outcome = case.outcome(target, old, new)
            expected = "new" if operation == "directory fsync" else "old"
            assert outcome == expected, f"{case.name}: fault in {operation} left the {outcome} file"
            assert temp_files(work) == [], f"{case.name}: fault in {operation} left {temp_files(work)}"
            report.faults += 1
            report.outcomes[(operation, outcome)] += 1
            if outcome == "new":  # committed: start the next call from the old file again
                old = fresh()
            case.run(target, inputs)  # the next normal call succeeds
            assert case.outcome(target, old, new) == "new"
    return report
