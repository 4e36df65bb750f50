"""A real full disk: every writer on a small tmpfs filled until it fails, with the checks of the fault tests.

For each writer the disk is filled to leave 0, 1, 2, ... free pages until the writer succeeds.
Every failure before that must be a WriteError with ENOSPC naming the path and the operation
(for the CLI, that line on stderr), leave the complete old file and no temporary file, and the
next call after space is freed must succeed.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess

import pytest
from reliability_writers import CASES, CliFailure, temp_files

from arrayio import WriteError

PAGE = 4096


@pytest.fixture(scope="module")
def small_disk(tmp_path_factory):
    """A 2 MiB tmpfs mounted for this module (root only)."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (CI runs as root); not root here")
    mount_point = tmp_path_factory.mktemp("small-disk")
    try:
        result = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount_point)],
                                capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as error:
        pytest.skip(f"cannot run mount: {error}")
    if result.returncode != 0:
        pytest.skip(f"mount -t tmpfs was refused: {result.stderr.strip() or result.returncode}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], capture_output=True, timeout=30)


def fill(path, leave_pages: int) -> None:
    """Write ``path`` until the disk is full, then give back ``leave_pages`` pages."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        block = bytes(64 * 1024)
        written = 0
        while True:
            try:
                count = os.write(fd, block)
            except OSError as error:
                assert error.errno == errno.ENOSPC, error
                break
            written += count
        os.ftruncate(fd, max(0, written - leave_pages * PAGE))
    finally:
        os.close(fd)


def check_disk_full_error(error: BaseException, target) -> None:
    if isinstance(error, CliFailure):
        assert error.code == 1 and "failed: [Errno 28] No space left on device" in error.stderr, error.stderr
        assert str(target) in error.stderr or str(target.parent) in error.stderr, error.stderr
        return
    assert isinstance(error, WriteError) and error.errno == errno.ENOSPC, repr(error)
    assert error.path in (str(target), str(target.parent)) and f"{error.operation} of {error.path} failed" in str(error)


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_full_disk_leaves_old_or_new(case, small_disk, tmp_path):
    folder = small_disk / "work"
    filler = small_disk / "filler"
    target = folder / case.target
    new = case.new_bytes(tmp_path / "scratch")
    failures = []
    for free_pages in range(64):
        shutil.rmtree(folder, ignore_errors=True)
        filler.unlink(missing_ok=True)
        folder.mkdir()
        case.prepare(target, tmp_path)
        old = target.read_bytes()
        fill(filler, free_pages)
        try:
            case.run(target, tmp_path)
        except (WriteError, CliFailure) as error:
            check_disk_full_error(error, target)
            assert case.outcome(target, old, new) == "old"
            assert temp_files(folder) == []
            failures.append(getattr(error, "operation", "cli"))
            filler.unlink()
            case.run(target, tmp_path)  # with space again, the next call succeeds
            assert case.outcome(target, old, new) == "new"
            continue
        assert case.outcome(target, old, new) == "new"
        break
    else:
        raise AssertionError(f"{case.name} never succeeded with up to 63 free pages")
    assert failures, f"{case.name} succeeded on a full disk"
    print(f"\n{case.name}: failed with 0..{len(failures) - 1} free pages ({sorted(set(failures))}), "
          f"succeeded with {len(failures)}")
