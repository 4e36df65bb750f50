"""Several stores in one stream: files, fds, BytesIO, read-only file-likes, pipes, FIFOs, sockets."""

from __future__ import annotations

import io
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

import arrayio.kastore as kastore
from kastore_cases import all_types, assert_same

SRC = Path(__file__).resolve().parents[2] / "src"


def stores(count: int, size: int = 10) -> list[dict[str, np.ndarray]]:
    return [{"index": np.array([index], dtype=np.int32), "data": np.arange(size, dtype=np.float64) + index,
             f"key_{index}": np.arange(index % 7, dtype=np.uint8)} for index in range(count)]


def check_store(store, expected) -> None:
    assert_same({key: np.array(store[key]) for key in store}, expected)


# --------------------------------------------------------------------------- file objects and fds

@pytest.mark.parametrize("read_all", [False, True])
def test_file_object_many_stores_and_positions(tmp_path, read_all):
    path = tmp_path / "many.kas"
    expected = stores(10)
    ends = []
    with open(path, "wb") as handle:
        for data in expected:
            kastore.dump(data, handle)
            ends.append(handle.tell())
    assert ends == list(np.cumsum([len(kastore.dumps(data)) for data in expected]))
    with open(path, "rb") as handle:
        for data, end in zip(expected, ends):
            with kastore.load(handle, read_all=read_all) as store:
                assert handle.tell() == end
                check_store(store, data)
        with pytest.raises(EOFError):
            kastore.load(handle, read_all=read_all)


@pytest.mark.parametrize("read_all", [False, True])
def test_raw_fd_many_big_stores(tmp_path, read_all):
    path = tmp_path / "fd.kas"
    expected = [{"a": np.arange(200_000, dtype=np.int64) * index, "b": np.full(3, index, dtype=np.int8)}
                for index in range(15)]
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for data in expected:
            kastore.dump(data, fd)
        size = os.lseek(fd, 0, os.SEEK_CUR)
    finally:
        os.close(fd)
    assert size == os.path.getsize(path) == 15 * len(kastore.dumps(expected[0]))
    fd = os.open(path, os.O_RDONLY)
    try:
        position = 0
        for data in expected:
            store = kastore.load(fd, read_all=read_all)
            position += store.file_size
            assert os.lseek(fd, 0, os.SEEK_CUR) == position
            check_store(store, data)
            store.close()
        with pytest.raises(EOFError):
            kastore.load(fd, read_all=read_all)
    finally:
        os.close(fd)


@pytest.mark.parametrize("read_all", [False, True])
def test_read_plus_write_file(tmp_path, read_all):
    path = tmp_path / "rw.kas"
    path.write_bytes(b"")
    expected = stores(12, size=1000)
    with open(path, "r+b") as handle:
        for data in expected:
            kastore.dump(data, handle)
        handle.seek(0)
        for data in expected:
            with kastore.load(handle, read_all=read_all) as store:
                check_store(store, data)
        with pytest.raises(EOFError):
            kastore.load(handle, read_all=read_all)
        # Append after reading, then read the new store from where we are.
        kastore.dump(expected[0], handle)
        handle.seek(-len(kastore.dumps(expected[0])), os.SEEK_END)
        with kastore.load(handle, read_all=read_all) as store:
            check_store(store, expected[0])


def test_mixed_lazy_and_read_all_on_one_file(tmp_path):
    path = tmp_path / "mixed.kas"
    expected = stores(6)
    with open(path, "wb") as handle:
        for data in expected:
            kastore.dump(data, handle)
    with open(path, "rb") as handle:
        for index, data in enumerate(expected):
            with kastore.load(handle, read_all=bool(index % 2)) as store:
                check_store(store, data)


def test_dump_to_fd_keeps_it_open(tmp_path):
    fd = os.open(tmp_path / "x.kas", os.O_WRONLY | os.O_CREAT, 0o644)
    kastore.dump({"a": np.arange(3)}, fd)
    os.write(fd, b"")  # still open
    os.close(fd)


def test_stream_of_the_standard_files(testdata):
    raw = b"".join((testdata / "kastore" / "v1" / f"all_types_{n}_elements.kas").read_bytes() for n in range(10))
    buffer = io.BytesIO(raw)
    for n in range(10):
        with kastore.load(buffer, read_all=True) as store:
            check_store(store, all_types(n))
    with pytest.raises(EOFError):
        kastore.load(buffer, read_all=True)


# --------------------------------------------------------------------------- in-memory streams

@pytest.mark.parametrize("read_all", [False, True])
def test_bytesio_ten_stores(read_all):
    buffer = io.BytesIO()
    expected = stores(10)
    for data in expected:
        kastore.dump(data, buffer)
    buffer.seek(0)
    for data in expected:
        with kastore.load(buffer, read_all=read_all) as store:
            check_store(store, data)
    with pytest.raises(EOFError):
        kastore.load(buffer, read_all=read_all)


def test_loads_reads_only_the_first_store():
    raw = kastore.dumps({"first": np.arange(2)}) + kastore.dumps({"second": np.arange(3)})
    with kastore.loads(raw) as store:
        assert list(store) == ["first"]


class ReadOnlyStream:
    """A non-seekable reader with nothing but ``read`` (no write, seek, fileno, readinto)."""

    def __init__(self, data: bytes, chunk: int = 7):
        self._data = data
        self._position = 0
        self._chunk = chunk

    def read(self, size: int = -1) -> bytes:
        size = min(size if size >= 0 else len(self._data), self._chunk)
        out = self._data[self._position:self._position + size]
        self._position += len(out)
        return out


@pytest.mark.parametrize("read_all", [False, True])
def test_read_only_file_like(read_all):
    expected = stores(3) + [all_types(4)]
    stream = ReadOnlyStream(b"".join(kastore.dumps(data) for data in expected))
    assert not hasattr(stream, "write")
    for data in expected:
        with kastore.load(stream, read_all=read_all) as store:
            check_store(store, data)
    with pytest.raises(EOFError):
        kastore.load(stream, read_all=read_all)


def test_read_only_file_like_truncated():
    raw = kastore.dumps(all_types(4))
    with pytest.raises(kastore.FileFormatError):
        kastore.load(ReadOnlyStream(raw[:-1]), read_all=True)
    with pytest.raises(kastore.FileFormatError):
        kastore.load(ReadOnlyStream(raw[:10]), read_all=True)


# --------------------------------------------------------------------------- pipes, FIFOs, sockets

WRITER = """
import os, sys
import numpy as np
import arrayio.kastore as kastore
target, count, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
if mode == "fd":
    fd = os.open(target, os.O_WRONLY)
    for index in range(count):
        kastore.dump({"index": np.array([index], dtype=np.int32), "data": np.arange(1000, dtype=np.float64) + index},
                     fd)
    os.close(fd)
else:
    with open(target, "wb") as handle:
        for index in range(count):
            kastore.dump({"index": np.array([index], dtype=np.int32),
                          "data": np.arange(1000, dtype=np.float64) + index}, handle)
"""


def _start_writer(fifo: Path, count: int, mode: str) -> subprocess.Popen:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return subprocess.Popen([sys.executable, "-c", WRITER, str(fifo), str(count), mode], env=env)


@pytest.mark.parametrize(("count", "writer_mode", "reader_mode"), [
    (100, "fd", "fd"), (100, "file", "file"), (100, "fd", "fd-lazy"), (1, "file", "fd")])
def test_fifo_between_processes(tmp_path, count, writer_mode, reader_mode):
    fifo = tmp_path / "stream.fifo"
    os.mkfifo(fifo)
    writer = _start_writer(fifo, count, writer_mode)
    received = []
    try:
        if reader_mode == "file":
            with open(fifo, "rb") as handle:
                while True:
                    try:
                        store = kastore.load(handle, read_all=True)
                    except EOFError:
                        break
                    received.append(store)
        else:
            fd = os.open(fifo, os.O_RDONLY)
            try:
                while True:
                    try:
                        store = kastore.load(fd, read_all=reader_mode == "fd")
                    except EOFError:
                        break
                    received.append(store)
            finally:
                os.close(fd)
    finally:
        assert writer.wait(timeout=120) == 0
    assert len(received) == count
    for index, store in enumerate(received):
        assert store["index"].tolist() == [index]
        np.testing.assert_array_equal(store["data"], np.arange(1000, dtype=np.float64) + index)


def test_pipe_is_not_over_read():
    read_end, write_end = os.pipe()
    raw = kastore.dumps({"a": np.arange(5, dtype=np.int16)})
    os.write(write_end, raw + b"TAIL")
    os.close(write_end)
    try:
        with kastore.load(read_end, read_all=True) as store:
            assert store["a"].tolist() == list(range(5))
        assert os.read(read_end, 100) == b"TAIL"
    finally:
        os.close(read_end)


def test_pipe_truncated_store_is_a_format_error():
    read_end, write_end = os.pipe()
    os.write(write_end, kastore.dumps(all_types(3))[:-5])
    os.close(write_end)
    try:
        with pytest.raises(kastore.FileFormatError) as caught:
            kastore.load(read_end, read_all=True)
        assert "at byte" in str(caught.value)
    finally:
        os.close(read_end)


def _feed(dump_target, payloads):
    for data in payloads:
        kastore.dump(data, dump_target)


def _serve_through(sender, payloads, use_fd):
    def run():
        try:
            if use_fd:
                _feed(sender.fileno(), payloads)
            else:
                with sender.makefile("wb") as stream:
                    _feed(stream, payloads)
        finally:
            sender.shutdown(socket.SHUT_WR)
            sender.close()
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def _receive(receiver, use_fd):
    received = []
    with receiver:
        source = receiver.fileno() if use_fd else receiver.makefile("rb")
        while True:
            try:
                received.append(kastore.load(source, read_all=True))
            except EOFError:
                break
        if not use_fd:
            source.close()
    return received


@pytest.mark.parametrize("count", [1, 2, 10])
@pytest.mark.parametrize("use_fd", [False, True], ids=["makefile", "fd"])
def test_socketpair(count, use_fd):
    sender, receiver = socket.socketpair()
    payloads = stores(count, size=50_000)
    thread = _serve_through(sender, payloads, use_fd)
    received = _receive(receiver, use_fd)
    thread.join(timeout=60)
    assert len(received) == count
    for store, data in zip(received, payloads):
        check_store(store, data)


@pytest.mark.parametrize("use_fd", [False, True], ids=["makefile", "fd"])
def test_tcp_loopback(use_fd):
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    payloads = stores(5, size=100_000)
    client = socket.create_connection(("127.0.0.1", port))
    connection, _ = server.accept()
    server.close()
    thread = _serve_through(client, payloads, use_fd)
    received = _receive(connection, use_fd)
    thread.join(timeout=60)
    assert len(received) == 5
    for store, data in zip(received, payloads):
        check_store(store, data)


def test_64_megabyte_store_through_a_pipe():
    read_end, write_end = os.pipe()
    size = 8 * 2**20  # 64 MiB of float64
    data = {"big": np.arange(size, dtype=np.float64), "small": np.arange(3, dtype=np.int8)}
    errors = []

    def write():
        try:
            kastore.dump(data, write_end)
            kastore.dump({"after": np.arange(2)}, write_end)
        except BaseException as error:  # noqa: BLE001 - reported below
            errors.append(error)
        finally:
            os.close(write_end)

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    try:
        with kastore.load(read_end, read_all=True) as store:
            assert store["big"].size == size
            assert float(store["big"][-1]) == size - 1
            np.testing.assert_array_equal(store["big"][::4096], data["big"][::4096])
        with kastore.load(read_end) as store:
            assert store["after"].tolist() == [0, 1]
        with pytest.raises(EOFError):
            kastore.load(read_end)
    finally:
        thread.join(timeout=120)
        os.close(read_end)
    assert not errors


# --------------------------------------------------------------------------- wrapped file objects

COMPRESSORS = ["gzip", "bz2", "lzma"]


def _compressed(tmp_path, name, payloads):
    module = __import__(name)
    path = tmp_path / f"stores.kas.{name}"
    with module.open(path, "wb") as handle:
        for data in payloads:
            kastore.dump(data, handle)
    return module, path


@pytest.mark.parametrize("name", COMPRESSORS)
def test_compressed_file_object_read_all(tmp_path, name):
    payloads = stores(3)
    module, path = _compressed(tmp_path, name, payloads)
    with module.open(path, "rb") as handle:
        for data in payloads:
            with kastore.load(handle, read_all=True) as store:
                check_store(store, data)
        with pytest.raises(EOFError):
            kastore.load(handle, read_all=True)


@pytest.mark.parametrize("name", COMPRESSORS)
def test_compressed_file_object_lazy(tmp_path, name):
    payloads = stores(3)
    module, path = _compressed(tmp_path, name, payloads)
    with module.open(path, "rb") as handle:
        for data in payloads:
            with kastore.load(handle) as store:
                check_store(store, data)


@pytest.mark.parametrize("read_all", [False, True])
def test_archive_members(tmp_path, read_all):
    import tarfile
    import zipfile

    raw = kastore.dumps(all_types(3))
    tar_path, zip_path = tmp_path / "a.tar", tmp_path / "a.zip"
    with tarfile.open(tar_path, "w") as archive:
        for name, content in (("pad.bin", b"x" * 1000), ("s.kas", raw)):
            member = tarfile.TarInfo(name)
            member.size = len(content)
            archive.addfile(member, io.BytesIO(content))
    with zipfile.ZipFile(zip_path, "w") as archive:
        archive.writestr("s.kas", raw)
    with tarfile.open(tar_path) as archive:
        with kastore.load(archive.extractfile("s.kas"), read_all=read_all) as store:
            check_store(store, all_types(3))
    with zipfile.ZipFile(zip_path) as archive, archive.open("s.kas") as member:
        with kastore.load(member, read_all=read_all) as store:
            check_store(store, all_types(3))


@pytest.mark.parametrize("read_all", [False, True])
def test_error_offset_in_a_later_store_of_a_bytesio(read_all):
    first = kastore.dumps({"a": np.arange(3)})
    second = kastore.dumps({"b": np.arange(3)})
    buffer = io.BytesIO(first + second[:-1])
    kastore.load(buffer, read_all=read_all).close()
    with pytest.raises(kastore.FileFormatError) as caught:
        kastore.load(buffer, read_all=read_all)
    end = len(first) + len(second)
    assert f"the data ends at byte {end - 1}" in str(caught.value), str(caught.value)
    assert len(first) <= caught.value.offset < end


@pytest.mark.parametrize("read_all", [False, True])
def test_error_offset_in_a_later_store_is_absolute(tmp_path, read_all):
    first = kastore.dumps({"a": np.arange(3)})
    second = bytearray(kastore.dumps({"b": np.arange(3)}))
    second[64] = 20  # type code of the second store's item 0
    path = tmp_path / "two.kas"
    path.write_bytes(first + bytes(second))
    with open(path, "rb") as handle:
        kastore.load(handle, read_all=read_all).close()
        with pytest.raises(kastore.FileFormatError) as caught:
            kastore.load(handle, read_all=read_all)
    assert f"at byte {len(first) + 64}" in str(caught.value)


def _fifo_with_writer(tmp_path, payloads):
    fifo = tmp_path / "by_path.fifo"
    os.mkfifo(fifo)
    outcome = []

    def write():
        try:
            with open(fifo, "wb") as handle:
                for data in payloads:
                    kastore.dump(data, handle)
        except BrokenPipeError as error:
            outcome.append(error)

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    return fifo, thread, outcome


def test_load_a_fifo_path_read_all(tmp_path):
    payloads = stores(1)
    fifo, thread, _ = _fifo_with_writer(tmp_path, payloads)
    with kastore.load(fifo, read_all=True) as store:
        check_store(store, payloads[0])
    thread.join(timeout=30)


def test_load_a_fifo_path_lazy(tmp_path):
    payloads = stores(1)
    fifo, thread, _ = _fifo_with_writer(tmp_path, payloads)
    try:
        with kastore.load(fifo) as store:
            check_store(store, payloads[0])
    finally:
        thread.join(timeout=30)
