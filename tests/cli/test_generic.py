"""The format-independent parts: detection, top-level functions, generic CLI verbs, demo."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest

import arrayio
from arrayio import kastore
from arrayio._registry import FORMATS


@pytest.fixture
def kas_file(tmp_path):
    path = tmp_path / "data.kas"
    kastore.dump({"a": np.arange(3, dtype=np.int32), "b": np.linspace(0, 1, 4)}, path)
    return path


def test_detect_uses_magic_not_extension(tmp_path, kas_file):
    renamed = tmp_path / "data.blp"
    renamed.write_bytes(kas_file.read_bytes())
    assert arrayio.detect(renamed) == "kastore"
    assert arrayio.detect(kas_file.read_bytes()) == "kastore"
    assert arrayio.detect(io.BytesIO(kas_file.read_bytes())) == "kastore"
    assert arrayio.detect(b"nothing we know") is None
    assert arrayio.detect(b"") is None


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_detect_every_magic(name):
    assert arrayio.detect(FORMATS[name].magic + bytes(64)) == name


def test_detect_leaves_file_position(kas_file):
    with open(kas_file, "rb") as stream:
        stream.seek(3)
        arrayio.detect(stream)
        assert stream.tell() == 3


def test_top_level_open_info_validate(kas_file):
    with arrayio.open(kas_file) as store:
        assert list(store) == ["a", "b"]
    facts = arrayio.info(kas_file)
    assert facts["format"] == "kastore" and facts["num_keys"] == 2
    assert arrayio.validate(kas_file) == []


def test_validate_unknown_format(tmp_path):
    path = tmp_path / "x.bin"
    path.write_bytes(b"\x00" * 100)
    problems = arrayio.validate(path)
    assert len(problems) == 1 and "not a file of any known format" in str(problems[0])
    assert problems[0].field == "magic" and problems[0].offset == 0
    assert isinstance(problems[0], arrayio.Problem)
    with pytest.raises(arrayio.FormatError):
        arrayio.open(path)


def test_formats_lists_every_implemented_format():
    assert set(arrayio.formats()) == set(FORMATS)


def test_cli_version_and_help(cli):
    result = cli("--version")
    assert result.returncode == 0 and arrayio.__version__ in result.stdout.decode()
    result = cli("--help")
    assert result.returncode == 0
    for verb in ("info", "validate", "ls", "cat", "convert", "demo", "blpk", "kdb"):
        assert verb in result.stdout.decode()


def test_cli_usage_errors_exit_2(cli):
    assert cli("validate").returncode == 2
    assert cli("no-such-verb").returncode == 2
    assert cli("info").returncode == 2


def test_cli_missing_file_exits_1_cleanly(cli, tmp_path):
    result = cli("info", tmp_path / "missing.kas")
    assert result.returncode == 1
    assert b"Traceback" not in result.stderr and b"missing.kas" in result.stderr


def test_cli_unknown_format(cli, tmp_path):
    path = tmp_path / "x.bin"
    path.write_bytes(b"hello world")
    result = cli("validate", path)
    assert result.returncode == 1 and b"not a file of any known format" in result.stdout
    result = cli("info", path)
    assert result.returncode == 1 and b"Traceback" not in result.stderr


def test_cli_validate_json(cli, kas_file):
    result = cli("validate", "--json", kas_file)
    assert result.returncode == 0
    report = json.loads(result.stdout)
    assert report == {"valid": True, "files": [{"file": str(kas_file), "format": "kastore", "valid": True,
                                                "problems": []}]}


def test_cli_convert_refuses_lossy_pairs(cli, kas_file, tmp_path):
    result = cli("convert", kas_file, tmp_path / "out.blp")
    assert result.returncode == 2 and b"not a conversion the models allow" in result.stderr
    result = cli("convert", kas_file, tmp_path / "out.unknown")
    assert result.returncode == 1 and b"extension" in result.stderr


def test_cli_demo_covers_every_format(cli, tmp_path):
    result = cli("demo", "--json", tmp_path)
    assert result.returncode == 0, result.stdout.decode() + result.stderr.decode()
    report = json.loads(result.stdout)
    assert {entry["format"] for entry in report["formats"]} == set(FORMATS)
    for entry in report["formats"]:
        assert entry["valid"], entry
        assert arrayio.detect(entry["file"]) == entry["format"]
        assert arrayio.validate(entry["file"]) == []


def test_cli_demo_table(cli, tmp_path):
    result = cli("demo", tmp_path)
    assert result.returncode == 0
    text = result.stdout.decode()
    for name in FORMATS:
        assert name in text
