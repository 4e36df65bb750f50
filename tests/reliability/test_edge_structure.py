"""One way in, one way out (issue 18 item 4): the shared binary layer knows nothing of URLs, and no
format module asks whether a target is remote; the edge (``arrayio._edge``) answers that once."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "arrayio"
FORMATS = ("kastore", "kast", "bloscpack", "kdb", "pycauset")
TARGET_QUESTIONS = {"is_url", "is_remote", "resolve"}


def _imported_names(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            names.add(node.module or "")
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


def _called_names(path: Path) -> set[str]:
    calls = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call):
            function = node.func
            calls.add(function.attr if isinstance(function, ast.Attribute) else getattr(function, "id", ""))
    return calls


def test_the_binary_layer_does_not_import_the_remote_sources():
    # The old _binary <-> _sources loop: _binary imported _sources inside three functions.
    assert not {"_sources", "arrayio._sources"} & _imported_names(PACKAGE / "_binary.py")


def test_no_format_module_asks_whether_a_target_is_a_url():
    asking = {}
    for name in FORMATS:
        for path in sorted((PACKAGE / name).glob("*.py")):
            found = TARGET_QUESTIONS & _called_names(path)
            if found:
                asking[str(path.relative_to(PACKAGE))] = sorted(found)
    assert asking == {}
