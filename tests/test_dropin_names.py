"""Every user-reachable name of the reference packages exists in ours, or is listed with its
reason in the format's doc (docs/formats/<format>.md, section "Switching from ...")."""

from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path

import pytest
import references

DOCS = Path(__file__).resolve().parent.parent / "docs" / "formats"


def _reference(name: str):
    return references.bloscpack() if name == "bloscpack" else importlib.import_module(name)


def _public_names(module) -> set[str]:
    """Public names, leaving out the standard library modules the package merely imported."""
    names = set()
    for name in dir(module):
        if name.startswith("_"):
            continue
        value = getattr(module, name)
        if inspect.ismodule(value) and not value.__name__.startswith(module.__name__ + "."):
            continue
        names.add(name)
    return names


def _listed_in_doc(format_name: str) -> set[str]:
    text = (DOCS / f"{format_name}.md").read_text()
    section = text[text.index("## Switching from"):]
    bullets = re.findall(r"^- (.*(?:\n  .*)*)", section, flags=re.MULTILINE)
    listed = set()
    for bullet in bullets:
        head = bullet.split(": ", 1)[0]  # the names come before the reason
        listed.update(re.findall(r"`([A-Za-z_]\w*)`", head))
    return listed


@pytest.mark.parametrize("format_name", ["kastore", "bloscpack"])
def test_every_reference_name_exists_or_is_documented(format_name):
    reference = _reference(format_name)
    ours = importlib.import_module(f"arrayio.{format_name}")
    missing = _public_names(reference) - set(dir(ours))
    undocumented = missing - _listed_in_doc(format_name)
    assert not undocumented, f"missing from arrayio.{format_name} and not documented: {sorted(undocumented)}"
    needlessly_listed = _listed_in_doc(format_name) & set(dir(ours))
    assert not needlessly_listed, f"listed as missing but present: {sorted(needlessly_listed)}"


@pytest.mark.parametrize("format_name", ["kastore", "bloscpack"])
def test_reference_functions_keep_their_parameters(format_name):
    reference = _reference(format_name)
    ours = importlib.import_module(f"arrayio.{format_name}")
    for name in _public_names(reference) & set(dir(ours)):
        theirs = getattr(reference, name)
        if not inspect.isfunction(theirs):
            continue
        expected = list(inspect.signature(inspect.unwrap(theirs)).parameters)
        found = list(inspect.signature(inspect.unwrap(getattr(ours, name))).parameters)
        assert found[:len(expected)] == expected, f"{format_name}.{name}: {found} != {expected}"
