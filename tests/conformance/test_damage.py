"""Every truncation of each format's demo file, and a bit flip in every header/index byte.

Each damaged file is opened, described (``info``) and read completely through
the format's reader; nothing but a ``FormatError`` may escape. ``validate``
must never raise, and whenever the file is rejected it must say so with at
least one ``Problem`` carrying an int byte offset. Every error names the file,
whichever stage found the damage; a problem leaves it to its caller. Every truncation must be
rejected (each format knows where its data ends). The cases of one format run
in one test: thousands of pytest items would cost more than the checks.
"""

from __future__ import annotations

import traceback
from pathlib import Path
from typing import Any

import pytest

import arrayio
from arrayio._registry import FORMATS

from .formats import free_offsets, read_everything, structure_offsets


def _outcome(format_name: str, module: Any, path: Path) -> str | None:
    """Open, info and read ``path`` completely: None when it reads, else the FormatError's message.

    Anything other than a FormatError fails the test with the traceback.
    """
    try:
        with module.open(path) as reader:
            reader.info()
            read_everything(format_name, reader)
            reader.entries()
    except arrayio.FormatError as error:
        # Whichever stage found the damage, the message starts with the file: a loop over many files says which.
        assert error.file == str(path) and str(error) == f"{path}: {error.message}", \
            f"{format_name}: the error does not name {path.name}: {error}"
        return str(error)
    except Exception:  # noqa: BLE001 - any other exception is the failure this suite looks for
        pytest.fail(f"{format_name} {path.name}: not a FormatError:\n{traceback.format_exc()}")
    return None


def _problems(format_name: str, module: Any, path: Path) -> list[arrayio.Problem]:
    try:
        problems = module.validate(path)
    except Exception:  # noqa: BLE001
        pytest.fail(f"{format_name} {path.name}: validate raised:\n{traceback.format_exc()}")
    assert all(isinstance(problem, arrayio.Problem) for problem in problems), problems
    assert not any(str(path) in problem.message for problem in problems), problems  # the caller names the file
    return problems


def _judge(format_name: str, module: Any, path: Path, data: bytes) -> bool:
    """Check one damaged file; True when it was noticed (rejected by reading, or reported by validate)."""
    path.write_bytes(data)
    error = _outcome(format_name, module, path)
    problems = _problems(format_name, module, path)
    if error is not None:
        assert any(isinstance(problem.offset, int) for problem in problems), \
            f"{format_name} {path.name}: rejected ({error}) but validate gives no problem with a byte offset: " \
            f"{problems}"
    return error is not None or bool(problems)


def test_every_truncation(format_name, demo, module, tmp_path):
    data = demo.read_bytes()
    suffix = FORMATS[format_name].extensions[0]
    for length in range(len(data)):
        noticed = _judge(format_name, module, tmp_path / f"cut-{length}{suffix}", data[:length])
        assert noticed, f"{format_name}: the demo file cut to {length} bytes reads and validates clean"
        (tmp_path / f"cut-{length}{suffix}").unlink()


def test_a_bit_flip_in_every_structure_byte(format_name, demo, module, tmp_path):
    data = demo.read_bytes()
    with module.open(demo) as reader:
        offsets = structure_offsets(format_name, reader)
        free = free_offsets(format_name, reader)
    assert offsets and offsets[-1] < len(data)
    unnoticed = []
    for offset in offsets:
        damaged = bytearray(data)
        damaged[offset] ^= 1 << (offset % 8)  # a different bit in neighbouring bytes, reproducibly
        path = tmp_path / f"flip-{offset}{FORMATS[format_name].extensions[0]}"
        if not _judge(format_name, module, path, bytes(damaged)):
            unnoticed.append(offset)
        path.unlink()
    assert not set(unnoticed) - free, f"{format_name}: flips at {sorted(set(unnoticed) - free)} read and validate clean"
    assert len(unnoticed) < len(offsets) // 2
