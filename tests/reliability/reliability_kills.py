"""Kill tests: a child process runs a writer and is SIGKILLed; the target must be the old or the new file.

Children come from a fork server that has imported numpy and arrayio once (a kill costs a fork,
not an interpreter start) and that never ran a writer itself, so no thread pool is forked
half-alive. Two kinds of kill, both ending with the same check (``Case.outcome`` with
``killed=True``: the old or the new file, and ``arrayio.validate`` clean):

* at every I/O call: the child's fault hook SIGKILLs the child just before its N-th create,
  write, fsync, truncate, rename or directory fsync, for every N the writer reaches;
* at random times: the child signals when the writer starts, the parent sleeps a seeded
  uniform time over the writer's measured duration (its shortest run, plus a tenth) and SIGKILLs it.

A kill leaves the temporary file of an atomic write behind (``.<name>.*.tmp``, hidden); it is
counted and removed between kills.
"""

from __future__ import annotations

import multiprocessing
import os
import random
import shutil
import signal
import statistics
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from multiprocessing import forkserver
from pathlib import Path
from typing import Any

from reliability_faults import FaultInjector, injected
from reliability_writers import BY_NAME, Case, temp_files

import arrayio

HERE = Path(__file__).resolve().parent
PRELOAD = ["numpy", "blosc", "click", "arrayio", "arrayio.cli", "arrayio.kastore", "arrayio.kast",
           "arrayio.bloscpack", "arrayio.kdb", "arrayio.pycauset", "reliability_writers", "reliability_workers"]
_CONTEXT: Any = None


def context() -> Any:
    """The fork-server context, its server started with arrayio and these helpers importable."""
    global _CONTEXT
    if _CONTEXT is None:
        _CONTEXT = multiprocessing.get_context("forkserver")
        _CONTEXT.set_forkserver_preload(PRELOAD)
        roots = [str(Path(arrayio.__file__).resolve().parents[1]), str(HERE)]
        previous = os.environ.get("PYTHONPATH")
        os.environ["PYTHONPATH"] = os.pathsep.join(roots + ([previous] if previous else []))
        try:
            forkserver.ensure_running()
        finally:
            if previous is None:
                del os.environ["PYTHONPATH"]
            else:
                os.environ["PYTHONPATH"] = previous
    return _CONTEXT


def _child(name: str, target: str, inputs: str, kill_at: int | None, started: Any) -> None:
    case = BY_NAME[name]
    sys.stdout = open(os.devnull, "w")  # the CLI's success line
    if kill_at is not None:
        from arrayio import _binary

        calls = [0]

        def hook(operation: str, path: str) -> None:
            calls[0] += 1
            if calls[0] == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)

        _binary.fault_hook = hook
    began = time.perf_counter()
    started.send(0.0)
    (case.child_run or case.run)(Path(target), Path(inputs))
    started.send(time.perf_counter() - began)


@dataclass
class KillReport:
    """One writer's kill campaign: kills made and what the target held after each."""

    name: str
    duration_ms: float = 0.0
    op_kills: Counter = field(default_factory=Counter)  # outcome -> count, kills at an I/O call
    random_kills: Counter = field(default_factory=Counter)  # outcome -> count, kills at a random time
    finished_first: int = 0  # random kills that came after the writer had finished
    stale_temp_files: int = 0

    @property
    def kills(self) -> int:
        """All kills made."""
        return sum(self.op_kills.values()) + sum(self.random_kills.values())


class Campaign:
    """Runs kills of one writer in ``folder``: the old target is made afresh before each."""

    def __init__(self, case: Case, folder: Path) -> None:
        self.case = case
        self.work = folder / "work"
        self.inputs = folder / "inputs"
        self.inputs.mkdir(parents=True, exist_ok=True)
        self.target = self.work / case.target
        self.new = case.new_bytes(folder / "scratch")
        self.report = KillReport(case.name)

    def fresh(self) -> bytes:
        """Make the old target (and the inputs) again; returns the old bytes."""
        shutil.rmtree(self.work, ignore_errors=True)
        self.work.mkdir()
        self.case.prepare(self.target, self.inputs)
        return self.target.read_bytes()

    def _start(self, kill_at: int | None) -> tuple[Any, Any]:
        ctx = context()
        receive, send = ctx.Pipe(duplex=False)
        process = ctx.Process(target=_child, args=(self.case.name, str(self.target), str(self.inputs),
                                                   kill_at, send))
        process.start()
        send.close()
        return process, receive

    def _finish(self, old: bytes, process: Any) -> str:
        process.join()
        killed = process.exitcode == -signal.SIGKILL
        assert killed or process.exitcode == 0, f"{self.case.name}: child exit code {process.exitcode}"
        outcome = self.case.outcome(self.target, old, self.new, killed=True)
        assert killed or outcome == "new", f"{self.case.name}: the writer finished but left the old file"
        stale = temp_files(self.work)
        self.report.stale_temp_files += len(stale)
        return outcome

    def calibrate(self, runs: int = 4) -> float:
        """The writer's duration in a child, in seconds: the shortest of ``runs`` (on a busy
        machine the longer ones are mostly waiting, and kills past the end prove little)."""
        durations = []
        for _ in range(runs):
            old = self.fresh()
            process, receive = self._start(None)
            receive.recv()
            durations.append(receive.recv())
            assert self._finish(old, process) == "new"
        self.report.duration_ms = statistics.median(durations) * 1000
        return min(durations)

    def io_calls(self) -> int:
        """How many I/O calls an undisturbed run makes (counted in this process)."""
        self.fresh()
        with injected(FaultInjector()) as counter:
            self.case.run(self.target, self.inputs)
        return len(counter.calls)

    def kill_at_every_call(self) -> None:
        """SIGKILL the writer just before each of its I/O calls in turn."""
        for kill_at in range(1, self.io_calls() + 1):
            old = self.fresh()
            process, receive = self._start(kill_at)
            outcome = self._finish(old, process)
            assert process.exitcode == -signal.SIGKILL, f"{self.case.name}: call {kill_at} was never reached"
            self.report.op_kills[outcome] += 1

    def kill_at_random(self, kills: int, seed: int) -> None:
        """SIGKILL the writer ``kills`` times at seeded random points over its measured duration."""
        duration = self.calibrate()
        rng = random.Random(seed)
        for _ in range(kills):
            old = self.fresh()
            process, receive = self._start(None)
            receive.recv()  # the writer starts now
            time.sleep(rng.uniform(0, 1.1 * duration))
            process.kill()
            outcome = self._finish(old, process)
            self.report.finished_first += process.exitcode == 0
            self.report.random_kills[outcome] += 1


def kill_campaign(case: Case, folder: Path, kills: int, seed: int = 0) -> KillReport:
    """Kills at every I/O call and ``kills`` kills at random times, every outcome checked."""
    campaign = Campaign(case, folder)
    campaign.kill_at_every_call()
    campaign.kill_at_random(kills, seed)
    return campaign.report
