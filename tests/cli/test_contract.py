"""One CLI contract, checked verb by verb from the verb table (src/arrayio/cli/_table.py): every verb
fails on a missing file, a folder and a truncated file with exit 1 and one ``arrayio:`` line (and, where
it takes --json, a JSON error object on stdout); usage errors exit 2; the help texts, the shared flags
and docs/cli.md all come from the table. A new verb without a row in CASES fails here."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import click
import numpy as np
import pytest

from arrayio._registry import module_for
from arrayio.cli import main
from arrayio.cli._table import GROUPS, VERBS, markdown_table

REPO = Path(__file__).resolve().parents[2]

# verb -> (argv with {file} where the input goes and {out} a fresh folder, the kind of input it reads).
# None: the verb reads no input file (the failure cases do not apply).
CASES: dict[str, tuple[list[str], str] | None] = {
    "info": (["info", "{file}"], "kastore"),
    "ls": (["ls", "-l", "{file}"], "kastore"),
    "validate": (["validate", "{file}"], "kastore"),
    "cat": (["cat", "{file}", "int32"], "kastore"),
    "convert": (["convert", "{file}", "{out}/converted.kast"], "kastore"),
    "refs": (["refs", "{file}"], "kastore"),
    "map": (["map", "{file}"], "kastore"),
    "demo": None,
    "bloscpack compress": (["bloscpack", "compress", "{file}", "{out}/packed.blp"], "raw"),
    "bloscpack decompress": (["bloscpack", "decompress", "{file}", "{out}/unpacked.dat"], "bloscpack"),
    "bloscpack append": (["bloscpack", "append", "{file}", "{raw}"], "bloscpack"),
    "bloscpack info": (["bloscpack", "info", "{file}"], "bloscpack"),
    "kdb ingest-hdf5": (["kdb", "ingest-hdf5", "{file}", "{out}/ingested.kdb"], "hdf5"),
    "kdb ingest-lerobot": (["kdb", "ingest-lerobot", "{file}", "{out}/ingested.kdb"], "lerobot"),
    "kdb export": (["kdb", "export", "{file}", "{out}/exported.npz"], "kdb"),
    "kdb export-lerobot": (["kdb", "export-lerobot", "{file}", "{out}/exported", "--images"], "kdb"),
    "kdb merge": (["kdb", "merge", "{file}", "-o", "{out}/merged.kdb"], "kdb"),
    "kdb filter": (["kdb", "filter", "{file}", "{out}/filtered.kdb"], "kdb"),
    "kdb stats": (["kdb", "stats", "{file}"], "kdb"),
    "kdb show": (["kdb", "show", "{file}", "0"], "kdb"),
}
SUFFIX = {"kastore": ".kas", "bloscpack": ".blp", "kdb": ".kdb", "hdf5": ".hdf5", "raw": ".dat", "lerobot": ""}
READING = [verb.name for verb in VERBS if CASES.get(verb.name)]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """A valid input of every kind, and a truncated copy of it (a LeRobot folder with a cut parquet file)."""
    folder = tmp_path_factory.mktemp("inputs")
    valid = {name: module_for(name).demo(folder) for name in ("kastore", "bloscpack", "kdb")}
    valid["raw"] = folder / "raw.dat"
    valid["raw"].write_bytes(np.arange(4096, dtype=np.int64).tobytes())
    h5py = pytest.importorskip("h5py")
    valid["hdf5"] = folder / "robomimic.hdf5"
    with h5py.File(valid["hdf5"], "w") as hdf5:
        hdf5.create_dataset("data/demo_0/actions", data=np.zeros((4, 2), np.float32))
        hdf5.create_dataset("data/demo_0/states", data=np.ones((4, 3), np.float32))
    from arrayio.robot.lerobot import export_lerobot

    valid["lerobot"] = folder / "lerobot"
    export_lerobot(valid["kdb"], valid["lerobot"], video=False)
    truncated = {}
    for kind, path in valid.items():
        if kind == "lerobot":
            cut = folder / "lerobot-cut"
            shutil.copytree(path, cut)
            parquet = next(cut.glob("data/**/*.parquet"))
            parquet.write_bytes(parquet.read_bytes()[:100])
        else:
            cut = folder / f"cut{SUFFIX[kind]}"
            cut.write_bytes(Path(path).read_bytes()[:40])
        truncated[kind] = cut
    return {"valid": valid, "truncated": truncated, "folder": folder}


def _argv(verb: str, file: Path, inputs: dict, out: Path) -> list[str]:
    template, _kind = CASES[verb]
    return [part.format(file=file, out=out, raw=inputs["valid"]["raw"]) for part in template]


def _commands() -> dict[str, click.Command]:
    """Every verb of the command, by its words after ``arrayio``."""
    found = {}
    ctx = click.Context(main)
    for name in main.list_commands(ctx):
        command = main.get_command(ctx, name)
        if isinstance(command, click.Group):
            found.update({f"{name} {leaf}": sub for leaf, sub in command.commands.items()})
        else:
            found[name] = command
    return found


def test_the_table_lists_every_verb_and_every_verb_has_a_contract_case():
    assert sorted(_commands()) == sorted(verb.name for verb in VERBS) == sorted(CASES)


@pytest.mark.parametrize("verb", VERBS, ids=lambda verb: verb.name)
def test_each_verb_takes_the_flags_its_row_names_and_its_help_is_the_row(verb):
    command = _commands()[verb.name]
    options = {name for parameter in command.params for name in getattr(parameter, "opts", [])}
    assert ("--json" in options) == ("json" in verb.flags)
    assert ("--storage-option" in options) == ("storage" in verb.flags)
    assert ("--force" in options) == ("force" in verb.flags)
    assert command.help == verb.summary
    for argument in (parameter for parameter in command.params if isinstance(parameter, click.Argument)):
        assert argument.human_readable_name.removesuffix("...") in verb.arguments, (verb.name, argument.name)


def test_every_verb_that_reads_a_file_or_url_takes_storage_options():
    local_only = {"bloscpack compress", "bloscpack decompress", "bloscpack append", "bloscpack info",
                  "kdb ingest-hdf5", "kdb ingest-lerobot"}  # the reference blpk's and h5py/LeRobot folders: paths
    for verb in VERBS:
        if CASES[verb.name] and verb.name not in local_only:
            assert "storage" in verb.flags, verb.name


def test_top_level_help_lists_every_verb_of_every_group(invoke):
    code, out, _err = invoke("--help")
    assert code == 0
    text = re.sub(r"-\s+", "-", " ".join(out.split()))  # help wraps after a hyphen
    for group in GROUPS:
        assert " ".join(group.summary().split()) in text
    for verb in ("merge", "filter", "stats", "export-lerobot"):
        assert verb in GROUPS[1].summary()
    for group in GROUPS:
        assert main.get_command(click.Context(main), group.name).help == group.summary()


def test_docs_cli_md_has_the_generated_verbs_table():
    text = (REPO / "docs" / "cli.md").read_text(encoding="utf-8")
    start = text.index("<!-- verbs: generated from src/arrayio/cli/_table.py -->\n") + len(
        "<!-- verbs: generated from src/arrayio/cli/_table.py -->\n")
    assert text[start:text.index("<!-- end of verbs -->")] == markdown_table()


def _check_failure(verb: str, code: int, out: str, err: str) -> None:
    assert code == 1, (verb, code, err)
    if verb == "validate":  # a bad file is a problem of that file, reported on stdout: not a failure of the verb
        report = json.loads(out)
        assert report["valid"] is False and len(report["files"][0]["problems"]) == 1 and err == ""
        return
    if verb == "map" and not err:  # a corrupt file is mapped as far as it parses, with its problems
        assert json.loads(out)["problems"]
        return
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("arrayio: "), (verb, err)
    assert "Traceback" not in err
    if "json" in {flag for row in VERBS if row.name == verb for flag in row.flags}:
        error = json.loads(out)["error"]
        assert set(error) == {"message", "file", "field", "offset"}
        assert lines[0] == f"arrayio: {error['message']}"


@pytest.mark.parametrize("verb", READING)
@pytest.mark.parametrize("case", ["missing", "directory", "truncated"])
def test_every_verb_fails_on_a_bad_input_with_exit_1_and_one_line(verb, case, inputs, tmp_path, invoke):
    kind = CASES[verb][1]
    if case == "missing":
        path = tmp_path / f"missing{SUFFIX[kind]}"
    elif case == "directory":
        path = tmp_path / f"folder{SUFFIX[kind]}"
        path.mkdir()
    else:
        if kind == "raw":
            pytest.skip("compress packs any bytes: a cut input is still an input")
        path = inputs["truncated"][kind]
    out = tmp_path / "out"
    out.mkdir()
    argv = _argv(verb, path, inputs, out)
    if "json" in {flag for row in VERBS if row.name == verb for flag in row.flags}:
        argv.append("--json")
    code, stdout, stderr = invoke(*argv)
    if verb in ("validate", "map") and case == "missing":
        assert str(path) in stdout + stderr
    _check_failure(verb, code, stdout, stderr)
    assert sorted(os.listdir(out)) == [], "a failed verb leaves no output"


@pytest.mark.parametrize("verb", READING)
def test_every_verb_succeeds_on_a_valid_input_with_exit_0(verb, inputs, tmp_path, invoke):
    out = tmp_path / "out"
    out.mkdir()
    source = inputs["valid"][CASES[verb][1]]
    if verb == "bloscpack append":  # it changes its input: a copy
        source = Path(shutil.copy(source, tmp_path / "appended.blp"))
    code, _stdout, stderr = invoke(*_argv(verb, source, inputs, out))
    assert code == 0, (verb, stderr)  # (kdb filter without conditions keeps every episode)


@pytest.mark.parametrize("verb", [verb.name for verb in VERBS])
def test_every_verb_exits_2_on_a_usage_error_with_json_when_asked(verb, invoke):
    row = next(row for row in VERBS if row.name == verb)
    argv = [*verb.split(), "--no-such-option"]
    if "json" in row.flags:
        argv.append("--json")
    code, out, err = invoke(*argv)
    assert code == 2, (verb, err)
    assert "No such option" in err
    if "json" in row.flags:
        assert "No such option" in json.loads(out)["error"]["message"]


def test_ctrl_c_exits_130(inputs, cli_argv, tmp_path):
    big = tmp_path / "big.kas"
    from arrayio import kastore

    kastore.dump({"x": np.arange(20_000_000)}, big)
    argv, env = cli_argv("cat", big, "x")
    with subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as process:
        process.stdout.read(1000)  # running; now it waits on the full pipe
        time.sleep(0.2)
        process.send_signal(signal.SIGINT)
        _rest, errors = process.communicate(timeout=60)
        assert process.returncode == 130
        assert b"Traceback" not in errors


def test_demo_reads_no_input_and_exits_0(invoke, tmp_path):
    code, out, err = invoke("demo", tmp_path / "demo", "--json")
    assert code == 0, err
    assert all(row["valid"] for row in json.loads(out)["formats"])
