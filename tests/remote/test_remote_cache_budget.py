"""Where the ``remote_cache_bytes`` budget is set, every remote object's cache of one process holds, with all
the others, at most that. Before, each kept up to its own 32 MiB whatever the user set, so a process reading
many remote files (a DataLoader worker over hundreds of shards) could keep 32 MiB of each."""

from __future__ import annotations

import gc

import numpy as np

import arrayio
from arrayio import limits
from arrayio._remote._cache import _BUDGET

MIB = 1 << 20


def test_many_remote_files_hold_the_budget_together(http_server):
    rng = np.random.default_rng(5)
    blobs = [rng.bytes(MIB) for _ in range(8)]
    urls = [http_server.put(f"budget/{number}.bin", blob) for number, blob in enumerate(blobs)]
    with limits.raised(remote_cache_bytes=3 * MIB):
        remotes = [arrayio.RemoteFile(url) for url in urls]
        for remote, blob in zip(remotes, blobs):
            assert bytes(remote.read(0, MIB)) == blob
        assert sum(remote._cache.held for remote in remotes) <= 3 * MIB  # before: 8 MiB
        assert _BUDGET.held <= 3 * MIB
        assert remotes[-1]._cache.held == MIB  # the latest read is kept, the oldest ones dropped
        http_server.counts.reset()
        assert bytes(remotes[0].read(0, MIB)) == blobs[0]  # dropped for the others: fetched again
        assert http_server.counts.total()[0] == 1


def test_a_collected_remote_file_stops_counting(http_server):
    url = http_server.put("budget/collected.bin", bytes(range(256)) * 4096)
    gc.collect()
    before = _BUDGET.held
    remote = arrayio.RemoteFile(url)
    remote.read(0, 1 << 20)
    assert _BUDGET.held == before + (1 << 20)
    del remote
    gc.collect()
    assert _BUDGET.held == before


def test_a_released_remote_file_stops_counting(http_server):
    url = http_server.put("budget/released.bin", bytes(1 << 20))
    remote = arrayio.RemoteFile(url)
    remote.read(0, 1 << 20)
    before = _BUDGET.held
    remote.release()
    assert _BUDGET.held == before - (1 << 20) and remote._cache.held == 0


def test_the_budget_is_off_unless_set():
    assert limits.get("remote_cache_bytes") == limits.NO_BUDGET  # random reads thrash under a small one


def test_a_prefetch_window_fits_the_budget(http_server):
    url = http_server.put("budget/window.bin", bytes(4 << 20))
    with limits.raised(remote_cache_bytes=1 << 20):
        remote = arrayio.RemoteFile(url)
        remote.prefetch([(0, 4 << 20)])
        assert 0 < remote._cache.held <= 1 << 20  # half the budget a window: what it fetched is kept
