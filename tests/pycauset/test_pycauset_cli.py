"""The generic CLI verbs on .pycauset files, through the real entry point."""

from __future__ import annotations

import json

import numpy as np

from arrayio import pycauset as ours


def make(tmp_path):
    path = tmp_path / "m.pycauset"
    ours.save(np.arange(6, dtype=np.int16).reshape(2, 3), path, properties={"label": "six"})
    ours.update_metadata(path, {"provenance": {"tool": "test"}})
    return path


def test_info_shows_both_slots_active_and_metadata(cli, tmp_path):
    path = make(tmp_path)
    result = cli("info", "--json", path)
    assert result.returncode == 0, result.stderr
    facts = json.loads(result.stdout)
    assert facts["format"] == "pycauset"
    assert facts["active_slot"] == "B" and facts["generation"] == 2
    assert facts["slots"]["A"]["generation"] == 1 and facts["slots"]["B"]["active"] is True
    assert facts["metadata"]["properties"] == {"label": "six"}
    text = cli("info", path).stdout.decode()
    assert "summary: INTEGER/INT16 2x3 matrix, generation 2 (slot B)" in text


def test_validate_good_and_bad(cli, tmp_path):
    path = make(tmp_path)
    result = cli("validate", path)
    assert result.returncode == 0 and b"valid pycauset file" in result.stdout
    data = bytearray(path.read_bytes())
    data[16 + 3] ^= 0xFF
    data[144 + 3] ^= 0xFF
    path.write_bytes(bytes(data))
    result = cli("validate", "--json", path)
    assert result.returncode == 1
    problems = [problem["message"] for problem in json.loads(result.stdout)["files"][0]["problems"]]
    assert any("slot A slot_crc32 at byte 72" in problem for problem in problems)
    assert any("no valid header slot" in problem for problem in problems)
    result = cli("info", path)
    assert result.returncode == 1 and b"no valid header slot" in result.stderr


def test_ls_and_cat(cli, tmp_path):
    path = make(tmp_path)
    names = cli("ls", path).stdout.decode().split()
    assert names[0] == "matrix" and "metadata.properties" in names
    assert cli("cat", path, "matrix").stdout.decode().splitlines() == ["0 1 2", "3 4 5"]
    lines = cli("cat", path, "metadata.properties").stdout.decode().splitlines()
    assert lines == ["properties.label = 'six'"]
    result = cli("cat", path, "nothing")
    assert result.returncode == 1 and b"no such entry" in result.stderr


def test_demo_includes_pycauset(cli, tmp_path):
    result = cli("demo", "--json", tmp_path)
    formats = {row["format"]: row for row in json.loads(result.stdout)["formats"]}
    assert formats["pycauset"]["valid"], formats["pycauset"]
    assert ours.load(formats["pycauset"]["file"]).generation == 2
