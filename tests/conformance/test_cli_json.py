"""``--json`` outputs of ``arrayio info``, ``ls`` and ``validate`` parse, through the real entry point."""

from __future__ import annotations

import json

import arrayio
from arrayio._registry import FORMATS


def test_json_outputs_parse(format_name, demo, tmp_path, cli):
    run_cli = cli
    info = run_cli("info", "--json", demo)
    assert info.returncode == 0, info.stderr
    assert json.loads(info.stdout) == json.loads(json.dumps(arrayio.info(demo)))
    listing = run_cli("ls", "--json", demo)
    assert listing.returncode == 0, listing.stderr
    with arrayio.open(demo) as reader:
        assert json.loads(listing.stdout) == json.loads(json.dumps(reader.entries()))
    report = run_cli("validate", "--json", demo)
    assert report.returncode == 0, report.stderr
    json.loads(report.stdout)
    damaged = bytearray(demo.read_bytes())
    damaged[len(FORMATS[format_name].magic) - 1] ^= 0x01
    bad = tmp_path / f"bad{FORMATS[format_name].extensions[0]}"
    bad.write_bytes(bytes(damaged))
    report = run_cli("validate", "--json", bad)
    assert report.returncode == 1
    parsed = json.loads(report.stdout)
    assert parsed["valid"] is False and parsed["files"][0]["problems"]
    problem = parsed["files"][0]["problems"][0]
    assert problem["field"] and isinstance(problem["offset"], int), problem
