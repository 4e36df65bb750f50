"""The README runs as written: every fenced ``python`` and ``sh`` block, in order, in a fresh folder, each
Python block in a namespace of its own (so that it imports what it uses). A block that cannot run here
(it installs packages, needs the network or runs for minutes) has a ``<!-- skip: reason -->`` line
before its fence and is reported as skipped with that reason."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FENCE = re.compile(r"(?:<!-- skip: (?P<skip>[^\n]*?) -->\n)?```(?P<language>python|sh)\n(?P<code>.*?)```", re.S)


def readme_blocks() -> list[tuple[int, str, str, str | None]]:
    """(line, language, code, skip reason or None) of every python and sh block, in order."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    return [(text.count("\n", 0, match.start("code")), match["language"], match["code"], match["skip"])
            for match in FENCE.finditer(text)]


BLOCKS = readme_blocks()


def _shell_environment(tmp_path: Path) -> dict[str, str]:
    """``arrayio`` and ``python`` on PATH run this checkout's sources with this interpreter."""
    bin_dir = tmp_path / ".bin"
    bin_dir.mkdir()
    (bin_dir / "arrayio").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m arrayio "$@"\n', encoding="utf-8")
    (bin_dir / "arrayio").chmod(0o755)
    (bin_dir / "python").symlink_to(sys.executable)
    env = dict(os.environ)
    env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def test_the_readme_has_python_and_sh_blocks_and_every_skip_says_why():
    languages = [language for _line, language, _code, _skip in BLOCKS]
    assert languages.count("python") >= 8 and languages.count("sh") >= 10
    assert all(skip is None or len(skip) > 10 for *_rest, skip in BLOCKS)


def test_readme_blocks_run_in_order(tmp_path, monkeypatch):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    env = _shell_environment(tmp_path)
    for line, language, code, skip in BLOCKS:
        if skip is not None:
            continue
        if language == "python":
            exec(compile(code, f"README.md line {line + 1}", "exec"), {"__name__": "__readme__"})
        else:
            result = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", code], cwd=work, env=env,
                                    capture_output=True, timeout=600)
            assert result.returncode == 0, (f"README.md line {line + 1}", code, result.stderr.decode()[-3000:])
    import arrayio

    for name in ("sample.kas", "converted.kast", "sample.blp", "demos.kdb", "m.pycauset", "c.pycauset", "all.kdb",
                 "good.kdb", "back.trees", "small.trees"):
        assert arrayio.validate(name) == [], name
    assert sorted(path.name for path in work.glob("*.png")) == ["episode0.png", "map-kastore.png", "map-tskit.png"]

def test_readme_examples_write_only_into_the_current_folder():
    for line, _language, code, skip in BLOCKS:
        if skip is None:
            assert not re.search(r"(docs|src|tests)/|\.\./|(^|\s)/\w", code), f"README.md line {line + 1}"


@pytest.mark.parametrize("line", [line for line, *_rest, skip in BLOCKS if skip is not None])
def test_skipped_readme_blocks(line):
    reason = next(skip for number, *_rest, skip in BLOCKS if number == line)
    pytest.skip(f"README.md line {line + 1}: {reason}")
