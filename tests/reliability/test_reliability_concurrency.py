"""Concurrency: open readers keep the old contents, racing writers leave one whole file, updaters take turns."""

from __future__ import annotations

import numpy as np
import pytest
import reliability_workers as workers
from reliability_kills import context
from reliability_writers import BY_NAME, KEYED_OLD

import arrayio
from arrayio import _binary, bloscpack, kastore, kdb, pycauset


def run_children(*calls):
    """Start one fork-server child per (function, args); wait until each says it started."""
    ctx = context()
    children = []
    for function, *args in calls:
        receive, send = ctx.Pipe(duplex=False)
        process = ctx.Process(target=function, args=(*args, send))
        process.start()
        send.close()
        children.append((process, receive))
    for _, receive in children:
        receive.recv()
    return children


def join(children, timeout=120):
    for process, _ in children:
        process.join(timeout)
        assert process.exitcode == 0, f"child exit code {process.exitcode}"


def read_everything(name, reader):
    """Every value the open reader holds, read now."""
    if name == "kastore dump":
        return {key: np.array(reader[key]) for key in reader}
    if name.startswith("bloscpack"):
        return reader.read().tobytes(), reader.metadata
    if name == "kdb Writer":
        return [(episode.actions.tobytes(), episode.states.tobytes()) for episode in reader]
    return np.array(reader.array), reader.properties


OPENERS = {
    "kastore dump": kastore.load,
    "bloscpack append": bloscpack.open,
    "bloscpack rewrite_metadata": bloscpack.open,
    "kdb Writer": kdb.open,
    "pycauset save": pycauset.load,
}


@pytest.mark.parametrize("name", sorted(OPENERS))
def test_open_reader_keeps_old_contents_while_replaced(name, tmp_path):
    case = BY_NAME[name]
    target = tmp_path / case.target
    case.prepare(target, tmp_path)
    reader = OPENERS[name](target)
    try:
        before = read_everything(name, reader)
        process = context().Process(target=workers.replace_with, args=(name, str(target), str(tmp_path)))
        process.start()
        process.join(60)
        assert process.exitcode == 0
        assert target.read_bytes() != b"" and arrayio.validate(target) == []
        after = read_everything(name, reader)
    finally:
        reader.close()
    assert repr(after) == repr(before)  # the open reader still sees the old file
    with OPENERS[name](target) as fresh:
        assert repr(read_everything(name, fresh)) != repr(before)  # a new open sees the new one


def test_reader_keeps_kastore_arrays_across_replacement(tmp_path):
    target = tmp_path / "k.kas"
    kastore.dump(KEYED_OLD, target)
    with kastore.load(target) as store:
        kastore.dump({"a": np.zeros(5)}, target)
        assert np.array_equal(store["a"], KEYED_OLD["a"]) and np.array_equal(store["b"], KEYED_OLD["b"])


@pytest.mark.parametrize("kind", ["kastore", "bloscpack"])
def test_two_writers_leave_one_whole_file(kind, tmp_path):
    target = tmp_path / ("race.kas" if kind == "kastore" else "race.blp")
    function = workers.dump_repeatedly if kind == "kastore" else workers.pack_repeatedly
    children = run_children((function, str(target), 0, 15), (function, str(target), 1, 15))
    seen = set()
    while any(process.is_alive() for process, _ in children):
        if target.exists():
            seen.add(whose(kind, target))
    join(children)
    seen.add(whose(kind, target))
    assert seen <= {0, 1} and seen, seen
    assert arrayio.validate(target) == []


def whose(kind, target):
    """Which writer's complete content the target holds now (AssertionError for a mix)."""
    if kind == "kastore":
        with kastore.load(target) as store:
            who = np.array(store["who"])
            writer = int(who[0])
            assert np.array_equal(who, workers.kastore_content(writer)["who"])
            assert np.array_equal(store["n"], workers.kastore_content(writer)["n"])
            return writer
    data = bloscpack.unpack_bytes_from_file(target)[0]
    writer = data[0] - 1
    assert data == bytes([writer + 1]) * 300_000
    return writer


INITIAL = 4096  # one whole chunk: appends top up nothing, then fill new 4096-byte chunks


def packed_for_appends(target):
    bloscpack.pack_bytes_to_file(b"\0" * INITIAL, target, chunk_size=4096, metadata={"counter": 0},
                                 bloscpack_args={"max_app_chunks": 64})


def pieces_in(data):
    """The appended pieces in order, as (writer, index)."""
    tail = data[INITIAL:]
    assert len(tail) % workers.PIECE == 0
    found = []
    for start in range(0, len(tail), workers.PIECE):
        chunk = tail[start:start + workers.PIECE]
        assert chunk == chunk[:1] * workers.PIECE, "a piece was torn"
        found.append(divmod(chunk[0] - 1, 16))
    return found


def test_two_appenders_take_turns(tmp_path):
    target = tmp_path / "a.blp"
    packed_for_appends(target)
    children = run_children((workers.append_pieces, str(target), str(tmp_path), 0, 8),
                           (workers.append_pieces, str(target), str(tmp_path), 1, 8))
    join(children)
    found = pieces_in(bloscpack.unpack_bytes_from_file(target)[0])
    assert sorted(found) == [(writer, index) for writer in (0, 1) for index in range(8)]
    for writer in (0, 1):
        assert [index for who, index in found if who == writer] == list(range(8))
    assert arrayio.validate(target) == []


def test_append_and_rewrite_metadata_lose_nothing(tmp_path):
    target = tmp_path / "m.blp"
    packed_for_appends(target)
    children = run_children((workers.append_pieces, str(target), str(tmp_path), 0, 8),
                            (workers.rewrite_counter, str(target), 8))
    join(children)
    data, metadata = bloscpack.unpack_bytes_from_file(target)
    assert pieces_in(data) == [(0, index) for index in range(8)]
    assert metadata == {"counter": 8}
    assert arrayio.validate(target) == []


def test_pycauset_updaters_take_turns(tmp_path):
    target = tmp_path / "p.pycauset"
    pycauset.save(np.eye(3), target, properties={})
    children = run_children((workers.update_properties, str(target), "a", 20),
                            (workers.update_properties, str(target), "b", 20))
    join(children)
    container = pycauset.load(target)
    assert container.properties == {"a": 19, "b": 19} and container.generation == 41


def test_second_updater_waits_for_the_lock(tmp_path):
    target = tmp_path / "w.blp"
    packed_for_appends(target)
    source = tmp_path / "piece"
    source.write_bytes(workers.piece(0, 0))
    before = target.read_bytes()
    ctx = context()
    receive, send = ctx.Pipe(duplex=False)
    with _binary.locked(target):
        process = ctx.Process(target=workers.append_one, args=(str(target), str(source), send))
        process.start()
        send.close()
        assert not receive.poll(1.0), "the append did not wait for the lock"
        assert target.read_bytes() == before and process.is_alive()
    assert receive.poll(60) and receive.recv() is True
    process.join(60)
    assert process.exitcode == 0
    assert pieces_in(bloscpack.unpack_bytes_from_file(target)[0]) == [(0, 0)]
