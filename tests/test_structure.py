"""Structure checks over src/arrayio: formats describe themselves in their own packages.

- no module outside a format's own package names a format (its registry name or its reader class),
- no import loop (imports inside functions included),
- no file over 800 lines,
- no run of six or more lines shared between two format folders.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections import defaultdict
from functools import cache
from pathlib import Path

import pytest

from arrayio._registry import FORMATS

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "arrayio"
FORMAT_DIRS = {PACKAGE / name for name in FORMATS}
MAX_LINES = 800
RUN = 6

# Where a format may be named outside its package, and why:
# - _registry.py: the registry's one line per format (name -> package) is how a format is registered.
ALLOWED_NAMING = {
    "_registry.py": {"kastore", "kast", "bloscpack", "kdb", "pycauset"},
}
# Toolkit packages over one format (issue 18 item 5): every module in them names that format (it is the
# format's toolkit), and reads it through the format package's public names only (checked below).
TOOLKIT_PACKAGES = {
    "robot": "kdb",  # the robot-learning toolkit (torch datasets, LeRobot, shards, tools, plots) over kdb files
}
# Modules outside the format packages that name a format today and are being moved by other work
# (the lead's kdb toolkit move, issue 18 item 5; the format-specific CLI verb groups), each with its reason.
KNOWN_NAMING = {
    "cli/kdb.py": "the `arrayio kdb` verbs of the robot-learning toolkit (arrayio.robot)",
    "cli/bloscpack.py": "the `arrayio bloscpack compress|decompress|append` verbs of the reference tool",
    "cli/__init__.py": "adds the two format verb groups above",
    "cli/_table.py": "the verb table the CLI help is made from: it lists the two format verb groups' verbs",
    "limits.py": "the limits' help text says which formats' sizes each bounds (kdb images, pycauset rows)",
    # Toolkits between one named format and a community's layout (issue 23), not views of any tree:
    "tskit.py": "tskit's tree sequences are kastore files: the toolkit reads their columns from that format",
    "blosc2.py": "the migration toolkit from bloscpack files to Blosc2 containers and back",
}


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _relative(path: Path) -> str:
    return path.relative_to(PACKAGE).as_posix()


def _in_format_package(path: Path) -> bool:
    return any(folder in path.parents for folder in FORMAT_DIRS)


def _reader_class_names() -> set[str]:
    """The reader classes' names that say their format ("Store" is the shared keyed layer's, and zarr's)."""
    import arrayio._keyed
    from arrayio.bloscpack import BloscpackFile
    from arrayio.kdb import KdbFile
    from arrayio.pycauset import Container

    assert arrayio._keyed.Store.__name__ == "Store"
    return {BloscpackFile.__name__, KdbFile.__name__, Container.__name__}


def _code_words(source: str) -> set[str]:
    """Names and words of string literals, leaving out comments and docstrings (documentation, not code)."""
    tree = ast.parse(source)
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):
                docstrings.add(first.lineno)
    words: set[str] = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT or (token.type == tokenize.STRING and token.start[0] in docstrings):
            continue
        if token.type in (tokenize.NAME, tokenize.STRING) or token.type == getattr(tokenize, "FSTRING_MIDDLE", -1):
            words.update(re.findall(r"[A-Za-z0-9_]+", token.string))
            words.add(token.string)
    return words


def test_no_module_outside_a_format_package_names_a_format():
    names = set(FORMATS) | _reader_class_names()
    found = {}
    for path in _modules():
        if _in_format_package(path):
            continue
        relative = _relative(path)
        named = (_code_words(path.read_text()) & names) - ALLOWED_NAMING.get(relative, set())
        toolkit_of = TOOLKIT_PACKAGES.get(relative.partition("/")[0])
        if toolkit_of is not None:
            named -= {toolkit_of} | _reader_class_names()
        if named and relative not in KNOWN_NAMING:
            found[relative] = sorted(named)
    assert not found, f"modules outside the format packages that name formats: {found}"


def test_the_known_exceptions_still_need_their_entry():
    names = set(FORMATS) | _reader_class_names()
    stale = [relative for relative in KNOWN_NAMING if not (_code_words((PACKAGE / relative).read_text()) & names)]
    assert not stale, f"drop these from KNOWN_NAMING, they name no format any more: {stale}"


def test_a_toolkit_reads_its_format_through_public_names_only():
    private = {}
    for folder, format_name in TOOLKIT_PACKAGES.items():
        for path in sorted((PACKAGE / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom) and node.module:
                    module = node.module.split(".")
                    if format_name in module and module[module.index(format_name) + 1:][:1] != []:
                        private.setdefault(_relative(path), []).append(node.module)
                    elif format_name in module:
                        private_names = [alias.name for alias in node.names if alias.name.startswith("_")]
                        if private_names:
                            private.setdefault(_relative(path), []).extend(private_names)
    assert not private, f"toolkit modules importing their format's private modules or names: {private}"


def test_a_format_does_not_import_its_toolkit():
    for folder, format_name in TOOLKIT_PACKAGES.items():
        for path in sorted((PACKAGE / format_name).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom):
                    assert folder not in (node.module or "").split("."), (_relative(path), node.module)


# --------------------------------------------------------------------------- imports

def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, name: str, known: set[str]) -> set[str]:
    """Modules of arrayio that ``path`` imports anywhere (module level or inside functions)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[:len(anchor) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        for target in targets:
            # an imported name that is a module counts as that module, else the module it comes from
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def _import_graph() -> dict[str, set[str]]:
    paths = {_module_name(path): path for path in _modules()}
    known = set(paths)
    return {name: _imports(path, name, known) for name, path in paths.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                item = stack.pop()
                on_stack.discard(item)
                component.append(item)
                if item == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


# A package's __init__ importing its own submodules, and those importing names from the package, is how a
# package is built, not a loop between modules: edges from a module to its own package are left out.
def _without_own_package(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    return {name: {target for target in targets if not name.startswith(target + ".")}
            for name, targets in graph.items()}


def test_no_import_loop_at_all():
    assert _cycles(_without_own_package(_import_graph())) == []


def test_the_graph_sees_imports_inside_functions():
    graph = _import_graph()
    assert "arrayio._registry" in graph["arrayio._tree"]  # tree_of imports the registry inside the function


# --------------------------------------------------------------------------- sizes and copies

def test_no_file_over_800_lines():
    long = {_relative(path): count for path in _modules()
            if (count := len(path.read_text().splitlines())) > MAX_LINES}
    assert not long, f"files over {MAX_LINES} lines: {long}"


@cache  # every file is compared with every file of the other folders
def _normalised_lines(path: Path) -> tuple[tuple[int, str], ...]:
    """(line number, stripped text) of the lines that carry code: blank lines, comments and one-line imports
    left out.

    Multi-line imports count: two folders importing the same long list of shared helpers are two copies of
    one piece of code that belongs in the shared layer; a module's usual one-line header imports are not.
    """
    source = path.read_text()
    single_imports = {node.lineno for node in ast.walk(ast.parse(source))
                      if isinstance(node, (ast.Import, ast.ImportFrom)) and node.end_lineno == node.lineno}
    kept = []
    for number, line in enumerate(source.splitlines(), 1):
        text = line.strip()
        if text and not text.startswith("#") and number not in single_imports:
            kept.append((number, text))
    return tuple(kept)


def _shared_runs(first: Path, second: Path) -> list[tuple[int, int, int]]:
    """(line in first, line in second, length) of runs of RUN or more equal code lines."""
    a, b = _normalised_lines(first), _normalised_lines(second)
    where = defaultdict(list)
    for position, (_number, text) in enumerate(b):
        where[text].append(position)
    runs = []
    covered: set[tuple[int, int]] = set()
    for i, (_number, text) in enumerate(a):
        for j in where.get(text, ()):
            if (i, j) in covered:
                continue
            length = 0
            while i + length < len(a) and j + length < len(b) and a[i + length][1] == b[j + length][1]:
                covered.add((i + length, j + length))
                length += 1
            if length >= RUN and len({text for _n, text in a[i:i + length]}) > 2:
                runs.append((a[i][0], b[j][0], length))
    return runs


def test_no_run_of_six_lines_shared_between_two_format_folders():
    folders = sorted(FORMAT_DIRS)
    found = []
    for index, left in enumerate(folders):
        for right in folders[index + 1:]:
            for first in sorted(left.rglob("*.py")):
                for second in sorted(right.rglob("*.py")):
                    for line, other, length in _shared_runs(first, second):
                        found.append(f"{_relative(first)}:{line} = {_relative(second)}:{other} ({length} lines)")
    assert not found, "code shared between format folders (move it to the shared layer):\n" + "\n".join(found)
