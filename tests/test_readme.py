"""The README's Python examples run as written, in order, in a scratch folder."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_readme_python_blocks_run(tmp_path, monkeypatch):
    text = (REPO / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert len(blocks) >= 5
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    for number, block in enumerate(blocks):
        exec(compile(block, f"README.md python block {number}", "exec"), namespace)
    arrayio = namespace["arrayio"]
    for name in ("sample.kas", "sample.kast", "sample.blp", "demos.kdb", "m.pycauset", "c.pycauset"):
        assert arrayio.validate(name) == [], name
