"""The arrayio command on kastore files, through the real entry point."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import arrayio.kastore as kastore
from kastore_cases import all_types, craft


@pytest.fixture
def sample(tmp_path):
    path = tmp_path / "sample.kas"
    data = all_types(4)
    data["float32"] = np.array([0.1, 1 / 3, -2.5, 1e-8], dtype=np.float32)
    data["zz é"] = np.array([1.5, float("nan")])
    kastore.dump(data, path)
    return path


@pytest.fixture
def unsorted(tmp_path):
    path = tmp_path / "unsorted.kas"
    path.write_bytes(craft([(0, b"b", b"\x01"), (0, b"a", b"\x02")], padding=0x55))
    return path


def lines(output: bytes) -> list[str]:
    return output.decode("utf-8").splitlines()


def clean_failure(result, code=1) -> str:
    assert result.returncode == code, (result.stdout, result.stderr)
    stderr = result.stderr.decode("utf-8")
    assert "Traceback" not in stderr and "Traceback" not in result.stdout.decode("utf-8"), stderr
    return stderr


def test_info_text(cli, sample):
    result = cli("info", sample)
    assert result.returncode == 0, result.stderr
    text = result.stdout.decode("utf-8")
    assert "kastore" in text
    assert "num_keys: 11" in text
    size = os.path.getsize(sample)
    assert f"file_size: {size} B" in text or f"({size} bytes)" in text
    assert "1.0" in text


def test_info_json(cli, sample):
    result = cli("info", "--json", sample)
    assert result.returncode == 0, result.stderr
    facts = json.loads(result.stdout)
    assert facts["format"] == "kastore"
    assert facts["num_keys"] == 11
    assert facts["file_size"] == os.path.getsize(sample)
    assert facts["version"] == "1.0"
    names = [row["name"] for row in facts["items"]]
    assert names == sorted(names, key=lambda name: name.encode("utf-8"))
    row = {row["name"]: row for row in facts["items"]}["uint16"]
    assert row["dtype"] == "uint16" and row["nbytes"] == 8


def test_validate_valid(cli, sample):
    result = cli("validate", sample)
    assert result.returncode == 0, result.stderr
    assert "valid" in result.stdout.decode("utf-8")


def test_validate_malformed_one_line(cli, tmp_path, sample):
    bad = tmp_path / "bad.kas"
    raw = bytearray(sample.read_bytes())
    raw[64] = 11  # type code of item 0
    bad.write_bytes(bytes(raw))
    result = cli("validate", bad)
    clean_failure(result)
    output = lines(result.stdout)
    assert output == [f"{bad}: {problem}" for problem in kastore.validate(bad)]
    assert len(output) == 1
    assert output[0].startswith(f"{bad}: kastore: item 0") and "at byte 64" in output[0]


def test_validate_several_problems(cli, unsorted):
    result = cli("validate", unsorted)
    clean_failure(result)
    output = lines(result.stdout)
    assert output == [f"{unsorted}: {problem}" for problem in kastore.validate(unsorted)]
    assert len(output) == 3
    assert "item 1 key at byte 193" in output[0] and "sorted" in output[0]
    assert ["padding" in line for line in output] == [False, True, True]


def test_validate_json(cli, unsorted, sample):
    result = cli("validate", "--json", unsorted)
    assert result.returncode == 1
    report = json.loads(result.stdout)
    assert report["valid"] is False and len(report["files"]) == 1
    (found,) = report["files"]
    assert found["format"] == "kastore" and found["valid"] is False and len(found["problems"]) == 3
    assert set(found["problems"][0]) == {"message", "field", "offset", "expected", "found"}
    result = cli("validate", "--json", sample)
    assert result.returncode == 0
    assert json.loads(result.stdout)["valid"] is True


def test_validate_empty_and_truncated(cli, tmp_path, sample):
    empty = tmp_path / "empty.kas"
    empty.write_bytes(b"")
    clean_failure(cli("validate", empty))
    truncated = tmp_path / "truncated.kas"
    truncated.write_bytes(sample.read_bytes()[:-3])
    result = cli("validate", truncated)
    clean_failure(result)
    assert len(lines(result.stdout)) == 1
    assert "at byte" in result.stdout.decode("utf-8")


def test_usage_errors_exit_2(cli, sample):
    assert cli("validate").returncode == 2
    assert cli("cat", sample).returncode == 2


def test_missing_file(cli, tmp_path):
    stderr = clean_failure(cli("info", tmp_path / "missing.kas"))
    assert "missing.kas" in stderr or "No such file" in stderr


def test_ls_sorted(cli, sample):
    result = cli("ls", sample)
    assert result.returncode == 0, result.stderr
    expected = sorted([*all_types(1), "zz é"])
    assert lines(result.stdout) == expected


def test_ls_long(cli, sample):
    result = cli("ls", "-l", sample)
    assert result.returncode == 0, result.stderr
    header, *output = lines(result.stdout)
    assert header.split() == ["DTYPE", "SHAPE", "NBYTES", "NAME"]
    assert [line.split()[-1] for line in output[:-1]] == sorted(all_types(1))
    assert output[-1].endswith("zz é")
    by_key = {line.split("  ")[-1].strip(): line.split() for line in output}
    assert by_key["int32"][:4] == ["int32", "4", "16", "B"]
    assert by_key["zz é"][:4] == ["float64", "2", "16", "B"]
    assert not any("[" in line or "None" in line for line in output)


def test_ls_sorts_the_keys_of_an_unsorted_file(cli, unsorted):
    result = cli("ls", unsorted)
    assert result.returncode == 0, result.stderr
    assert lines(result.stdout) == ["a", "b"]


def test_cat_matches_the_reference_dump(cli, sample):
    ours = cli("cat", sample, "float32")
    assert ours.returncode == 0, ours.stderr
    theirs = subprocess.run([sys.executable, "-m", "kastore", "dump", str(sample), "float32"], capture_output=True)
    assert theirs.returncode == 0, theirs.stderr
    assert ours.stdout == theirs.stdout
    assert len(lines(ours.stdout)) == 4
    ours = cli("cat", sample, "zz é")
    assert lines(ours.stdout) == ["1.5", "nan"]


def test_cat_values(cli, sample):
    result = cli("cat", sample, "int16")
    assert result.returncode == 0
    assert lines(result.stdout) == ["0", "1", "2", "3"]


def test_cat_missing_key(cli, sample):
    stderr = clean_failure(cli("cat", sample, "nope"))
    assert "nope" in stderr
    assert len(stderr.strip().splitlines()) == 1


def test_cat_of_a_malformed_file(cli, tmp_path, sample):
    bad = tmp_path / "bad.kas"
    bad.write_bytes(sample.read_bytes()[:100])
    stderr = clean_failure(cli("cat", bad, "int8"))
    assert "kastore" in stderr and "at byte" in stderr


def test_demo(cli, tmp_path):
    folder = tmp_path / "demo"
    result = cli("demo", "--json", folder)
    report = json.loads(result.stdout)
    rows = {row["format"]: row for row in report["formats"]}
    assert rows["kastore"]["valid"], rows["kastore"]
    assert (folder / "demo.kas").is_file()
    assert kastore.validate(folder / "demo.kas") == []
    assert result.returncode == (0 if all(row["valid"] for row in rows.values()) else 1)



def test_info_and_ls_of_broken_files(cli, tmp_path, sample):
    truncated = tmp_path / "truncated.kas"
    truncated.write_bytes(sample.read_bytes()[:-1])
    for command in ("info", "ls"):
        stderr = clean_failure(cli(command, truncated))
        assert "kastore" in stderr and "at byte" in stderr


def test_zero_item_store(cli, tmp_path):
    path = tmp_path / "zero.kas"
    kastore.dump({}, path)
    result = cli("ls", "-l", path)
    assert result.returncode == 0 and result.stdout == b""
    result = cli("validate", path)
    assert result.returncode == 0, result.stdout
