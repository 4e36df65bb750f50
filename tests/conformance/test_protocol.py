"""The Reader protocol, info vocabulary, entries, detection and validity, for every registered format."""

from __future__ import annotations

import dataclasses
import inspect
import json
import re
import shutil
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pytest

import arrayio
from arrayio._registry import FORMATS

from .formats import FREE, READERS, STRUCTURE

DOCS = Path(__file__).resolve().parents[2] / "docs" / "cli.md"
# What stays readable on a closed reader: its state and its registry name.
OPEN_OR_CLOSED = {"close", "closed", "format", "closed_error"}


def documented_keys(section_name: str) -> set[str]:
    """The keys listed in a section of docs/cli.md ("info keys", "entries keys"): the first column's backticks."""
    text = DOCS.read_text(encoding="utf-8")
    section = re.search(rf"^## {section_name}\n(.*?)(?=^## |\Z)", text, flags=re.MULTILINE | re.DOTALL)
    assert section, f"docs/cli.md has no '## {section_name}' section"
    keys = set()
    for cell in re.findall(r"^\| ([^|]+) \|", section.group(1), flags=re.MULTILINE):
        keys.update(re.findall(r"`([a-z_]+)`", cell))
    return keys


def test_every_format_declares_how_to_read_it_and_its_structure():
    assert {spec.model for spec in FORMATS.values()} <= set(READERS)
    assert set(STRUCTURE) == set(FORMATS) == set(FREE)


def test_open_returns_a_reader(format_name, demo, module):
    assert module.FORMAT_NAME == format_name
    with arrayio.open(demo) as reader:
        assert isinstance(reader, arrayio.Reader)
        assert reader.format == format_name
        assert not reader.closed
    assert reader.closed


def test_every_access_after_close_raises_closed_error(format_name, demo):
    reader = arrayio.open(demo)
    attributes = [name for name in vars(reader) if not name.startswith("_")]
    reader.close()
    reader.close()  # closing twice is harmless
    assert reader.closed and "closed" in repr(reader)
    touched = []
    for name in attributes:
        with pytest.raises(arrayio.ClosedError):
            getattr(reader, name)
        touched.append(name)
    for name, _member in inspect.getmembers_static(type(reader)):
        if name.startswith("_") or name in OPEN_OR_CLOSED:
            continue
        with pytest.raises(arrayio.ClosedError) as raised:
            value = getattr(reader, name)
            if callable(value):
                required = [parameter for parameter in inspect.signature(value).parameters.values()
                            if parameter.default is parameter.empty
                            and parameter.kind in (parameter.POSITIONAL_ONLY, parameter.POSITIONAL_OR_KEYWORD)]
                result = value(*[0] * len(required))
                if isinstance(result, Iterable):  # generators and mapping views do their work when iterated
                    next(iter(result))
            pytest.fail(f"{format_name}: {name} works on a closed reader")
        assert isinstance(raised.value, ValueError)
        assert raised.value.args[0].startswith(f"{format_name}: ")
        touched.append(name)
    dunders = {"__len__": len, "__iter__": lambda r: next(iter(r)), "__getitem__": lambda r: r[0],
               "__contains__": lambda r: 0 in r, "__array__": np.asarray}
    for name, access in dunders.items():
        if hasattr(type(reader), name):
            with pytest.raises(arrayio.ClosedError):
                access(reader)
            touched.append(name)
    assert {"info", "validate", "entries"} <= set(touched)


def test_closed_error_names(format_name, demo):
    reader = arrayio.open(demo)
    reader.close()
    with pytest.raises(arrayio.ClosedError) as raised:
        reader.info()
    assert type(raised.value) is not arrayio.ClosedError, "each format names its own ClosedError subclass"
    assert type(raised.value).__module__.startswith(f"arrayio.{format_name}")
    if format_name == "kastore":
        assert isinstance(raised.value, arrayio.kastore.StoreClosedError)
        assert isinstance(raised.value, arrayio.kastore.KastoreException)
    if format_name == "kast":
        assert isinstance(raised.value, arrayio.kast.StoreClosedError)


def test_info_speaks_one_vocabulary(format_name, demo):
    facts = arrayio.info(demo)
    assert list(facts)[:4] == ["format", "version", "file_size", "summary"]
    assert facts["format"] == format_name
    assert isinstance(facts["version"], str) and re.fullmatch(r"\d+(\.\d+)?", facts["version"]), facts["version"]
    assert type(facts["file_size"]) is int and facts["file_size"] == demo.stat().st_size
    assert isinstance(facts["summary"], str) and facts["summary"] and "\n" not in facts["summary"]
    undocumented = set(facts) - documented_keys("info keys")
    assert not undocumented, f"info keys missing from docs/cli.md 'info keys': {sorted(undocumented)}"
    json.dumps(facts, allow_nan=False)
    with arrayio.open(demo) as reader:
        assert reader.info() == facts


def test_entries(format_name, demo, module):
    with arrayio.open(demo) as reader:
        rows = reader.entries()
    assert rows and rows == FORMATS[format_name].open(demo).entries()
    names = [row["name"] for row in rows]
    assert all(isinstance(name, str) and name for name in names) and len(set(names)) == len(names)
    undocumented = {key for row in rows for key in row} - documented_keys("entries keys")
    assert not undocumented, f"entries keys missing from docs/cli.md 'entries keys': {sorted(undocumented)}"
    json.dumps(rows, allow_nan=False)


def test_detected_by_magic_whatever_the_extension(format_name, demo, tmp_path):
    others = [spec.extensions[0] for spec in FORMATS.values() if spec.name != format_name]
    for suffix in [".bin", "", *others]:
        renamed = tmp_path / f"renamed{suffix}"
        shutil.copyfile(demo, renamed)
        assert arrayio.detect(renamed) == format_name
        assert arrayio.info(renamed)["format"] == format_name
        with arrayio.open(renamed) as reader:
            assert reader.format == format_name


def test_demo_is_valid(format_name, demo, module):
    assert arrayio.validate(demo) == []
    assert module.validate(demo) == []
    with arrayio.open(demo) as reader:
        assert reader.validate() == []


def test_empty_file_is_a_format_error(format_name, module, tmp_path):
    empty = tmp_path / f"empty{FORMATS[format_name].extensions[0]}"
    empty.write_bytes(b"")
    with pytest.raises(arrayio.FormatError) as raised:
        module.open(empty)
    if FORMATS[format_name].model == "mapping":  # kastore raises EOFError here; loops over streams rely on it
        assert isinstance(raised.value, EOFError)
    problems = module.validate(empty)
    assert problems and all(isinstance(problem, arrayio.Problem) for problem in problems)
    assert isinstance(problems[0].offset, int)
    generic = arrayio.validate(empty)
    assert len(generic) == 1 and generic[0].offset == 0 and generic[0].field == "magic"


def test_problems_are_objects(format_name, demo, module, tmp_path):
    bad = tmp_path / f"bad{FORMATS[format_name].extensions[0]}"
    data = bytearray(demo.read_bytes())
    data[len(FORMATS[format_name].magic) - 1] ^= 0x01  # the last magic byte
    bad.write_bytes(bytes(data))
    (problem,) = module.validate(bad)
    assert isinstance(problem, arrayio.Problem)
    assert problem.offset == 0 and "magic" in problem.field
    assert str(problem) == problem.message and str(problem).startswith(f"{format_name}: ")
    with pytest.raises(dataclasses.FrozenInstanceError):
        problem.message = "changed"  # type: ignore[misc]
    parts = problem.as_dict()
    assert parts["offset"] == 0 and parts["message"] == str(problem)
    json.dumps(parts)
