"""The one convention every benchmark script follows, so that ``run_all.py`` can gather them.

A script ``benchmarks/<area>.py``:

* runs alone and prints its own report, as before;
* accepts ``--quick``: the same cases on small data (the whole quick suite runs in minutes);
* accepts ``--json PATH``: also writes ``{"area", "data", "rows"}`` there, ``data`` one line
  saying what was measured (sizes, repeats), ``rows`` built with :func:`row`.

Ratios are costs relative to the comparator: below 1 means arrayio does better, whether the
unit is seconds (ours / theirs) or a rate such as frames/s (theirs / ours).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--quick`` and ``--json PATH`` to a benchmark's parser."""
    parser.add_argument("--quick", action="store_true", help="small data, same cases (for run_all.py --quick)")
    parser.add_argument("--json", dest="json_path", default=None, metavar="PATH",
                        help="also write the result rows to PATH as JSON")


def best(action: Callable[[], Any], repeat: int) -> float:
    """The fastest of ``repeat`` runs of ``action()``, in seconds."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return min(times)


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds a live process has used (from /proc; 0 where there is none)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cost_ratio(ours: float | None, other: float | None, higher_is_better: bool) -> float | None:
    """How much ours costs relative to ``other`` (< 1: ours is better); None when either is missing."""
    if ours is None or other is None or ours <= 0 or other <= 0:
        return None
    return other / ours if higher_is_better else ours / other


def row(area: str, case: str, ours: float | None, *, reference: float | None = None, reference_name: str = "",
        limit: float | None = None, limit_name: str = "", unit: str = "s", higher_is_better: bool = False,
        target: str = "", note: str = "") -> dict[str, Any]:
    """One measured case: ours, the reference implementation and the physical limit, with both ratios."""
    return {
        "area": area, "case": case, "unit": unit, "higher_is_better": higher_is_better,
        "ours": ours, "reference": reference, "reference_name": reference_name,
        "limit": limit, "limit_name": limit_name,
        "ratio_reference": cost_ratio(ours, reference, higher_is_better),
        "ratio_limit": cost_ratio(ours, limit, higher_is_better),
        "target": target, "note": note,
    }


def write(path: str | None, area: str, data: str, rows: list[dict[str, Any]]) -> None:
    """Write the rows of one script run to ``path`` (nothing when ``path`` is None)."""
    if path:
        Path(path).write_text(json.dumps({"area": area, "data": data, "rows": rows}, indent=1))


def size(text: str) -> int:
    """Bytes of a size given as ``123``, ``64K``, ``256M`` or ``1.5G``."""
    units = {"K": 2**10, "M": 2**20, "G": 2**30}
    return int(float(text[:-1]) * units[text[-1]]) if text[-1] in units else int(text)
