"""Run the coverage-guided fuzzing campaign: one atheris harness per format, ``--jobs`` formats at a time.

    python fuzz/run.py [--format F ...] [--seconds S] [--runs N] [--jobs J]
    python fuzz/run.py --merge-seeds      # rebuild fuzz/seeds/ from make_seeds.py's output

Each format starts from the committed seed corpus (fuzz/seeds/<format>/) and
grows its own working corpus under fuzz/.work/. A finding (an exception that
is not an allowed outcome, a crash, a run over 1 s, or an allocation past the
address-space limit) is minimized with libFuzzer's -minimize_crash and saved
under tests/regressions/<format>/, which tests/regressions/test_regressions.py
replays. The exit status is 1 when any format had a finding.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

FUZZ_DIR = Path(__file__).resolve().parent
ROOT = FUZZ_DIR.parent
sys.path.insert(0, str(FUZZ_DIR))

from _common import FORMATS, HARNESSES, MAX_LEN, TIMEOUT_S  # noqa: E402 - beside this file

ENTRY = FUZZ_DIR / "atheris_main.py"
SEEDS = FUZZ_DIR / "seeds"
WORK = FUZZ_DIR / ".work"
REGRESSIONS = ROOT / "tests" / "regressions"
ARTIFACT = re.compile(r"Test unit written to (\S+)")
STATUS = re.compile(r"^#(\d+)\s+\w+\s+cov: (\d+) ft: (\d+)", re.MULTILINE)
STAT = re.compile(r"^stat::(\w+):\s+(\d+)", re.MULTILINE)


@dataclass
class Result:
    """The figures of one format's run."""

    format: str
    executions: int = 0
    coverage_edges: int = 0
    features: int = 0
    corpus_files: int = 0
    wall_seconds: float = 0.0
    peak_rss_mb: int = 0
    slowest_unit_seconds: int = 0
    findings: list[str] = field(default_factory=list)
    error: str = ""


def environment(format: str) -> dict[str, str]:
    """The harness's environment: our sources first, the format named for libFuzzer's re-runs."""
    path = os.pathsep.join([str(ROOT / "src"), str(FUZZ_DIR), os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "PYTHONPATH": path.rstrip(os.pathsep), "ARRAYIO_FUZZ_FORMAT": format}


def fuzz_command(flags: list[str], folders: list[Path], format: str = "") -> list[str]:
    """The atheris command line: the entry script (executable, so libFuzzer can re-run it) and flags."""
    return [sys.executable, str(ENTRY), f"-timeout={TIMEOUT_S.get(format, 1)}", f"-max_len={MAX_LEN}", *flags,
            *map(str, folders)]


def minimize(format: str, artifact: Path, regressions: Path, seconds: int) -> Path:
    """Shrink a failing input with libFuzzer's -minimize_crash and save it under ``regressions``."""
    kind = artifact.name.split("-", 1)[0]
    regressions.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        smallest = Path(scratch) / "minimized"
        subprocess.run(fuzz_command(["-minimize_crash=1", f"-max_total_time={seconds}",
                                     f"-exact_artifact_path={smallest}"], [artifact], format),
                       env=environment(format), cwd=scratch, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       check=False)
        data = (smallest if smallest.exists() and smallest.stat().st_size else artifact).read_bytes()
    import hashlib

    target = regressions / f"{kind}-{hashlib.sha1(data).hexdigest()[:16]}"
    target.write_bytes(data)
    return target


def fuzz_format(format: str, budget: list[str], work: Path, regressions: Path, minimize_seconds: int,
                log: Path | None) -> Result:
    """Fuzz one format until the budget is spent or a finding stops libFuzzer; minimize and save findings."""
    result = Result(format)
    corpus = work / "corpus" / format
    artifacts = work / "artifacts" / format
    corpus.mkdir(parents=True, exist_ok=True)
    artifacts.mkdir(parents=True, exist_ok=True)
    folders = [corpus, SEEDS / format]
    extra = work / "seeds" / format
    if extra.is_dir():
        folders.append(extra)
    start = time.monotonic()
    with tempfile.TemporaryFile("w+", errors="replace") if log is None else log.open("w+", errors="replace") as out:
        # libFuzzer's progress goes straight to the log, so a long campaign can be watched.
        process = subprocess.run(
            fuzz_command([*budget, "-print_final_stats=1", f"-artifact_prefix={artifacts}/"], folders, format),
            env=environment(format), cwd=work, stdout=out, stderr=subprocess.STDOUT, check=False)
        out.seek(0)
        output = out.read()
    result.wall_seconds = round(time.monotonic() - start, 1)
    stats = {name: int(value) for name, value in STAT.findall(output)}
    statuses = STATUS.findall(output)
    if statuses:
        result.coverage_edges, result.features = int(statuses[-1][1]), int(statuses[-1][2])
    result.executions = stats.get("number_of_executed_units", int(statuses[-1][0]) if statuses else 0)
    result.peak_rss_mb = stats.get("peak_rss_mb", 0)
    result.slowest_unit_seconds = stats.get("slowest_unit_time_sec", 0)
    result.corpus_files = sum(1 for _ in corpus.iterdir())
    for artifact in ARTIFACT.findall(output):
        saved = minimize(format, Path(artifact), regressions, minimize_seconds)
        result.findings.append(str(saved.relative_to(ROOT) if saved.is_relative_to(ROOT) else saved))
    if process.returncode != 0 and not result.findings:
        result.error = f"libFuzzer exited with status {process.returncode}: {output[-2000:]}"
    return result


def merge_seeds(formats: list[str]) -> None:
    """Replace fuzz/seeds/<format> by the coverage-minimal subset of fuzz/.work/seeds/<format> (make_seeds.py)."""
    for format in formats:
        source = WORK / "seeds" / format
        if not source.is_dir():
            sys.exit(f"fuzz: no {source}; run python fuzz/make_seeds.py --out {WORK / 'seeds'} first")
        target = SEEDS / format
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True)
        # The valid files are kept whole (they document every feature); crafted ones join only
        # when they add coverage to them.
        for path in source.glob("valid-*"):
            shutil.copy(path, target / path.name)
        subprocess.run(fuzz_command(["-merge=1"], [target, source], format), env=environment(format), cwd=WORK,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        for path in target.iterdir():
            if not path.name.startswith("valid-"):
                path.rename(target / f"crafted-{path.name[:16]}")
        print(f"{format}: {sum(1 for _ in target.iterdir())} seeds in {target.relative_to(ROOT)}")


def main(argv: list[str] | None = None) -> int:
    """Parse the command line, fuzz each format (``--jobs`` at a time), print and store the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--format", action="append", choices=HARNESSES,
                        help="a harness to fuzz: a format or one of the paths around the readers (lerobot, views, "
                             "remote); default: every format")
    parser.add_argument("--seconds", type=int, help="seconds per format (default 20 unless --runs is given)")
    parser.add_argument("--runs", type=int, help="executions per format (stops at --seconds too when both are given)")
    parser.add_argument("--work", type=Path, default=WORK, help="working corpora and artifacts (default fuzz/.work)")
    parser.add_argument("--regressions", type=Path, default=REGRESSIONS,
                        help="where minimized findings go (default tests/regressions; <format>/ below it)")
    parser.add_argument("--minimize-seconds", type=int, default=60)
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    parser.add_argument("--jobs", type=int, default=1,
                        help="formats fuzzed side by side, each in its own process (default 1: one at a time)")
    parser.add_argument("--merge-seeds", action="store_true", help="rebuild fuzz/seeds from fuzz/.work/seeds")
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs: at least 1 format at a time, got {args.jobs}")
    formats = args.format or list(FORMATS)
    if args.merge_seeds:
        merge_seeds(formats)
        return 0
    flags = [f"-runs={args.runs}"] if args.runs is not None else []
    if args.seconds is not None or args.runs is None:
        flags.append(f"-max_total_time={args.seconds or 20}")
    args.work.mkdir(parents=True, exist_ok=True)
    results = []
    # Each harness is a process of its own: side by side, each keeps its per-format budget on its own core.
    with ThreadPoolExecutor(args.jobs) as pool:
        runs = [pool.submit(fuzz_format, format, flags, args.work, args.regressions / format,
                            args.minimize_seconds, args.work / f"{format}.log") for format in formats]
        for run in runs:
            result = run.result()
            results.append(result)
            print(f"{result.format:10} {result.executions:>10} executions  cov {result.coverage_edges:>5}  "
                  f"ft {result.features:>6}  corpus {result.corpus_files:>5}  {result.wall_seconds:>8.1f} s  "
                  f"rss {result.peak_rss_mb} MB  findings {len(result.findings)}"
                  + "".join(f"\n    finding: {finding}" for finding in result.findings)
                  + (f"\n    error: {result.error}" if result.error else ""), flush=True)
    if args.json is not None:
        args.json.write_text(json.dumps([asdict(result) for result in results], indent=2))
    return 1 if any(result.findings or result.error for result in results) else 0


if __name__ == "__main__":
    sys.exit(main())
