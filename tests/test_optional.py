"""Every hint for a missing optional package names an extra that really holds it (no hint loops), and the
README's install table lists every extra."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from importlib import metadata
from pathlib import Path

import pytest
import tomllib

from arrayio import MissingDependencyError
from arrayio._optional import MODULES, install_hint, missing, require

REPO = Path(__file__).resolve().parents[1]
EXTRAS = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
RUNTIME_EXTRAS = sorted(set(EXTRAS) - {"all", "test"})


def _name(requirement: str) -> str:
    return re.sub(r"[-_.]+", "-", re.match(r"[A-Za-z0-9_.\-]+", requirement)[0]).lower()


def distributions_of(extra: str) -> set[str]:
    """The distributions an extra installs, following its ``arrayio[...]`` references."""
    found: set[str] = set()
    for requirement in EXTRAS[extra]:
        inner = re.fullmatch(r"arrayio\[([^\]]+)\]", requirement.replace(" ", ""))
        if inner:
            for name in inner[1].split(","):
                found |= distributions_of(name)
        else:
            found.add(_name(requirement))
    return found


@pytest.mark.parametrize("module", sorted(MODULES))
def test_the_hint_names_the_extra_that_holds_the_module(module):
    provider = MODULES[module]
    hint = install_hint(module)
    if provider.extra is None:  # a package that must match another's build: named, installed by hand
        assert all(provider.distribution not in distributions_of(extra) for extra in EXTRAS)
        assert f"pip install {provider.distribution}" in hint
        return
    assert provider.extra in RUNTIME_EXTRAS
    assert _name(provider.distribution) in distributions_of(provider.extra), (module, provider.extra)
    assert _name(provider.distribution) in distributions_of("all")
    assert f"pip install '.[{provider.extra}]'" in hint and "from the arrayio folder" in hint
    # where the module is installed here, the distribution that provides it is the one named
    provided_by = metadata.packages_distributions().get(module)
    if provided_by:
        assert _name(provider.distribution) in {_name(name) for name in provided_by}


def test_all_is_every_runtime_extra():
    assert set(RUNTIME_EXTRAS) <= {extra for extra in RUNTIME_EXTRAS if distributions_of(extra) <= distributions_of(
        "all")}
    assert distributions_of("all") <= distributions_of("test")


def test_every_extra_is_in_the_readme_install_table():
    text = (REPO / "README.md").read_text(encoding="utf-8")
    table = re.findall(r"^\| `([a-z0-9]+)` \|", text, flags=re.M)
    assert sorted(set(table) - {"all", "test"}) == RUNTIME_EXTRAS
    assert {"all", "test"} <= set(table)


def test_require_imports_or_names_the_extra():
    assert require("numpy", "anything").__name__ == "numpy"
    error = missing("zarr", "convert to zarr")
    assert isinstance(error, MissingDependencyError) and isinstance(error, ImportError)
    assert str(error) == ("convert to zarr needs the Python package 'zarr', which is not installed; from the arrayio "
                          "folder: pip install '.[zarr]' ('.[all]' installs every extra)")


# Each feature of an extra, with the module blocked: the CLI's one line names that extra (and no loop to [all]).
BLOCKED_CASES = [
    ("zarr", ["convert", "{kas}", "{tmp}/out.zarr"]),
    ("fsspec", ["info", "memory://bucket/x.kas"]),
    ("dask", ["validate", "{kas}", "--dask"]),
    ("matplotlib", ["map", "{kas}", "--png", "{tmp}/map.png"]),
    ("h5py", ["kdb", "ingest-hdf5", "{kas}", "{tmp}/out.kdb"]),
]


@pytest.mark.parametrize(("module", "argv"), BLOCKED_CASES, ids=[" ".join(case[1][:1]) + "-" + case[0]
                                                                 for case in BLOCKED_CASES])
def test_a_missing_module_gives_one_line_naming_its_extra(module, argv, tmp_path, cli_argv):
    from arrayio import kastore

    kas = tmp_path / "a.kas"
    kastore.dump({"x": __import__("numpy").arange(3)}, kas)
    # block the module as a fresh install without the extra would lack it
    blocker = textwrap.dedent(f"""
        import sys
        class Block:
            def find_spec(self, name, path=None, target=None):
                if name.partition(".")[0] == {module!r}:
                    raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        sys.meta_path.insert(0, Block())
        from arrayio.cli import main
        main(sys.argv[1:])
    """)
    args = [part.format(kas=kas, tmp=tmp_path) for part in argv]
    _argv, env = cli_argv()
    result = subprocess.run([sys.executable, "-c", blocker, *args], capture_output=True, env=env, timeout=120)
    lines = result.stderr.decode().splitlines()
    assert result.returncode == 1, result.stderr.decode()
    assert len(lines) == 1, lines
    extra = MODULES[module].extra
    assert lines[0].startswith("arrayio: ") and f"pip install '.[{extra}]'" in lines[0], lines[0]
