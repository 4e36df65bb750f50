"""Every writer and in-place update of arrayio as a case the fault, kill and full-disk tests share.

A case writes the *old* target (and its inputs) into a folder, then ``run`` makes the write under
test, which turns the target into the *new* one. ``outcome`` says which of the two the target
holds now ("old" or "new", byte for byte where the writer is deterministic, by content for
pycauset ``save``, whose payload_uuid is random) and raises AssertionError for anything else, or
when ``arrayio.validate`` finds a problem.

Inputs of a case (the source of a convert, the bytes to append) live in ``inputs``, which may be
another folder than the target's (the full-disk test keeps them off the small tmpfs).
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

import arrayio
from arrayio import bloscpack, kast, kastore, kdb, pycauset

KEYED_OLD = {"a": np.arange(300, dtype=np.int32), "b": np.linspace(0, 1, 50)}
KEYED_NEW = {"a": np.arange(500, dtype=np.int64) * 3, "c": np.frombuffer(b"new bytes" * 40, np.uint8)}
ARRAY_OLD = np.arange(3000, dtype=np.float64).reshape(300, 10)
ARRAY_NEW = np.linspace(-1, 1, 4000).reshape(400, 10)
BYTES_OLD = np.random.default_rng(1).integers(0, 8, 20_000, dtype=np.uint8).tobytes()
BYTES_NEW = np.random.default_rng(2).integers(0, 8, 26_000, dtype=np.uint8).tobytes()
APPENDED = np.random.default_rng(3).integers(0, 4, 9_000, dtype=np.uint8).tobytes()
CHUNK = 4096
PY_OLD = {"version": 1}
PY_NEW = {"version": 2, "note": "n" * 200}


def write_kdb(path: Path, episodes: int, seed: int) -> None:
    """A kdb file of ``episodes`` episodes, the last streamed frame by frame (a writer mid-episode)."""
    rng = np.random.default_rng(seed)
    with kdb.Writer(path, created_timestamp=1_700_000_000 + seed) as writer:
        for number in range(episodes - 1):
            writer.add_episode(rng.normal(size=(6, 3)), rng.normal(size=(6, 2)), task=f"task {number}",
                               images={"wrist": rng.integers(0, 255, (6, 8, 8, 3), dtype=np.uint8)})
        writer.begin_episode(state_dim=3, action_dim=2, task="streamed")
        for frame in range(8):
            writer.add_frame(rng.normal(size=3), rng.normal(size=2), reward=float(frame),
                             images={"top": rng.integers(0, 255, (8, 8), dtype=np.uint8)})
        writer.end_episode(success=True)


def convert_cli(source: Path, target: Path) -> None:
    """``arrayio convert source target`` in this process; a failure raises CliFailure with its stderr."""
    from click.testing import CliRunner

    from arrayio.cli import main

    result = CliRunner().invoke(main, ["convert", str(source), str(target), "--force"])
    if result.exit_code != 0:
        raise CliFailure(result.exit_code, result.stderr)


class CliFailure(Exception):
    """The CLI exited non-zero; ``stderr`` is what it printed."""

    def __init__(self, code: int, stderr: str) -> None:
        super().__init__(f"exit {code}: {stderr}")
        self.code = code
        self.stderr = stderr


def convert_in_child(source: Path, target: Path) -> None:
    """The CLI's main in this (child) process, as the installed script runs it."""
    from arrayio.cli import main

    with contextlib.suppress(SystemExit):
        main(["convert", str(source), str(target), "--force"], standalone_mode=False)


def _pycauset_holds(array: np.ndarray, properties: dict) -> Callable[[Path], bool]:
    def check(path: Path) -> bool:
        container = pycauset.load(path)
        return bool(np.array_equal(container.array, array) and container.properties == properties)
    return check


@dataclass
class Case:
    """One writer: how to make the old target and inputs, the write under test, how to recognise new."""

    name: str
    target: str
    prepare: Callable[[Path, Path], None]  # (target path, inputs folder)
    run: Callable[[Path, Path], None]  # (target path, inputs folder)
    in_place: bool = False  # an update of an existing file (locks it) rather than a new file
    is_new: Callable[[Path], bool] | None = None  # content check where the new bytes are not deterministic
    # After a SIGKILL nothing can cut what an in-place update appended past the old end; for
    # pycauset that is the format's design (a block no slot points at), so the old *content* counts.
    is_old_after_kill: Callable[[Path], bool] | None = None
    child_run: Callable[[Path, Path], None] | None = None  # the run in a kill-test child, when it differs
    _new_bytes: dict = field(default_factory=dict, repr=False)

    def new_bytes(self, scratch: Path) -> bytes:
        """The bytes of the new target, made once in ``scratch`` by an undisturbed run."""
        if "bytes" not in self._new_bytes:
            scratch.mkdir(parents=True, exist_ok=True)
            path = scratch / self.target
            self.prepare(path, scratch)
            self.run(path, scratch)
            self._new_bytes["bytes"] = path.read_bytes()
        return self._new_bytes["bytes"]

    def outcome(self, path: Path, old: bytes, new: bytes, killed: bool = False) -> str:
        """"old" or "new"; AssertionError for anything else or when validate finds a problem."""
        problems = arrayio.validate(path)
        assert problems == [], f"{self.name}: validate found {problems}"
        data = path.read_bytes()
        if data == old or (killed and self.is_old_after_kill is not None and data[:len(old)] == old
                           and self.is_old_after_kill(path)):
            return "old"
        if data == new or (self.is_new is not None and self.is_new(path)):
            return "new"
        raise AssertionError(f"{self.name}: the target is neither the old nor the new file "
                             f"({len(data)} bytes; old {len(old)}, new {len(new)})")


def _inputs(folder: Path) -> None:
    """The inputs some writers read (made once per folder)."""
    if not (folder / "input.kas").exists():
        kastore.dump(KEYED_NEW, folder / "input.kas")
    for name, data in (("input.bin", BYTES_NEW), ("appended.bin", APPENDED)):
        if not (folder / name).exists():
            (folder / name).write_bytes(data)


def _old_blp(path: Path, inputs: Path) -> None:
    _inputs(inputs)
    bloscpack.pack_bytes_to_file(BYTES_OLD, path, chunk_size=CHUNK, metadata={"name": "old"},
                                 bloscpack_args={"max_app_chunks": 64})


CASES = [
    Case("kastore dump", "t.kas",
         lambda path, inputs: kastore.dump(KEYED_OLD, path),
         lambda path, inputs: kastore.dump(KEYED_NEW, path)),
    Case("kast dump", "t.kast",
         lambda path, inputs: kast.dump(KEYED_OLD, path),
         lambda path, inputs: kast.dump(KEYED_NEW, path)),
    Case("bloscpack pack_ndarray_to_file", "t.blp",
         lambda path, inputs: bloscpack.pack_ndarray_to_file(ARRAY_OLD, path, chunk_size=CHUNK),
         lambda path, inputs: bloscpack.pack_ndarray_to_file(ARRAY_NEW, path, chunk_size=CHUNK)),
    Case("bloscpack pack_bytes_to_file", "t.blp", _old_blp,
         lambda path, inputs: bloscpack.pack_bytes_to_file(BYTES_NEW, path, chunk_size=CHUNK)),
    Case("bloscpack pack_file_to_file", "t.blp", _old_blp,
         lambda path, inputs: bloscpack.pack_file_to_file(inputs / "input.bin", path, chunk_size=CHUNK)),
    Case("bloscpack append", "t.blp", _old_blp,
         lambda path, inputs: bloscpack.append(path, inputs / "appended.bin"), in_place=True),
    Case("bloscpack rewrite_metadata", "t.blp", _old_blp,
         lambda path, inputs: bloscpack.rewrite_metadata(path, {"name": "new", "n": 2}), in_place=True),
    Case("kdb Writer", "t.kdb",
         lambda path, inputs: write_kdb(path, 2, seed=1),
         lambda path, inputs: write_kdb(path, 4, seed=2)),
    Case("pycauset save", "t.pycauset",
         lambda path, inputs: pycauset.save(ARRAY_OLD, path, properties=PY_OLD),
         lambda path, inputs: pycauset.save(ARRAY_NEW, path, properties=PY_NEW),
         is_new=_pycauset_holds(ARRAY_NEW, PY_NEW)),
    Case("pycauset update_metadata", "t.pycauset",
         lambda path, inputs: pycauset.save(ARRAY_OLD, path, properties=PY_OLD),
         lambda path, inputs: pycauset.update_metadata(path, {"properties": PY_NEW}), in_place=True,
         is_new=_pycauset_holds(ARRAY_OLD, PY_NEW), is_old_after_kill=_pycauset_holds(ARRAY_OLD, PY_OLD)),
    Case("arrayio convert", "t.kast",
         lambda path, inputs: (_inputs(inputs), kast.dump(KEYED_OLD, path)),
         lambda path, inputs: convert_cli(inputs / "input.kas", path),
         child_run=lambda path, inputs: convert_in_child(inputs / "input.kas", path)),
]
BY_NAME = {case.name: case for case in CASES}


def temp_files(folder: Path) -> list[str]:
    """Temporary files a writer left in ``folder`` (atomic_write names them .<target>.*.tmp)."""
    return sorted(name for name in os.listdir(folder) if name.endswith(".tmp") or name.startswith("tmp"))


