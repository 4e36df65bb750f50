"""Crash consistency of update_metadata.

Three angles, each ending with the same check, that ``load`` succeeds with
exactly the old or exactly the new metadata:

* a child process is SIGKILLed before, inside (a torn half write) and after
  each of the four write steps (block, fsync, slot, fsync);
* the same child records its writes instead of making them, and every image a
  power loss could leave (each unsynced write lost, zero-filled, torn or
  complete) is built and loaded, SQLite-crash-test style; a writer without the
  first fsync barrier fails this check, which shows the check has teeth;
* a child updating in a loop is SIGKILLed at random times.
"""

from __future__ import annotations

import itertools
import os
import pickle
import random
import signal
import time

import numpy as np
import pytest

from arrayio import FormatError
from arrayio import pycauset as ours

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")

OLD = {"version": 1}
NEW = {"version": 2, "note": "x" * 300}
STEPS = 4  # pwrite(block), fsync, pwrite(slot), fsync


def make_file(path):
    ours.save(np.arange(20.0).reshape(4, 5), path, properties=OLD)


def update_in_child(path, *, kill_at: int, torn: bool, journal=None, skip_first_fsync=False) -> None:
    """Run update_metadata in a forked child that SIGKILLs itself at write step ``kill_at``."""
    pid = os.fork()
    if pid == 0:  # the child: never returns
        try:
            real_pwrite = os.pwrite
            real_fsync = os.fsync
            log: list = []
            step = [0]
            syncs = [0]

            def die():
                if journal is not None:
                    with open(journal, "wb") as handle:
                        pickle.dump(log, handle)
                os.kill(os.getpid(), signal.SIGKILL)

            def checkpoint():
                if step[0] == kill_at:
                    die()
                step[0] += 1

            def pwrite(fd, data, offset):
                data = bytes(data)
                if torn and step[0] == kill_at:
                    data = data[:len(data) // 2]
                    log.append(("write", offset, data))
                    if journal is None:
                        real_pwrite(fd, data, offset)
                    die()
                checkpoint()
                log.append(("write", offset, data))
                return real_pwrite(fd, data, offset) if journal is None else len(data)

            def fsync(fd):
                checkpoint()
                syncs[0] += 1
                if journal is None:
                    real_fsync(fd)
                elif not (skip_first_fsync and syncs[0] == 1):
                    log.append(("sync",))

            os.pwrite, os.fsync = pwrite, fsync
            ours.update_metadata(path, {"properties": NEW})
            checkpoint()
            die()
        finally:
            os._exit(3)
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, status


def assert_old_or_new(path) -> str:
    container = ours.load(path)
    properties = container.properties
    assert properties in (OLD, NEW), properties
    assert np.array_equal(container.array, np.arange(20.0).reshape(4, 5))
    assert container.metadata["rows"] == 4 and container.metadata["payload_layout"]["kind"] == "raw_dense"
    return "old" if properties == OLD else "new"


KILL_POINTS = [(step, False) for step in range(STEPS + 1)] + [(0, True), (2, True)]


@pytest.mark.parametrize("kill_at, torn", KILL_POINTS)
def test_sigkill_at_every_write_step(tmp_path, kill_at, torn):
    path = tmp_path / "c.pycauset"
    make_file(path)
    update_in_child(path, kill_at=kill_at, torn=torn)
    outcome = assert_old_or_new(path)
    if kill_at < 2 or (kill_at == 2 and not torn):
        assert outcome == "old"
    if kill_at >= 3:
        assert outcome == "new"
    ours.update_metadata(path, {"properties": {"after": True}})
    assert ours.load(path).properties["after"] is True


def power_loss_images(original: bytes, log: list) -> list[bytes]:
    """Every file image a power loss could leave: synced writes kept, each later write lost/zeroed/torn/kept."""
    last_sync = max((index for index, entry in enumerate(log) if entry[0] == "sync"), default=-1)
    durable = [entry for entry in log[:last_sync] if entry[0] == "write"]
    pending = [entry for entry in log[last_sync + 1:] if entry[0] == "write"]
    images = []
    for variants in itertools.product(("lost", "zeroed", "torn", "kept"), repeat=len(pending)):
        image = bytearray(original)
        writes = [(offset, data) for _, offset, data in durable]
        for (_, offset, data), variant in zip(pending, variants):
            if variant == "zeroed":
                writes.append((offset, bytes(len(data))))
            elif variant == "torn":
                writes.append((offset, data[:len(data) // 2]))
            elif variant == "kept":
                writes.append((offset, data))
        for offset, data in writes:
            if len(image) < offset + len(data):
                image.extend(bytes(offset + len(data) - len(image)))
            image[offset:offset + len(data)] = data
        images.append(bytes(image))
    return images


def power_loss_trials(tmp_path, skip_first_fsync: bool) -> tuple[int, int]:
    path = tmp_path / "p.pycauset"
    make_file(path)
    original = path.read_bytes()
    image_path = tmp_path / "image.pycauset"
    trials = failures = 0
    for kill_at, torn in KILL_POINTS:
        journal = tmp_path / "journal.pickle"
        update_in_child(path, kill_at=kill_at, torn=torn, journal=journal, skip_first_fsync=skip_first_fsync)
        assert path.read_bytes() == original
        with open(journal, "rb") as handle:
            log = pickle.load(handle)
        for image in power_loss_images(original, log):
            image_path.write_bytes(image)
            trials += 1
            try:
                assert_old_or_new(image_path)
            except (FormatError, AssertionError):
                failures += 1
    return trials, failures


def test_power_loss_images_are_old_or_new(tmp_path):
    trials, failures = power_loss_trials(tmp_path, skip_first_fsync=False)
    print(f"\npycauset crash consistency: {trials} power-loss images, {failures} failures")
    assert trials >= 19 and failures == 0


def test_without_the_first_barrier_the_check_fails(tmp_path):
    _trials, failures = power_loss_trials(tmp_path, skip_first_fsync=True)
    assert failures > 0, "dropping the block fsync should leave a slot pointing at a lost block"


def test_random_time_kills(tmp_path):
    path = tmp_path / "r.pycauset"
    ours.save(np.arange(20.0).reshape(4, 5), path, properties={"counter": 0})
    rng = random.Random(6)
    trials = interrupted = 0
    started = time.monotonic()
    while trials < 300 and time.monotonic() - started < 25:
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                os.close(read_end)
                first = ours.read_typed_metadata(path)["properties"]["counter"] + 1
                for counter in itertools.count(first):
                    os.write(write_end, f"B{counter}\n".encode())
                    ours.update_metadata(path, {"properties": {"counter": counter, "blob": "y" * (counter % 97)},
                                                "history": [counter, -counter]})
                    os.write(write_end, f"E{counter}\n".encode())
            finally:
                os._exit(3)
        os.close(write_end)
        time.sleep(rng.uniform(0, 0.01))
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        with os.fdopen(read_end, "rb") as pipe:
            events = pipe.read().decode().split()
        container = ours.load(path)
        counter = container.properties["counter"]
        begun = [int(event[1:]) for event in events if event[0] == "B"]
        ended = [int(event[1:]) for event in events if event[0] == "E"]
        if begun:
            allowed = {begun[-1], ended[-1] if ended else begun[0] - 1}
            assert counter in allowed, (counter, allowed)
            interrupted += len(begun) != len(ended)
        if counter:
            assert container.properties == {"counter": counter, "blob": "y" * (counter % 97)}
            assert container.metadata["history"] == [counter, -counter]
        trials += 1
    print(f"\npycauset crash consistency: {trials} random-time SIGKILL trials, "
          f"{interrupted} killed inside an update, final generation {ours.load(path).generation}")
    assert trials >= 100
    assert ours.validate(path) == [] or all("slot" in str(problem) for problem in ours.validate(path))


def test_concurrent_updaters_lose_nothing(tmp_path):
    path = tmp_path / "two.pycauset"
    make_file(path)
    children = []
    for key in ("a", "b"):
        pid = os.fork()
        if pid == 0:
            try:
                for value in range(40):
                    ours.update_metadata(path, {"counters": {key: value}})
            finally:
                os._exit(0)
        children.append(pid)
    for pid in children:
        _, status = os.waitpid(pid, 0)
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    container = ours.load(path)
    assert container.metadata["counters"] == {"a": 39, "b": 39}
    assert container.generation == 81
