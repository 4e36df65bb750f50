"""A cache that processes reading the same objects share through a folder (``storage_options`` key
``shared_cache``): each prefetched range crosses the network once for all of them, a claim whose process
failed or died is fetched by the others, and the folder stays within its byte budget. A remote shard set
makes one for its DataLoader workers and removes it when it is collected, in its own process only."""

from __future__ import annotations

import gc
import multiprocessing
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from arrayio import RemoteFile
from arrayio._remote._shared import SharedRanges

pytestmark = pytest.mark.one_client  # the sharing sits above the client; the forked children choose their own

OBJECT = np.random.default_rng(5).integers(0, 256, 1 << 20, np.uint8).tobytes()
# 16 ranges of 40 KB, 1 KB apart: a gap of 4 KB joins neighbours into one request.
RANGES = [(4096 + number * 41 * 1024, 40 * 1024) for number in range(16)]


@pytest.fixture
def shared_object(http_server, tmp_path, request):
    name = request.node.name.replace("[", "-").replace("]", "")
    url = http_server.put(f"shared/{name}.bin", OBJECT)
    folder = tmp_path / "shared"
    folder.mkdir()
    return url, str(folder)


def _opened(url: str, folder: str, **settings) -> RemoteFile:
    # The size and ETag given, as a shard set's workers know them: no first request to learn them.
    remote = RemoteFile(url, {"shared_cache": folder, "client": "fsspec", **settings}, readahead=1)
    remote.size  # noqa: B018 - opened here, before the counts the test reads
    return remote


def _prefetch_and_read(url: str, folder: str, start, results) -> None:
    try:
        remote = _opened(url, folder)
        start.wait()
        remote.prefetch(RANGES, gap=4096)
        before = remote.stats.requests
        results.put([bytes(remote.read(offset, length)) == OBJECT[offset:offset + length]
                     for offset, length in RANGES] + [remote.stats.requests == before])
    except BaseException as error:  # said to the test, not lost in the child
        results.put([repr(error)])


def test_two_processes_fetch_each_range_once_between_them(shared_object, http_server):
    url, folder = shared_object
    context = multiprocessing.get_context("fork")
    start, results = context.Barrier(2), context.Queue()
    http_server.counts.reset()
    children = [context.Process(target=_prefetch_and_read, args=(url, folder, start, results)) for _ in range(2)]
    for child in children:
        child.start()
    answers = [results.get(timeout=60) for _ in children]
    for child in children:
        child.join(timeout=60)
    assert all(all(answer) for answer in answers), answers  # the right bytes, every read from the cache
    requests, sent = http_server.counts.total()
    span = RANGES[-1][0] + RANGES[-1][1] - RANGES[0][0]
    # Every range crossed the wire once (with the 1 KB gaps inside a request), besides each process's first
    # request (one byte: readahead=1). Each process on its own: twice the ranges.
    assert sum(length for _, length in RANGES) <= sent <= span + 2, sent
    assert requests <= 2 + len(RANGES), requests  # never a range asked twice


def test_ranges_another_process_published_are_read_from_the_folder(shared_object, http_server):
    url, folder = shared_object
    _opened(url, folder).prefetch(RANGES, gap=4096)
    later = _opened(url, folder)
    http_server.counts.reset()
    later.prefetch(RANGES, gap=4096)
    assert [bytes(later.read(offset, length)) for offset, length in RANGES] == [
        OBJECT[offset:offset + length] for offset, length in RANGES]
    assert http_server.counts.total() == (0, 0)


def _claim_and_die(folder: str, identity: str, start: int, stop: int) -> None:
    SharedRanges(folder, identity).claim(start, stop)
    os._exit(0)  # dies holding the claim: its lock goes with it, its .part file stays


def test_a_claim_whose_process_died_is_fetched_by_the_others(shared_object):
    url, folder = shared_object
    remote = _opened(url, folder, read_timeout=20)
    offset, length = RANGES[3]
    child = multiprocessing.get_context("fork").Process(
        target=_claim_and_die, args=(folder, f"{url}\0{remote.size}\0{remote.etag}", offset, offset + length))
    child.start()
    child.join(timeout=30)
    assert any(name.endswith(".part") for name in os.listdir(folder))
    started = time.monotonic()
    remote.prefetch([RANGES[3]])
    assert bytes(remote.read(offset, length)) == OBJECT[offset:offset + length]
    assert time.monotonic() - started < 5  # not the read timeout: a dead claimer holds no lock
    # The dead claim was taken over and the range published: the next reader maps it.
    assert not any(name.endswith(".part") for name in os.listdir(folder))
    later = _opened(url, folder)
    before = later.stats.requests
    later.prefetch([RANGES[3]])
    assert bytes(later.read(offset, length)) == OBJECT[offset:offset + length] and later.stats.requests == before


def test_a_claim_whose_fetch_failed_is_fetched_by_the_one_waiting(shared_object):
    url, folder = shared_object
    failing, waiting = _opened(url, folder), _opened(url, folder)
    claimed = threading.Event()

    def refuse(start: int, stop: int, head: bytes = b"") -> bytes:
        claimed.set()
        time.sleep(0.3)  # the other one is waiting on the claim by now
        raise OSError("connection reset (on purpose)")

    failing._request = refuse  # type: ignore[method-assign]
    errors: list[BaseException] = []

    def fail() -> None:
        try:
            failing.prefetch(RANGES[:4], gap=4096)
        except OSError as error:
            errors.append(error)

    thread = threading.Thread(target=fail)
    thread.start()
    assert claimed.wait(10)
    started = time.monotonic()
    waiting.prefetch(RANGES[:4], gap=4096)
    thread.join(timeout=10)
    assert [str(error) for error in errors] == ["connection reset (on purpose)"]
    assert [bytes(waiting.read(offset, length)) for offset, length in RANGES[:4]] == [
        OBJECT[offset:offset + length] for offset, length in RANGES[:4]]
    assert time.monotonic() - started < 5
    assert not any(name.endswith(".part") for name in os.listdir(folder))  # the failed claims were given up


def test_the_folder_stays_within_its_budget(shared_object):
    url, folder = shared_object
    budget = 200_000
    remote = _opened(url, folder, shared_cache_bytes=budget)
    for offset, length in RANGES:  # 640 KB published, one range at a time
        remote.prefetch([(offset, length)])
        held = sum(os.path.getsize(os.path.join(folder, name)) for name in os.listdir(folder))
        assert held <= budget + length, held
    assert held <= budget
    assert [bytes(remote.read(offset, length)) for offset, length in RANGES] == [
        OBJECT[offset:offset + length] for offset, length in RANGES]


@pytest.mark.parametrize("options, named", [({"shared_cache": "/no/such/folder"}, "shared_cache"),
                                            ({"shared_cache_bytes": 0}, "shared_cache_bytes")])
def test_bad_shared_cache_options_are_refused_by_name(http_server, options, named):
    url = http_server.put("shared/refused.bin", b"x" * 100)
    with pytest.raises(ValueError, match=named):
        RemoteFile(url, options)


# --------------------------------------------------------------------------- a shard set's folder

@pytest.fixture
def shard_urls(http_server, tmp_path):
    from arrayio import kdb

    urls = []
    for shard in range(2):
        path = tmp_path / f"part-{shard}.kdb"
        with kdb.Writer(path) as writer:
            writer.add_episode(np.zeros((5, 3), np.float32), np.zeros((5, 2), np.float32))
        urls.append(http_server.put(f"shared-set/{tmp_path.name}/{path.name}", path.read_bytes()))
    return urls


def test_a_remote_shard_set_removes_its_folder_when_collected_in_its_own_process_only(shard_urls):
    from arrayio.robot._shards import ShardSet

    shards = ShardSet(shard_urls)
    folder = shards.shared_cache
    assert folder is not None and os.path.isdir(folder)
    pid = os.fork()
    if pid == 0:  # a forked copy collected: the folder stays for the process that made it
        del shards
        gc.collect()
        os._exit(0)
    os.waitpid(pid, 0)
    assert os.path.isdir(folder)
    del shards
    gc.collect()
    assert not os.path.exists(folder)


def test_folders_of_processes_that_no_longer_run_are_removed(shard_urls):
    from arrayio.robot._shards import ShardSet

    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                           text=True, check=True)
    first = ShardSet(shard_urls)
    base = os.path.dirname(first.shared_cache)
    orphan = os.path.join(base, f"arrayio-shared-{int(ended.stdout)}-leftover")
    os.makedirs(orphan)
    try:
        ShardSet(shard_urls)
        assert os.path.isdir(orphan)  # changed a moment ago: maybe a process of another pid namespace
        os.utime(orphan, (time.time() - 3600, time.time() - 3600))
        second = ShardSet(shard_urls)
        assert not os.path.exists(orphan) and os.path.isdir(first.shared_cache)
        assert ShardSet(shard_urls[0]).shared_cache != second.shared_cache
    finally:
        if os.path.isdir(orphan):
            os.rmdir(orphan)


def test_a_local_shard_set_has_no_folder(tmp_path):
    from arrayio import kdb
    from arrayio.robot._shards import ShardSet

    path = tmp_path / "local.kdb"
    with kdb.Writer(path) as writer:
        writer.add_episode(np.zeros((5, 3), np.float32), np.zeros((5, 2), np.float32))
    assert ShardSet(path).shared_cache is None


def test_a_given_etag_is_checked_where_both_clients_report_it_alike(http_server):
    from arrayio import ObjectChangedError

    url = http_server.put("shared/versioned.bin", OBJECT)
    with pytest.raises(ObjectChangedError, match="versioned.bin.*ETag"):  # HTTP: both read the ETag header
        RemoteFile(url, {"client": "fsspec"}, size=len(OBJECT), etag='"another"', etag_client="obstore").read(0, 10)
    for client in ("fsspec", None):  # the same client, or none named: the ETag is taken as given
        with pytest.raises(ObjectChangedError, match="ETag"):
            RemoteFile(url, {"client": "fsspec"}, size=len(OBJECT), etag='"another"', etag_client=client).read(0, 10)


def test_an_etag_another_client_reports_in_another_form_is_not_kept():
    import fsspec

    fsspec.filesystem("memory").pipe("/shared/versioned.bin", OBJECT)
    remote = RemoteFile("memory://shared/versioned.bin", size=len(OBJECT), etag="a generation number",
                        etag_client="obstore")
    assert remote.etag is None and bytes(remote.read(0, 10)) == OBJECT[:10]


def _episodes_once_the_folder_is_gone(shards) -> list[int]:
    import shutil

    shutil.rmtree(shards.shared_cache)
    return [len(shards.file(shard)) for shard in range(len(shards.sources))]


def test_a_worker_whose_folder_is_gone_reads_on_without_it(shard_urls):
    from arrayio.robot._shards import ShardSet

    shards = ShardSet(shard_urls)
    context = multiprocessing.get_context("fork")
    with context.Pool(1) as pool:
        assert pool.apply(_episodes_once_the_folder_is_gone, (shards,)) == [1, 1]


def test_opened_with_a_size_only_the_first_answer_s_etag_is_checked_from_then_on(http_server):
    from arrayio import ObjectChangedError

    url = http_server.put("shared/size-only.bin", OBJECT)
    remote = RemoteFile(url, {"client": "fsspec"}, size=len(OBJECT), readahead=1)
    assert remote.etag is None
    assert bytes(remote.read(0, 10)) == OBJECT[:10] and remote.etag is not None
    http_server.put("shared/size-only.bin", OBJECT[::-1])  # the same size, another ETag
    with pytest.raises(ObjectChangedError, match="size-only.bin.*ETag"):
        remote.read(1 << 19, 10)
