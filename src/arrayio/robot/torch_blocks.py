"""The shared-memory blocks DataLoader workers decode batch images into, reused once the main process lets go.

A fresh block costs its page faults on every batch (shared memory takes ~3 us a page here: 0.45 ms per
224x224 float image, three times its JPEG decode); a block handed back is already mapped. A worker keeps up
to eight blocks, each with a flag in its last bytes. The main process maps a block once,
the first time it comes (its file descriptor travels then, and only then), and keeps that map. Every batch
made in the block after that travels as the block's token, its shape and strides: a file descriptor costs
both processes about 0.35 ms of CPU each (a connection to the worker's resource sharer, a handshake, a
descriptor passed), two a batch (the block and its flag) a seventh of a 224x224 JPEG batch's work. The
main process's pages of a kept map stay mapped from batch to batch, so reading the images faults no pages.

The main process hands out each batch on a new storage over the kept map and watches that storage: once it
dies (every tensor, view and array made from it is gone) the flag says so, and the worker decodes into the
block again. A block another process may read (sent through a multiprocessing queue or pipe, or alive
when this process forks) never goes back.
"""

from __future__ import annotations

import mmap
import os
import secrets
import threading
import weakref
from multiprocessing.reduction import DupFd
from typing import Any

import numpy as np
import torch

from .._binary import round_up
from ..errors import UnsupportedError

_TAKEN, _RELEASED, _GONE = 0, 1, 2
FLAG_BYTES = 64  # after a block's data: its flag (an int32), on a cache line of its own


class SharedBlocks:
    """A DataLoader worker's kept shared-memory blocks ([storage, flag (a numpy view), token, whether the main
    process has mapped it]), by data address."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._kept: dict[int, list[Any]] = {}

    def free(self, nbytes: int) -> torch.UntypedStorage | None:
        """A kept block for ``nbytes`` of data that the main process has let go of, marked taken; None if none
        is. Blocks that another process may read are dropped (they never come back)."""
        for address, (block, flag, _token, _mapped) in list(self._kept.items()):
            state = int(flag[0])
            if state == _GONE:
                del self._kept[address]
            elif block.nbytes() == flag_at(nbytes) + FLAG_BYTES and state == _RELEASED:
                flag[0] = _TAKEN
                return block
        return None

    def new(self, nbytes: int) -> torch.UntypedStorage:
        """A new shared block for ``nbytes`` of data, kept (taken) to hand out again while fewer than
        ``limit`` are kept; past that, a plain shared block that travels as torch sends any."""
        if len(self._kept) >= self.limit:
            return torch.UntypedStorage._new_shared(nbytes)
        # By descriptor whatever torch's sharing strategy: the main process maps it from one.
        block = torch.UntypedStorage._new_using_fd_cpu(flag_at(nbytes) + FLAG_BYTES)
        # A numpy view: read and set without torch's dispatcher (0.1 against 1-2 us), every batch.
        flag = torch.empty(0, dtype=torch.int32).set_(block)[flag_at(nbytes) // 4:][:1].numpy()
        flag[0] = _TAKEN
        self._kept[block.data_ptr()] = [block, flag, secrets.randbits(63), False]
        return block

    def lent(self, tensor: torch.Tensor) -> list[Any] | None:
        """The kept block ``tensor`` lies in (None for any other tensor)."""
        return self._kept.get(tensor.untyped_storage().data_ptr())


def flag_at(nbytes: int) -> int:
    """Where the flag of a block for ``nbytes`` of data lies: after them, on a cache line of its own."""
    return round_up(nbytes, FLAG_BYTES)


shared_blocks = SharedBlocks(limit=8)


def lease(tensor: torch.Tensor) -> torch.Tensor:
    """``tensor`` (of a block from :meth:`SharedBlocks.new`) as it travels to the main process: the block's
    token (and, the first time, its descriptor). Other tensors as they are."""
    kept = shared_blocks.lent(tensor) if torch.utils.data.get_worker_info() is not None else None
    if kept is None:
        return tensor
    leased = tensor.as_subclass(_LeasedTensor)
    leased.kept = kept
    return leased


class _LeasedTensor(torch.Tensor):
    """A worker's batch tensor on its way to the main process (pickled as its block's token and layout)."""

    kept: list[Any]
    # What is computed from it is a plain tensor (no subclass dispatch).
    __torch_function__ = torch._C._disabled_torch_function_impl  # type: ignore[assignment]

    def __reduce_ex__(self, protocol: Any) -> tuple:
        block, _flag, token, mapped = self.kept
        descriptor = None
        if not mapped:  # the first time: the main process maps the block and keeps the map
            fd, size = block._share_fd_cpu_()
            descriptor = (DupFd(fd), size)
            self.kept[3] = True
        return _watched, (token, os.getpid(), descriptor, block.nbytes() - FLAG_BYTES,
                          str(self.dtype).removeprefix("torch."), tuple(self.shape), self.stride(),
                          self.storage_offset())


# In the main process: each worker block's map, by token, with the worker's process id.
_maps: dict[int, tuple[int, mmap.mmap]] = {}


def _watched(token: int, pid: int, descriptor: tuple[Any, int] | None, flag: int, dtype: str,
             shape: tuple[int, ...], strides: tuple[int, ...], offset: int) -> torch.Tensor:
    """(In the main process) the batch tensor of block ``token``, on a new storage over this process's map of
    it; the block goes back to its worker when that storage dies."""
    _guard_other_processes()
    if descriptor is not None:
        fd = descriptor[0].detach()
        try:
            mapped = mmap.mmap(fd, descriptor[1])
        finally:
            os.close(fd)
        _forget_maps_of_ended_workers()
        _maps[token] = (pid, mapped)
    kept = _maps.get(token)
    if kept is None:
        raise UnsupportedError(f"kdb: a DataLoader worker (process {pid}) sent a batch in a shared block this "
                           "process never mapped: its batches must all be read by the one process")
    storage = torch.frombuffer(kept[1], dtype=torch.uint8, count=flag).untyped_storage()
    tensor = torch.empty(0, dtype=getattr(torch, dtype)).set_(storage, offset, shape, strides)
    released = np.frombuffer(kept[1], np.int32, count=1, offset=flag)  # the map's, not the storage's
    address = storage.data_ptr()
    _returning[address] = (weakref.finalize(storage, _release, released, address), released, token)
    return tensor


def _forget_maps_of_ended_workers() -> None:
    """Drop the maps of blocks whose worker has ended (a batch still held keeps its own map alive)."""
    for token, (pid, _mapped) in list(_maps.items()):
        if _ended(pid):
            del _maps[token]


def _ended(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive: another user's process has that id now
        return False
    return False


def _release(flag: np.ndarray, address: int) -> None:
    _returning.pop(address, None)
    flag[0] = _RELEASED


# The blocks that go back to their worker once their storage dies here, by address. Another process that
# gets one (sent through a multiprocessing queue or pipe, or forked while it is alive) maps the same shared
# memory, which this process cannot watch: such a block never goes back.
_returning: dict[int, tuple[weakref.finalize, np.ndarray, int]] = {}
_guarded = threading.Lock()
_guards_in = False


def _keep_for_good(address: int) -> None:
    kept = _returning.pop(address, None)
    if kept is not None:
        kept[0].detach()
        kept[1][0] = _GONE
        _maps.pop(kept[2], None)  # its worker drops the block: the map goes with the last tensor on it


def _keep_all_for_good() -> None:
    for address in list(_returning):
        _keep_for_good(address)


def _guard_other_processes() -> None:
    """Once per process: wrap torch's multiprocessing reducers of tensors and storages, and hook fork, so that
    a block another process may read is never handed back to its worker."""
    global _guards_in  # noqa: PLW0603
    if _guards_in:
        return
    with _guarded:
        if _guards_in:
            return
        from multiprocessing.reduction import ForkingPickler

        import torch.multiprocessing  # noqa: F401 - registers torch's reducers, wrapped here

        reducers = ForkingPickler._extra_reducers  # type: ignore[attr-defined]
        for kind, address_of in ((torch.Tensor, _tensor_address), (torch.nn.Parameter, _tensor_address),
                                 (torch.UntypedStorage, lambda storage: storage.data_ptr()),
                                 (torch.TypedStorage, lambda storage: storage._untyped_storage.data_ptr())):
            if kind in reducers:
                ForkingPickler.register(kind, _sending(reducers[kind], address_of))
        os.register_at_fork(before=_keep_all_for_good, after_in_child=_maps.clear)
        _guards_in = True


def _tensor_address(tensor: torch.Tensor) -> int:
    return tensor.untyped_storage().data_ptr()


def _sending(reduce: Any, address_of: Any) -> Any:
    def reduce_kept(value: Any) -> Any:
        if _returning:
            _keep_for_good(address_of(value))
        return reduce(value)
    return reduce_kept
