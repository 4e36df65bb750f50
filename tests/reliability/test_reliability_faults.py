"""Injected disk faults for every writer and in-place update (see reliability_faults.py)."""

from __future__ import annotations

import errno

import numpy as np
import pytest
from reliability_faults import ERRNOS, FaultInjector, fault_matrix, injected
from reliability_writers import CASES

from arrayio import WriteError, kastore


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_every_fault_leaves_old_or_new(case, memory_folder):
    report = fault_matrix(case, memory_folder)
    assert report.faults == report.calls * len(ERRNOS) > 0
    assert {"write", "fsync"} <= set(report.operations)
    if not case.in_place or case.name.startswith("bloscpack"):
        assert {"create", "rename", "directory fsync"} <= set(report.operations)
    print(f"\n{case.name}: {report.calls} I/O calls, {report.faults} faults, {dict(report.outcomes)}")


def test_write_error_is_an_os_error_with_the_path(tmp_path):
    target = tmp_path / "x.kas"
    with injected(FaultInjector(2, errno.ENOSPC)), pytest.raises(OSError) as raised:
        kastore.dump({"a": np.zeros(3)}, target)
    error = raised.value
    assert isinstance(error, WriteError) and error.errno == errno.ENOSPC and error.filename == str(target)
    assert str(error) == f"write of {target} failed: [Errno 28] No space left on device"
    assert not target.exists()


def test_directory_fsync_failure_is_reported_not_swallowed(tmp_path):
    target = tmp_path / "x.kas"
    calls = FaultInjector()
    with injected(calls):
        kastore.dump({"a": np.zeros(3)}, target)
    position = [operation for operation, _ in calls.calls].index("directory fsync") + 1
    target.unlink()
    with injected(FaultInjector(position, errno.EIO)), pytest.raises(WriteError) as raised:
        kastore.dump({"a": np.ones(3)}, target)
    assert str(raised.value) == f"directory fsync of {tmp_path} failed: [Errno 5] Input/output error"
    assert np.array_equal(kastore.load(target)["a"], np.ones(3))  # the rename was done: the new file


def test_unsupported_directory_fsync_is_skipped(tmp_path):
    calls = FaultInjector()
    with injected(calls):
        kastore.dump({"a": np.zeros(3)}, tmp_path / "y.kas")
    position = [operation for operation, _ in calls.calls].index("directory fsync") + 1
    with injected(FaultInjector(position, errno.EINVAL)):
        kastore.dump({"a": np.ones(3)}, tmp_path / "y.kas")
    assert np.array_equal(kastore.load(tmp_path / "y.kas")["a"], np.ones(3))


def test_kdb_spool_failure_names_the_target_and_discards_the_file(tmp_path):
    from arrayio import kdb

    target = tmp_path / "e.kdb"
    target.write_bytes(b"old")
    with pytest.raises(WriteError) as raised, kdb.Writer(target) as writer:
        writer.begin_episode(state_dim=1, action_dim=1)
        writer.add_frame([0.0], [0.0])

        def full(data):
            raise OSError(errno.ENOSPC, "No space left on device")

        writer._episode.images.write = full  # the spool of a long streamed episode spills to disk
        writer.add_frame([1.0], [1.0])
    assert str(raised.value) == f"write of {target} failed: [Errno 28] No space left on device"
    assert target.read_bytes() == b"old" and [p.name for p in tmp_path.iterdir()] == ["e.kdb"]


def test_append_without_a_kernel_copy_gives_the_same_file(tmp_path, monkeypatch):
    from reliability_writers import BY_NAME

    case = BY_NAME["bloscpack append"]
    expected = case.new_bytes(tmp_path / "kernel")
    monkeypatch.delattr("os.copy_file_range")  # not Linux
    target = tmp_path / case.target
    case.prepare(target, tmp_path)
    case.run(target, tmp_path)
    assert target.read_bytes() == expected
