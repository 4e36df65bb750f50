"""Fetched byte ranges that processes reading the same objects share through a folder, so that each range
crosses the network once for all of them (the DataLoader workers of one dataset, say).

A range of one object version is the file ``<digest of URL and version>-<start>-<stop>`` in the folder.
One process claims it: it makes a locked temporary file and links it to the range's ``.part`` name (a link
fails where one exists, so one claim wins, and the claim is locked before anyone can see it). It fetches,
writes the bytes and renames ``.part`` to the final name, then unlocks. The others wait for the lock
(bounded) and map the final file. A claimer that fails removes its ``.part``, and one that dies holds no
lock: either way the waiters find no final file and fetch the range themselves, and the next process to
claim the range takes a dead claim over. Past the folder's byte budget the oldest ranges are removed (a
process that mapped one keeps its pages until it drops them).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import mmap
import os
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass

from ._cache import Fetched

# Smaller ranges are read into memory, larger ones mapped (a map costs a few system calls and a page table).
MAP_FROM = 64 << 10
# The default byte budget of a folder: at most this much, and a quarter of its file system's free space.
DEFAULT_BUDGET = 1 << 30
_FOLDER_PREFIX = "arrayio-shared-"
ORPHAN_AGE = 600  # seconds a folder of a process that no longer runs stays unchanged before it is removed
_sweeps = threading.Lock()
_published_since_sweep: dict[str, int] = {}


@dataclass
class Claim:
    """This process's right to fetch and publish one range: the locked ``.part`` file's descriptor."""

    fd: int
    part: str
    final: str
    ended: bool = False  # published or abandoned: the descriptor is closed


class SharedRanges:
    """The ranges of one object version in a shared ``folder``, at most ``budget`` bytes in all."""

    def __init__(self, folder: str, identity: str, budget: int = DEFAULT_BUDGET) -> None:
        self.folder = folder
        self.budget = int(budget)
        self._prefix = os.path.join(folder, hashlib.sha1(identity.encode()).hexdigest()[:24])

    def _final(self, start: int, stop: int) -> str:
        return f"{self._prefix}-{start}-{stop}"

    def load(self, start: int, stop: int) -> Fetched | None:
        """The range's bytes where a process published them (mapped when large), else None."""
        try:
            fd = os.open(self._final(start, stop), os.O_RDONLY)
        except OSError:
            return None
        try:
            if os.fstat(fd).st_size != stop - start:  # not ours, or cut short: fetched again
                return None
            if stop - start < MAP_FROM:
                return os.pread(fd, stop - start, 0)
            return memoryview(mmap.mmap(fd, stop - start, access=mmap.ACCESS_READ))
        except OSError:
            return None
        finally:
            os.close(fd)

    def claim(self, start: int, stop: int) -> Claim | None:
        """This process's claim on the range, or None where another holds it or the folder cannot take one."""
        final = self._final(start, stop)
        temporary = f"{final}.{os.getpid()}.{threading.get_ident()}"
        try:
            fd = os.open(temporary, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
        except OSError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            os.link(temporary, final + ".part")
        except FileExistsError:
            os.close(fd)
            return self._take_over(final)
        except OSError:
            os.close(fd)
            return None
        finally:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
        claim = Claim(fd, final + ".part", final)
        if os.path.exists(final):  # published between the caller's load and this claim
            self.abandon(claim)
            return None
        return claim

    @staticmethod
    def _take_over(final: str) -> Claim | None:
        """The claim of a process that died holding it (its ``.part`` is still there, locked by nobody), or
        None where the claimer lives. A live claimer locks its file before linking it and unlocks it only
        once it is renamed or removed: an unlocked file still at the ``.part`` name is a dead claim."""
        part = final + ".part"
        try:
            fd = os.open(part, os.O_RDWR)
        except OSError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if os.stat(part).st_ino != os.fstat(fd).st_ino or os.path.exists(final):
                raise FileExistsError(part)  # renamed or replaced meanwhile: not a dead claim
            os.ftruncate(fd, 0)
        except OSError:
            os.close(fd)
            return None
        return Claim(fd, part, final)

    def publish(self, claim: Claim, data: Fetched) -> None:
        """Write the claimed range's bytes and make them visible to every process; the claim ends."""
        try:
            view = memoryview(data).cast("B")
            while len(view):
                view = view[os.write(claim.fd, view):]
            os.rename(claim.part, claim.final)
        except OSError:  # a full or vanished folder: the range is not shared, the reads go on
            with contextlib.suppress(OSError):
                os.unlink(claim.part)
        finally:
            claim.ended = True
            os.close(claim.fd)
        self._count(len(data))

    def offer(self, start: int, data: Fetched) -> None:
        """Publish bytes fetched at ``start`` without a claim first, unless another process holds them."""
        claim = self.claim(start, start + len(data))
        if claim is not None:
            self.publish(claim, data)

    @staticmethod
    def abandon(claim: Claim) -> None:
        """Give the claim up unpublished (the fetch failed): waiting processes fetch the range themselves."""
        if not claim.ended:
            claim.ended = True
            with contextlib.suppress(OSError):
                os.unlink(claim.part)
            os.close(claim.fd)

    def wait(self, start: int, stop: int, timeout: float) -> Fetched | None:
        """The range once the process that claimed it has published it; None when it gave up, died, or took
        more than ``timeout`` seconds (the caller then fetches it itself)."""
        try:
            fd = os.open(self._final(start, stop) + ".part", os.O_RDONLY)
        except OSError:
            return self.load(start, stop)
        try:
            deadline = time.monotonic() + timeout
            pause = 0.0005
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        return None
                    time.sleep(pause)
                    pause = min(2 * pause, 0.002)
        finally:
            os.close(fd)
        return self.load(start, stop)

    def _count(self, published: int) -> None:
        """Remove the oldest ranges once the folder may hold more than its budget (checked every eighth of it)."""
        with _sweeps:
            total = _published_since_sweep.get(self.folder, 0) + published
            _published_since_sweep[self.folder] = 0 if total >= self.budget // 8 else total
        if total >= self.budget // 8:
            sweep(self.folder, self.budget)


def sweep(folder: str, budget: int) -> None:
    """Remove the folder's oldest published ranges until it holds at most three quarters of ``budget``."""
    found = []
    with contextlib.suppress(OSError), os.scandir(folder) as entries:
        for entry in entries:
            if "." not in entry.name:  # claims in progress end in .part or a temporary suffix
                with contextlib.suppress(OSError):
                    status = entry.stat()
                    found.append((status.st_mtime_ns, status.st_size, entry.path))
    held = sum(size for _, size, _ in found)
    if held <= budget:
        return
    for _, size, path in sorted(found):
        with contextlib.suppress(OSError):
            os.unlink(path)
        held -= size
        if held <= budget * 3 // 4:
            return


def make_shared_folder() -> tuple[str, int]:
    """A new private folder for one dataset's processes to share ranges through, and its byte budget:
    in /dev/shm where it can be written (memory, shared), else the temporary folder. Folders left by
    processes that no longer run are removed first."""
    base = "/dev/shm" if os.access("/dev/shm", os.W_OK) else tempfile.gettempdir()
    _remove_orphans(base)
    folder = tempfile.mkdtemp(prefix=f"{_FOLDER_PREFIX}{os.getpid()}-", dir=base)
    return folder, min(DEFAULT_BUDGET, shutil.disk_usage(folder).free // 4)


def remove_shared_folder(folder: str, owner: int) -> None:
    """Remove ``folder`` and what it holds, in the process that made it only (a forked copy of its owner
    object must not take it from the workers still using it)."""
    if os.getpid() == owner:
        shutil.rmtree(folder, ignore_errors=True)
        with _sweeps:
            _published_since_sweep.pop(folder, None)


def _remove_orphans(base: str) -> None:
    """Remove the shared folders in ``base`` whose making process no longer runs (it was killed) and that
    have not changed for ORPHAN_AGE seconds (a process of another pid namespace sharing ``base`` may run
    under a pid that is free here)."""
    with contextlib.suppress(OSError), os.scandir(base) as entries:
        for entry in entries:
            if not entry.name.startswith(_FOLDER_PREFIX):
                continue
            owner = entry.name[len(_FOLDER_PREFIX):].partition("-")[0]
            with contextlib.suppress(OSError):
                if owner.isdigit() and not _running(int(owner)) and \
                        time.time() - entry.stat().st_mtime > ORPHAN_AGE:
                    shutil.rmtree(entry.path, ignore_errors=True)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # another user's process: alive
    return True
