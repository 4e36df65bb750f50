"""Real servers on loopback for the remote tests: an HTTP server with byte ranges that counts what it
serves, moto's S3 server wrapped in a WSGI layer that does the same, the gcp-storage-emulator's GCS JSON API
behind a counting request handler, and Azurite (a Node.js program) started as a subprocess where it is
installed, behind a counting relay."""

from __future__ import annotations

import base64
import datetime
import email.utils
import hashlib
import http.client
import os
import queue
import re
import shutil
import socket
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote

from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    create_backend_app,
)
from moto.server import ThreadedMotoServer
from werkzeug.serving import WSGIRequestHandler, make_server

_RANGE = re.compile(r"bytes=(\d*)-(\d*)$")
_RANGES = re.compile(r"bytes=(\d*-\d*(?:\s*,\s*\d*-\d*)+)$")
_BOUNDARY = "arrayio-test-boundary"
_PACED_BLOCK = 1 << 20


class Counts:
    """Requests received and body bytes sent, per path, as the server itself saw them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.requests: dict[str, int] = {}
        self.bytes: dict[str, int] = {}

    def add(self, path: str, sent: int) -> None:
        with self._lock:
            self.requests[path] = self.requests.get(path, 0) + 1
            self.bytes[path] = self.bytes.get(path, 0) + sent

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()
            self.bytes.clear()

    def total(self) -> tuple[int, int]:
        """(requests, bytes) over every path."""
        with self._lock:
            return sum(self.requests.values()), sum(self.bytes.values())


class QuietHandler(BaseHTTPRequestHandler):
    """HTTP/1.1 with keep-alive, TCP_NODELAY and no request log: the base of every test server's handler."""

    protocol_version = "HTTP/1.1"
    # Headers and body go out in two writes: without TCP_NODELAY, Nagle and delayed ACKs
    # hold every small response for ~40 ms (real servers set it too).
    disable_nagle_algorithm = True

    def log_message(self, *args: object) -> None:
        pass


class _Listener(ThreadingHTTPServer):
    # A backlog of 5 (the default) drops the SYNs of a burst of concurrent connections: each then waits
    # out a 1 s retransmission.
    request_queue_size = 128


class LoopbackServer:
    """A threading HTTP server of one handler class on 127.0.0.1 and a free port, run on a daemon thread."""

    def _serve(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self.httpd = _Listener(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                       daemon=True)

    @property
    def url(self) -> str:
        """http://127.0.0.1:PORT"""
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    endpoint = url

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=10)


class RangeServer(LoopbackServer):
    """A small HTTP/1.1 server of in-memory objects: GET with byte ranges (several: a multipart/byteranges
    answer, or the whole object when ``several_ranges`` is False, as servers without them do), HEAD, ETag,
    404, 416."""

    def __init__(self) -> None:
        self.objects: dict[str, bytes] = {}
        self.etags: dict[str, str] = {}
        self.counts = Counts()
        self.delay = 0.0       # seconds each GET waits before answering (so concurrent requests overlap)
        self.rate = 0.0        # bytes/s each connection sends at most (0: as fast as it can), like a WAN link
        self.several_ranges = True  # answer a GET of several ranges with them all (False: the whole object)
        self.in_flight = 0     # GETs being answered now
        self.peak = 0          # the most GETs answered at once since the last reset_peak()
        self._flight_lock = threading.Lock()
        server = self

        class Handler(QuietHandler):
            def _object(self) -> bytes | None:
                return server.objects.get(self.path.split("?")[0])

            def do_HEAD(self) -> None:
                data = self._object()
                server.counts.add(self.path, 0)
                if data is None:
                    self._reply(404, b"", {}, head=True)
                else:
                    etag = server.etags[self.path.split("?")[0]]
                    self._reply(200, b"", {"Content-Length": str(len(data)), "ETag": etag}, head=True, length=len(data))

            def do_GET(self) -> None:
                with server._flight_lock:
                    server.in_flight += 1
                    server.peak = max(server.peak, server.in_flight)
                try:
                    time.sleep(server.delay)
                    self._get()
                finally:
                    with server._flight_lock:
                        server.in_flight -= 1

            def _get(self) -> None:
                data = self._object()
                if data is None:
                    server.counts.add(self.path, 0)
                    self._reply(404, b"", {})
                    return
                etag = server.etags[self.path.split("?")[0]]
                wanted = self.headers.get("Range")
                several = _RANGES.match(wanted or "")
                if several is not None and server.several_ranges:
                    self._multipart(data, etag, [_RANGE.match("bytes=" + part.strip()).groups()
                                                 for part in several.group(1).split(",")])
                    return
                match = _RANGE.match(wanted or "")
                if match is None:
                    server.counts.add(self.path, len(data))
                    self._reply(200, data, {"ETag": etag})
                    return
                start, stop = _range_of(match, len(data))
                if start >= len(data) or stop <= start:
                    server.counts.add(self.path, 0)
                    self._reply(416, b"", {"Content-Range": f"bytes */{len(data)}", "ETag": etag})
                    return
                body = data[start:stop]
                server.counts.add(self.path, len(body))
                self._reply(206, body, {"Content-Range": f"bytes {start}-{stop - 1}/{len(data)}", "ETag": etag})

            def _multipart(self, data: bytes, etag: str, ranges: list[tuple[str, str]]) -> None:
                """A 206 multipart/byteranges answer: each range a part, as RFC 9110 lays it out."""
                body = bytearray()
                sent = 0
                for first, last in ranges:
                    start = int(first) if first else max(0, len(data) - int(last))
                    stop = min(len(data), int(last) + 1) if first and last else len(data)
                    body += (f"--{_BOUNDARY}\r\nContent-Type: application/octet-stream\r\n"
                             f"Content-Range: bytes {start}-{stop - 1}/{len(data)}\r\n\r\n").encode()
                    body += data[start:stop] + b"\r\n"
                    sent += stop - start
                body += f"--{_BOUNDARY}--\r\n".encode()
                server.counts.add(self.path, sent)
                self._reply(206, bytes(body), {"Content-Type": f"multipart/byteranges; boundary={_BOUNDARY}",
                                               "ETag": etag})

            def _reply(self, status: int, body: bytes, headers: dict, head: bool = False,
                       length: int | None = None) -> None:
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                if "Content-Length" not in headers:
                    self.send_header("Content-Length", str(len(body) if length is None else length))
                self.end_headers()
                if head:
                    return
                if not server.rate:
                    self.wfile.write(body)
                    return
                for start in range(0, len(body), _PACED_BLOCK):  # paced: a link of `rate` bytes/s a connection
                    began = time.monotonic()
                    self.wfile.write(body[start:start + _PACED_BLOCK])
                    time.sleep(max(0.0, min(len(body) - start, _PACED_BLOCK) / server.rate
                                   - (time.monotonic() - began)))

        self._serve(Handler)

    def reset_peak(self) -> None:
        """Start measuring the most GETs answered at once again."""
        with self._flight_lock:
            self.peak = self.in_flight

    def put(self, name: str, data: bytes) -> str:
        """Serve ``data`` (bytes, or an mmap for big objects) at /name; returns its URL."""
        self.etags[f"/{name}"] = _etag(data)
        self.objects[f"/{name}"] = data if not isinstance(data, (bytearray, memoryview)) else bytes(data)
        return f"{self.url}/{name}"


class FileServer(LoopbackServer):
    """Files on disk served at /NAME, fast enough that clients, not the server, set the pace on loopback: a
    ranged GET is answered with ``os.sendfile`` (the kernel hands the page cache to the socket; no copy in
    Python), one thread per kept-alive connection, TCP_NODELAY and 4 MiB send buffers. GET with one byte
    range, HEAD, ETag (size and mtime), 404, 416. Counts requests and the body bytes actually sent, per path.
    ``GET /_counts`` answers "requests bytes" since the previous one and resets them (itself not counted), for a
    server in another process (benchmarks/remote.py)."""

    SEND_BUFFER = 4 << 20
    COUNTS_PATH = "/_counts"

    def __init__(self, paths: list[str | os.PathLike]) -> None:
        self.files = {f"/{os.path.basename(path)}": os.fspath(path) for path in paths}
        self.counts = Counts()
        server = self

        class Handler(QuietHandler):
            def setup(self) -> None:
                super().setup()
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, server.SEND_BUFFER)

            def do_HEAD(self) -> None:
                self._answer(head=True)

            def do_GET(self) -> None:
                self._answer(head=False)

            def _answer(self, head: bool) -> None:
                path = self.path.split("?")[0]
                if path == server.COUNTS_PATH:
                    body = "{} {}".format(*server.counts.total()).encode()
                    server.counts.reset()
                    self._headers(200, {"Content-Length": str(len(body))})
                    self.wfile.write(body)
                    return
                found = server.files.get(path)
                if found is None:
                    server.counts.add(path, 0)
                    self._headers(404, {"Content-Length": "0"})
                    return
                stat = os.stat(found)
                size = stat.st_size
                etag = f'"{size:x}-{stat.st_mtime_ns:x}"'
                match = _RANGE.match(self.headers.get("Range") or "")
                start, stop, status = 0, size, 200
                headers = {"Content-Length": str(size), "ETag": etag}
                if match is not None and not head:
                    start, stop = _range_of(match, size)
                    if start >= size or stop <= start:
                        server.counts.add(path, 0)
                        self._headers(416, {"Content-Range": f"bytes */{size}", "ETag": etag, "Content-Length": "0"})
                        return
                    status = 206
                    headers = {"Content-Range": f"bytes {start}-{stop - 1}/{size}", "ETag": etag,
                               "Content-Length": str(stop - start)}
                self._headers(status, headers)
                sent = 0
                try:
                    if not head:
                        with open(found, "rb") as handle:
                            while sent < stop - start:
                                count = os.sendfile(self.connection.fileno(), handle.fileno(), start + sent,
                                                    stop - start - sent)
                                if count == 0:
                                    break
                                sent += count
                finally:  # what went out, also when the client hung up early
                    server.counts.add(path, sent)

            def _headers(self, status: int, headers: dict[str, str]) -> None:
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.end_headers()

        self._serve(Handler)


def _range_of(match: re.Match, size: int) -> tuple[int, int]:
    """(start, stop) that a ``bytes=first-last`` header asks of an object of ``size`` bytes (a suffix when
    first is empty); start >= size or stop <= start when it cannot be satisfied."""
    first, last = match.groups()
    if first == "":
        return max(0, size - int(last)), size
    return int(first), (min(size, int(last) + 1) if last else size)


def _etag(data: bytes) -> str:
    return '"' + hashlib.md5(data).hexdigest() + '"'


class _QuietRequests(WSGIRequestHandler):
    """werkzeug's request handler without its line per request on stderr (moto's ``verbose=False`` is lost
    where the server is made here): thousands of lines in a benchmark's output, and their CPU beside moto's."""

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        pass


class CountingMotoServer(ThreadedMotoServer):
    """moto's threaded S3 server, behind a WSGI layer that counts requests and body bytes per path."""

    def __init__(self) -> None:
        super().__init__(ip_address="127.0.0.1", port=0, verbose=False)
        self.counts = Counts()

    def _server_entry(self) -> None:
        app = DomainDispatcherApplication(create_backend_app)
        counts = self.counts

        def counting(environ: dict, start_response: object) -> object:
            path = environ.get("PATH_INFO", "")
            body = app(environ, start_response)
            chunks = list(body)
            if hasattr(body, "close"):
                body.close()
            counts.add(path, sum(len(chunk) for chunk in chunks) if environ["REQUEST_METHOD"] == "GET" else 0)
            return chunks

        self._server = make_server(self._ip_address, self._port, counting, True, request_handler=_QuietRequests)
        self._server_ready_event.set()
        self._server.serve_forever()

    @property
    def endpoint(self) -> str:
        host, port = self.get_host_and_port()
        return f"http://{host}:{port}"


class CountingGcsServer(LoopbackServer):
    """gcp-storage-emulator's in-memory GCS JSON API on 127.0.0.1 and a free port, counting what it serves.

    The emulator's own server handles one connection at a time; its request handler is served here by a
    threading server instead, so concurrent range reads do not queue. Every request counts; only media
    downloads (``alt=media`` in the JSON API, any GET of the XML API that obstore speaks) count body bytes,
    as a HEAD would carry none for the metadata requests."""

    def __init__(self) -> None:
        from gcp_storage_emulator.server import RequestHandler
        from gcp_storage_emulator.storage import Storage

        self.storage = Storage(use_memory_fs=True)
        self.counts = Counts()
        counts, storage = self.counts, self.storage

        class Handler(RequestHandler):
            def __init__(self, *args: object) -> None:
                super().__init__(storage, *args)

            def parse_request(self) -> bool:
                parsed = super().parse_request()
                # obstore speaks the XML API (GET /bucket/object), percent-encoding even "-" and ".": real GCS
                # decodes the path, the emulator matches it raw. JSON API paths keep "%2F" in object names.
                self.xml_api = not self.path.startswith(("/storage/", "/upload/", "/download/", "/b/", "/batch"))
                if self.xml_api:
                    path, mark, query = self.path.partition("?")
                    self.path = unquote(path) + mark + query
                return parsed

            def do_HEAD(self) -> None:
                """The XML API's HEAD of an object (obstore asks it when a range GET fails: an empty object);
                the emulator has none."""
                if not self.xml_api:
                    super().do_HEAD()
                    return
                bucket, _, name = self.path.split("?")[0].lstrip("/").partition("/")
                try:
                    meta = storage.get_file_obj(bucket, name)
                except Exception:  # noqa: BLE001 - the emulator's NotFound
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(meta["size"]))
                self.end_headers()

            def send_response(self, code: int, message: str | None = None) -> None:
                self.media_bytes = 0
                super().send_response(code, message)

            def send_header(self, keyword: str, value: str) -> None:
                if keyword.lower() == "content-length" and ("alt=media" in self.path or self.xml_api):
                    self.media_bytes = int(value)
                super().send_header(keyword, value)

            def end_headers(self) -> None:
                # Counted before the body goes out, so a client that has its answer sees it counted.
                counts.add(self.path.split("?")[0], self.media_bytes if self.command == "GET" else 0)
                if self.xml_api and self.command in ("GET", "HEAD"):
                    self._last_modified()
                super().end_headers()

            def _last_modified(self) -> None:
                """Real GCS sends Last-Modified and ETag (the MD5 in hex) with every XML API download, and
                obstore requires them; the emulator does not: they are added here from the object's metadata."""
                bucket, _, name = self.path.split("?")[0].lstrip("/").partition("/")
                try:
                    meta = storage.get_file_obj(bucket, name)
                except Exception:  # noqa: BLE001 - no such object: the emulator's answer stands
                    return
                moment = datetime.datetime.fromisoformat(meta["updated"].replace("Z", "+00:00"))
                super().send_header("Last-Modified", email.utils.format_datetime(moment, usegmt=True))
                super().send_header("ETag", '"' + base64.b64decode(meta["md5Hash"]).hex() + '"')

        self._serve(Handler)

    def create_bucket(self, name: str) -> None:
        """Create an empty bucket."""
        from gcp_storage_emulator.handlers.buckets import create_bucket

        create_bucket(name, self.storage)

class CountingRelay(LoopbackServer):
    """An HTTP/1.1 relay on 127.0.0.1 and a free port to a server in another process, counting as it goes:
    every request, and the body bytes of GET responses, per path, before the response goes back."""

    _HOP_BY_HOP = frozenset({"connection", "keep-alive", "transfer-encoding", "content-length"})

    def __init__(self, upstream: str) -> None:
        self.counts = Counts()
        counts = self.counts
        host, port = upstream.removeprefix("http://").split(":")
        hop_by_hop = self._HOP_BY_HOP

        class Handler(QuietHandler):
            def _relay(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                connection = http.client.HTTPConnection(host, int(port), timeout=60)
                try:
                    connection.request(self.command, self.path, body=body,
                                       headers={key: value for key, value in self.headers.items()
                                                if key.lower() not in hop_by_hop})
                    response = connection.getresponse()
                    data = response.read()
                finally:
                    connection.close()
                counts.add(self.path.split("?")[0], len(data) if self.command == "GET" else 0)
                self.send_response(response.status, response.reason)
                for key, value in response.getheaders():
                    if key.lower() not in hop_by_hop:
                        self.send_header(key, value)
                length = response.getheader("Content-Length") if self.command == "HEAD" else None
                self.send_header("Content-Length", length or str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = _relay

        self._serve(Handler)

# Azurite's fixed development account (public, documented with Azurite; it guards nothing).
AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
_AZURITE_LISTENING = re.compile(r"listens on (http://127\.0\.0\.1:\d+)")


AZURITE_PACKAGE = "azurite@3"
AZURITE_FOLDER = os.path.join(os.path.expanduser("~"), ".cache", "arrayio-tests", "azurite")


def _installed_azurite() -> str | None:
    """``azurite-blob`` of the tests' own npm folder, after ``npm install`` into it when it is not there yet."""
    command = os.path.join(AZURITE_FOLDER, "node_modules", ".bin", "azurite-blob")
    if os.path.exists(command):
        return command
    npm = shutil.which("npm")
    if npm is None:
        return None
    try:
        subprocess.run([npm, "install", "--prefix", AZURITE_FOLDER, "--no-audit", "--no-fund", AZURITE_PACKAGE],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=300, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return command if os.path.exists(command) else None


class AzuriteServer:
    """Azurite's blob service (Node.js), run as a subprocess on 127.0.0.1 and a port it picks, data in memory,
    reached through a CountingRelay (Azurite runs in another process, so there is no layer to wrap)."""

    def __init__(self, command: str, workspace: str) -> None:
        self.command = command
        self.workspace = workspace
        self.process: subprocess.Popen | None = None
        self.endpoint = ""  # the relay's, once started
        self.relay: CountingRelay | None = None

    @classmethod
    def find(cls, workspace: os.PathLike) -> AzuriteServer | None:
        """An AzuriteServer: ``azurite-blob`` from PATH, else from the tests' own npm folder, installed there
        from the npm registry on first use (pip cannot install Azurite); None where npm is missing or fails."""
        command = shutil.which("azurite-blob")
        if command is None:
            command = _installed_azurite()
        return None if command is None else cls(command, os.fspath(workspace))

    def start(self) -> None:
        # Telemetry off: Azurite would otherwise report to a server beyond loopback. The API version check
        # off: azure-storage-blob releases often speak a newer version than the installed Azurite knows.
        self.process = subprocess.Popen(
            [self.command, "--blobHost", "127.0.0.1", "--blobPort", "0", "--inMemoryPersistence",
             "--disableTelemetry", "--skipApiVersionCheck", "--silent"],
            cwd=self.workspace, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        lines: queue.Queue[str] = queue.Queue()
        # Its output is read to the end (a full pipe would block it); the start waits for the port it prints.
        threading.Thread(target=_lines_into, args=(self.process.stdout, lines), daemon=True).start()
        deadline = time.monotonic() + 60
        seen: list[str] = []
        azurite = ""
        while not azurite and time.monotonic() < deadline:
            try:
                seen.append(lines.get(timeout=max(0.0, deadline - time.monotonic())))
            except queue.Empty:
                break
            match = _AZURITE_LISTENING.search(seen[-1])
            if match:
                azurite = match.group(1)
        if not azurite:
            self.stop()
            raise RuntimeError("Azurite did not start: " + "".join(seen))
        self.relay = CountingRelay(azurite)
        self.relay.start()
        self.endpoint = self.relay.endpoint

    @property
    def counts(self) -> Counts:
        """What Azurite was asked and sent, as the relay in front of it saw it."""
        assert self.relay is not None, "start() first"
        return self.relay.counts

    @property
    def connection_string(self) -> str:
        """What adlfs (``connection_string=``) needs to reach this server."""
        return (f"DefaultEndpointsProtocol=http;AccountName={AZURITE_ACCOUNT};AccountKey={AZURITE_KEY};"
                f"BlobEndpoint={self.endpoint}/{AZURITE_ACCOUNT};")

    def stop(self) -> None:
        if self.relay is not None:
            self.relay.stop()
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)


def _lines_into(stream: Any, lines: queue.Queue) -> None:
    for line in stream:
        lines.put(line)
