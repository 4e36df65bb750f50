"""One CLI for every format, through the real ``arrayio`` entry point in a subprocess: one error
prefix, readable ``info``, an ``ls -l`` table, ``validate`` over many files, streamed ``cat``, and
quiet ends on a closed pipe."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys

import numpy as np
import pytest

import arrayio
from arrayio import kastore
from arrayio._registry import FORMATS, module_for

PIPE_CLOSED = (0, 141)


@pytest.fixture(scope="module")
def demos(tmp_path_factory):
    """One small valid file of every format."""
    folder = tmp_path_factory.mktemp("demos")
    return {name: module_for(name).demo(folder) for name in FORMATS}


@pytest.fixture
def kas_file(tmp_path):
    path = tmp_path / "data.kas"
    kastore.dump({"small": np.arange(3, dtype=np.int32), "big": np.zeros(300_000, np.float64)}, path)
    return path


def _ok(result) -> str:
    assert result.returncode == 0, (result.stdout, result.stderr)
    assert result.stderr == b""
    return result.stdout.decode()


def _corrupt(path, tmp_path):
    """A copy of ``path`` cut in the middle of its header or index."""
    bad = tmp_path / f"bad{path.suffix}"
    bad.write_bytes(path.read_bytes()[:40])
    return bad


# ---- --version, groups, the one error prefix ----------------------------------------------------

def test_version(cli):
    assert _ok(cli("--version")).strip() == f"arrayio, version {arrayio.__version__}"


def test_bloscpack_group_and_blpk_alias(cli, tmp_path):
    data = tmp_path / "x.dat"
    data.write_bytes(np.arange(50_000, dtype=np.int64).tobytes())
    _ok(cli("bloscpack", "compress", data, tmp_path / "a.blp"))
    _ok(cli("blpk", "c", data, tmp_path / "b.blp"))
    assert (tmp_path / "a.blp").read_bytes() == (tmp_path / "b.blp").read_bytes()
    assert _ok(cli("bloscpack", "info", tmp_path / "a.blp")) == _ok(cli("blpk", "i", tmp_path / "b.blp"))
    for group in ("bloscpack", "blpk"):
        assert "compress|c" in _ok(cli(group, "--help"))
        result = cli(group, "c", data, tmp_path / "a.blp")
        assert result.returncode == 1
        assert result.stderr.decode() == f"arrayio: output file '{tmp_path / 'a.blp'}' exists! (--force replaces it)\n"
    listed = _ok(cli("--help"))
    assert "bloscpack" in listed and "alias: blpk" in listed and "kdb" in listed


def test_every_group_and_verb_fails_with_one_arrayio_line(cli, demos, tmp_path):
    missing = tmp_path / "missing.kas"
    for args in (("info", missing), ("ls", missing), ("cat", missing, "x"), ("blpk", "i", demos["kastore"]),
                 ("kdb", "show", demos["kdb"], "7"), ("cat", demos["kastore"], "nope")):
        result = cli(*args)
        assert result.returncode == 1, args
        lines = result.stderr.decode().splitlines()
        assert len(lines) == 1 and lines[0].startswith("arrayio: "), (args, lines)
    assert cli("info", missing).stderr.decode() == f"arrayio: {missing}: No such file or directory\n"
    assert cli("kdb", "show", demos["kdb"], "7").stderr.decode() == "arrayio: kdb: episode 7 is outside 0..2\n"
    assert cli("cat", demos["kastore"], "nope").stderr.decode() == (
        f"arrayio: {demos['kastore']}: no such entry: 'nope'; its entries: float32, float64, float64/linspace, int16, "
        f"int32, int64, int8, uint16, uint32, uint64 and 1 more (`arrayio ls {demos['kastore']}` lists them)\n")


# ---- info ----------------------------------------------------------------------------------------

def test_info_of_a_tskit_file_is_a_readable_tree(cli, tmp_path):
    msprime = pytest.importorskip("msprime")
    ts = msprime.sim_ancestry(samples=20, sequence_length=1e5, recombination_rate=1e-8, population_size=1e4,
                              random_seed=1)
    ts = msprime.sim_mutations(ts, rate=1e-8, random_seed=2)
    # A .trees file shows what tskit info would (issue 23); the same bytes under another name show the
    # kastore store, whose ~60 keys must stay readable too.
    trees = tmp_path / "sim.trees"
    ts.dump(trees)
    tree_lines = _ok(cli("info", trees)).splitlines()
    assert tree_lines[0] == "format: tskit" and "tables:" in tree_lines and "  edges:" in tree_lines
    assert max(map(len, tree_lines)) <= 100
    path = tmp_path / "sim.kas"
    ts.dump(path)
    text = _ok(cli("info", path))
    lines = text.splitlines()
    keys = len(kastore.load(path))
    assert keys > 40
    assert len(lines) < 20 and max(map(len, lines)) <= 100, text
    assert lines[0] == "format: kastore"
    assert f"num_keys: {keys}" in lines
    assert f"file_size: {path.stat().st_size / 1024:.1f} KiB ({path.stat().st_size} bytes)" in lines
    assert f"items: ({keys})" in lines and f"  ... {keys - 5} more" in lines
    assert "  - name: edges/child  dtype: int32  shape: " in text
    facts = json.loads(_ok(cli("info", "--json", path)))
    assert facts["format"] == "kastore" and len(facts["items"]) == keys


def test_info_indents_nested_maps(cli, demos):
    lines = _ok(cli("info", demos["pycauset"])).splitlines()
    at = lines.index("slots:")
    assert lines[at + 1] == "  A:" and lines[at + 2].startswith("    generation: ")
    assert "metadata:" in lines and any(line.startswith("  properties:") for line in lines)


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_info_json_on_a_corrupt_file_is_json(cli, demos, tmp_path, name):
    corrupt = _corrupt(demos[name], tmp_path)
    result = cli("info", "--json", corrupt)
    assert result.returncode == 1
    report = json.loads(result.stdout)
    assert set(report) == {"error"} and set(report["error"]) == {"message", "file", "field", "offset"}
    assert report["error"]["file"] == str(corrupt) and report["error"]["message"].startswith(f"{corrupt}: {name}: ")
    assert isinstance(report["error"]["offset"], (int, type(None)))
    assert result.stderr.decode() == f"arrayio: {report['error']['message']}\n"


def test_json_errors_for_missing_and_unknown_files(cli, tmp_path):
    unknown = tmp_path / "x.bin"
    unknown.write_bytes(b"nothing we know")
    for verb, path in (("info", tmp_path / "missing"), ("ls", unknown), ("info", unknown)):
        result = cli(verb, "--json", path)
        assert result.returncode == 1
        error = json.loads(result.stdout)["error"]
        assert str(path) in error["message"]
        # an unknown format names the magic bytes at offset 0; a missing file has neither
        expected = (None, None) if path.name == "missing" else ("magic", 0)
        assert (error["field"], error["offset"]) == expected
        assert error["file"] == str(path)  # an OSError's filename, a FormatError's file
    usage = cli("info", "--json")
    assert usage.returncode == 2 and json.loads(usage.stdout)["error"]["message"] == "Missing argument 'FILE'."


def test_info_json_of_a_corrupt_header_names_field_and_offset(cli, demos, tmp_path):
    bad = tmp_path / "bad.kdb"
    raw = bytearray(demos["kdb"].read_bytes())
    raw[4] = 99  # version_major
    bad.write_bytes(bytes(raw))
    error = json.loads(cli("info", "--json", bad).stdout)["error"]
    assert error["field"] == "header.version_major" and error["offset"] == 4


# ---- ls -l -----------------------------------------------------------------------------------------

def test_ls_long_is_a_table_with_a_header_row(cli, kas_file):
    header, *rows = _ok(cli("ls", "-l", kas_file)).splitlines()
    assert header.split() == ["DTYPE", "SHAPE", "NBYTES", "NAME"]
    assert [row.split() for row in rows] == [["float64", "300000", "2.3", "MiB", "big"],
                                             ["int32", "3", "12", "B", "small"]]
    header, *rows = _ok(cli("ls", "-l", "--bytes", kas_file)).splitlines()
    assert [row.split() for row in rows] == [["float64", "300000", "2400000", "big"], ["int32", "3", "12", "small"]]
    assert json.loads(_ok(cli("ls", "--json", kas_file))) == [
        {"name": "big", "dtype": "float64", "shape": [300000], "nbytes": 2400000},
        {"name": "small", "dtype": "int32", "shape": [3], "nbytes": 12}]
    assert _ok(cli("ls", kas_file)).split() == ["big", "small"]


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_ls_long_has_no_python_reprs(cli, demos, name):
    header, *rows = _ok(cli("ls", "-l", demos[name])).splitlines()
    assert header == header.upper() and header.split()[-1] == "NAME"
    assert rows and len(rows) == len(json.loads(_ok(cli("ls", "--json", demos[name]))))
    for row in rows:
        assert "None" not in row and "[" not in row and "True" not in row, row


# ---- validate ------------------------------------------------------------------------------------

def test_validate_many_files(cli, demos, tmp_path):
    bad = _corrupt(demos["kastore"], tmp_path)
    unknown = tmp_path / "x.bin"
    unknown.write_bytes(b"\0" * 64)
    missing = tmp_path / "missing.kdb"
    folder = tmp_path / "folder.kas"
    folder.mkdir()
    files = [*demos.values(), bad, unknown, folder, missing]
    result = cli("validate", *files)
    assert result.returncode == 1 and result.stderr == b""
    lines = result.stdout.decode().splitlines()
    assert len(lines) == len(files)
    for path, line in zip(files, lines):
        assert line.startswith(f"{path}: "), line
    assert lines[:len(demos)] == [f"{path}: valid {name} file" for name, path in demos.items()]
    assert lines[-4].startswith(f"{bad}: kastore: ")
    assert "not a file of any known format" in lines[-3]
    assert lines[-2] == f"{folder}: Is a directory"
    assert lines[-1] == f"{missing}: No such file or directory"
    assert cli("validate", *demos.values()).returncode == 0
    assert cli("validate").returncode == 2


def test_validate_json_lists_problem_objects(cli, demos, tmp_path):
    bad = tmp_path / "bad.kdb"
    raw = bytearray(demos["kdb"].read_bytes())
    raw[4] = 99
    bad.write_bytes(bytes(raw))
    result = cli("validate", "--json", demos["kastore"], bad)
    assert result.returncode == 1
    report = json.loads(result.stdout)
    assert report["valid"] is False
    good, broken = report["files"]
    assert good == {"file": str(demos["kastore"]), "format": "kastore", "valid": True, "problems": []}
    assert broken["format"] == "kdb" and broken["valid"] is False
    (problem,) = broken["problems"]
    (expected,) = arrayio.validate(bad)  # the JSON object carries every attribute of the library's Problem
    assert problem == {"message": expected.message, "field": expected.field, "offset": expected.offset,
                       "expected": expected.expected, "found": expected.found}
    assert problem["message"].startswith("kdb: header.version_major at byte 4")
    assert json.loads(_ok(cli("validate", "--json", *demos.values())))["valid"] is True


def test_validate_returns_problem_objects(demos, tmp_path):
    bad = tmp_path / "bad.bin"
    bad.write_bytes(b"\xff" * 16)
    (problem,) = arrayio.validate(bad)
    assert isinstance(problem, arrayio.Problem) and "not a file of any known format" in str(problem)
    bad = _corrupt(demos["kast"], tmp_path)
    assert all(isinstance(problem, arrayio.Problem) for problem in arrayio.validate(bad))


# ---- cat streams; a closed pipe ends every verb quietly -------------------------------------------

# Runs `ARGV | head -1` and reports the ARGV process's own peak RSS. It must run in a small launcher
# process: Linux carries the RSS high-water mark of the parent's memory across fork/vfork + exec, so a
# child of the (large) pytest process would report pytest's peak, not its own.
PIPELINE_TO_HEAD = """
import json, os, subprocess, sys
with subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.PIPE) as command, \\
        subprocess.Popen(["head", "-1"], stdin=command.stdout, stdout=subprocess.PIPE) as head:
    command.stdout.close()  # head alone reads the pipe
    first = head.stdout.read()
    errors = command.stderr.read()
    _, status, usage = os.wait4(command.pid, 0)
    command.returncode = os.waitstatus_to_exitcode(status)
print(json.dumps({"first": first.decode(), "errors": errors.decode(), "status": command.returncode,
                  "peak_mib": usage.ru_maxrss / 1024}))
"""


def test_cat_streams_a_400_mb_array_in_bounded_memory(cli_argv, tmp_path):
    path = tmp_path / "big.kas"
    values = np.zeros(50_000_000, dtype=np.int64)  # untouched pages: no memory until written out
    values[:3] = [7, 8, 9]
    kastore.dump({"big": values, "small": np.arange(2)}, path)
    del values
    argv, env = cli_argv("cat", path, "big")
    launcher = subprocess.run([sys.executable, "-c", PIPELINE_TO_HEAD, *argv], env=env, capture_output=True,
                              check=True, timeout=300)
    report = json.loads(launcher.stdout)
    assert report["first"] == "7\n"
    assert report["status"] in PIPE_CLOSED
    assert report["errors"] == ""  # no "Broken pipe", no "Exception ignored ... BrokenPipeError"
    peak = report["peak_mib"]
    assert peak < 150, f"arrayio cat used {peak:.0f} MiB for the first line of a 381 MiB array"
    path.unlink()


@pytest.mark.parametrize("args", [("cat", "{kas}", "big"), ("info", "{kas}"), ("ls", "-l", "{kas}"),
                                  ("validate", "{kas}", "{kas}"), ("info", "--json", "{kas}"), ("--help",),
                                  ("demo", "{folder}")])
def test_closed_stdout_ends_every_verb_quietly(cli_argv, kas_file, tmp_path, args):
    argv, env = cli_argv(*(arg.format(kas=kas_file, folder=tmp_path / "demo") for arg in args))
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first write
    try:
        result = subprocess.run(argv, check=False, env=env, stdout=write_end, stderr=subprocess.PIPE, timeout=300)
    finally:
        os.close(write_end)
    assert result.returncode in PIPE_CLOSED
    assert result.stderr == b"", result.stderr.decode()


def test_progress_bar_draws_on_a_terminal_only(cli_argv, demos, tmp_path):
    argv, env = cli_argv("kdb", "export", demos["kdb"], tmp_path / "a.npz")
    terminal, other_end = pty.openpty()
    try:
        with subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=other_end) as process:
            os.close(other_end)  # read while it runs: a full terminal buffer would block the bar
            drawn = b""
            while chunk := _read_terminal(terminal):
                drawn += chunk
        assert process.returncode == 0
    finally:
        os.close(terminal)
    assert b"episodes" in drawn and b"3/3" in drawn  # the shared bar, on stderr
    piped = subprocess.run(cli_argv("kdb", "export", demos["kdb"], tmp_path / "b.npz")[0], check=False, env=env,
                           capture_output=True, timeout=300)
    assert piped.returncode == 0 and piped.stderr == b""  # no bar in pipes and logs


def _read_terminal(fd: int) -> bytes:
    try:
        return os.read(fd, 65536)
    except OSError:  # EIO: the other end is closed and everything was read
        return b""


def test_the_json_error_of_an_os_error_about_an_fd_names_no_file():
    from arrayio.cli._common import error_object

    error = OSError(9, "Bad file descriptor")
    error.filename = 3  # what os functions given a descriptor set: not a name to print as one
    assert error_object(error)["error"]["file"] is None
