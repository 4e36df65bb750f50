"""The generic CLI verbs on .kast files, through the real ``arrayio`` entry point, and kastore <-> kast
conversion both ways."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

import arrayio
import arrayio.kast as kast
import arrayio.kastore as kastore
from kast_cases import GOLDEN, golden_bytes, set_byte

CONVERT_DATA = {name: np.arange(7, dtype=name) * 3 for name in ("int8", "uint8", "int16", "uint16", "int32",
                                                                 "uint32", "int64", "uint64", "float32", "float64")}
CONVERT_DATA.update({"empty": np.array([], dtype=np.float32), "nan": np.array([np.nan, -np.inf, 1e300]),
                     "\u00fcnicode/\U0001f600": np.array([2**63 - 1, -2**63], dtype=np.int64)})


def _same(store, data) -> None:
    assert sorted(store) == sorted(data)
    for key, value in data.items():
        assert store[key].dtype == value.dtype
        np.testing.assert_array_equal(store[key], value)


def test_info_detects_kast_by_its_magic(cli, tmp_path) -> None:
    path = tmp_path / "no_extension"
    shutil.copy(GOLDEN / "mixed.kast", path)
    assert arrayio.detect(path) == "kast"
    result = cli("info", path, "--json")
    assert result.returncode == 0, result.stderr
    facts = json.loads(result.stdout)
    assert facts["format"] == "kast" and facts["num_keys"] == 4 and facts["store_size"] == 216
    assert facts["summary"] == "4 keys, 27 bytes of array data"
    assert [row["name"] for row in facts["items"]] == ["x", "y", "z", "\u00e9"]
    text = cli("info", path)
    assert b"format: kast" in text.stdout and b"data_offset: 184" in text.stdout


def test_validate_valid_and_invalid(cli, tmp_path) -> None:
    good = tmp_path / "good.kast"
    good.write_bytes(golden_bytes("mixed"))
    result = cli("validate", good)
    assert result.returncode == 0 and b"valid kast file" in result.stdout
    bad = tmp_path / "bad.kast"
    bad.write_bytes(set_byte(golden_bytes("mixed"), 64, 0xB9))
    result = cli("validate", bad, "--json")
    assert result.returncode == 1
    report = json.loads(result.stdout)["files"][0]
    assert report["format"] == "kast" and not report["valid"]
    assert [problem["message"] for problem in report["problems"]] == [
        "kast: item 0 data_offset at byte 64: expected a multiple of 8 (aligned array), found 185"]


def test_info_ls_cat_on_a_bad_file_fail_with_one_line(cli, tmp_path) -> None:
    bad = tmp_path / "bad.kast"
    bad.write_bytes(golden_bytes("mixed")[:200])
    for args in (("info", bad), ("ls", bad), ("cat", bad, "x")):
        result = cli(*args)
        assert result.returncode == 1
        assert result.stderr.decode().startswith(f"arrayio: {bad}: kast: item 1 data range at byte 96")
        assert b"Traceback" not in result.stderr


def test_ls_and_cat(cli) -> None:
    result = cli("ls", GOLDEN / "mixed.kast")
    assert result.stdout.decode().split("\n") == ["x", "y", "z", "\u00e9", ""]
    result = cli("ls", "-l", GOLDEN / "mixed.kast")
    assert [line.split() for line in result.stdout.decode().splitlines()[:2]] == [
        ["DTYPE", "SHAPE", "NBYTES", "NAME"], ["float64", "2", "16", "B", "x"]]
    assert cli("cat", GOLDEN / "mixed.kast", "x").stdout == b"0.5\n-1.0\n"
    assert cli("cat", GOLDEN / "mixed.kast", "\u00e9").stdout == b"18446744073709551615\n"
    missing = cli("cat", GOLDEN / "mixed.kast", "nope")
    assert missing.returncode == 1 and b"no such entry" in missing.stderr


def test_convert_kastore_to_kast_and_back(cli, tmp_path) -> None:
    original = tmp_path / "a.kas"
    kastore.dump(CONVERT_DATA, original)
    converted = tmp_path / "b.kast"
    result = cli("convert", original, converted)
    assert result.returncode == 0, result.stderr
    assert arrayio.detect(converted) == "kast"
    assert converted.read_bytes() == kast.dumps(CONVERT_DATA)
    with kast.load(converted) as store:
        _same(store, CONVERT_DATA)
    back = tmp_path / "c.kas"
    result = cli("convert", converted, back)
    assert result.returncode == 0, result.stderr
    assert back.read_bytes() == original.read_bytes()
    with kastore.load(back) as store:
        _same(store, CONVERT_DATA)
    reference = pytest.importorskip("kastore")  # PyPI kastore 0.3.6 reads what came back from kast
    for engine in ("python", "c"):
        _same(reference.load(back, engine=engine, read_all=True), CONVERT_DATA)


def test_convert_refuses_a_key_with_a_nul(cli, tmp_path) -> None:
    original = tmp_path / "nul.kas"
    kastore.dump({"a\0b": np.zeros(2)}, original)
    result = cli("convert", original, tmp_path / "nul.kast")
    assert result.returncode == 1
    assert b"contains a NUL byte" in result.stderr
    assert not (tmp_path / "nul.kast").exists()


def test_demo_writes_reads_back_and_validates(tmp_path) -> None:
    path = kast.demo(tmp_path)
    assert path.name == "demo.kast"
    assert kast.validate(path) == []
    assert arrayio.info(path)["num_keys"] == 11
    assert kast.open(path).entries()[0]["name"] == "float32"
    assert list(kast.open(path).cat("int8")) == ["0", "1", "2", "3", "4"]
    with arrayio.open(path) as store:
        assert store["float64/linspace"][-1] == 1.0
