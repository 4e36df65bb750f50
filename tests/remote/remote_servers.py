"""Real servers on loopback for the remote tests: an HTTP server with byte ranges that counts what it
serves, and moto's S3 server wrapped in a WSGI layer that does the same."""

from __future__ import annotations

import hashlib
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    create_backend_app,
)
from moto.server import ThreadedMotoServer
from werkzeug.serving import make_server

_RANGE = re.compile(r"bytes=(\d*)-(\d*)$")


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


class RangeServer:
    """A small HTTP/1.1 server of in-memory objects: GET with one byte range, HEAD, ETag, 404, 416."""

    def __init__(self) -> None:
        self.objects: dict[str, bytes] = {}
        self.etags: dict[str, str] = {}
        self.counts = Counts()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Headers and body go out in two writes: without TCP_NODELAY, Nagle and delayed ACKs
            # hold every small response for ~40 ms (real servers set it too).
            disable_nagle_algorithm = True

            def log_message(self, *args: object) -> None:
                pass

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
                data = self._object()
                if data is None:
                    server.counts.add(self.path, 0)
                    self._reply(404, b"", {})
                    return
                etag = server.etags[self.path.split("?")[0]]
                wanted = self.headers.get("Range")
                match = _RANGE.match(wanted or "")
                if match is None:
                    server.counts.add(self.path, len(data))
                    self._reply(200, data, {"ETag": etag})
                    return
                first, last = match.groups()
                if first == "":
                    start, stop = max(0, len(data) - int(last)), len(data)
                else:
                    start = int(first)
                    stop = min(len(data), int(last) + 1) if last else len(data)
                if start >= len(data) or stop <= start:
                    server.counts.add(self.path, 0)
                    self._reply(416, b"", {"Content-Range": f"bytes */{len(data)}", "ETag": etag})
                    return
                body = data[start:stop]
                server.counts.add(self.path, len(body))
                self._reply(206, body, {"Content-Range": f"bytes {start}-{stop - 1}/{len(data)}", "ETag": etag})

            def _reply(self, status: int, body: bytes, headers: dict, head: bool = False,
                       length: int | None = None) -> None:
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                if "Content-Length" not in headers:
                    self.send_header("Content-Length", str(len(body) if length is None else length))
                self.end_headers()
                if not head:
                    self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                       daemon=True)

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    def put(self, name: str, data: bytes) -> str:
        """Serve ``data`` (bytes, or an mmap for big objects) at /name; returns its URL."""
        self.etags[f"/{name}"] = _etag(data)
        self.objects[f"/{name}"] = data if not isinstance(data, (bytearray, memoryview)) else bytes(data)
        return f"{self.url}/{name}"

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=10)


def _etag(data: bytes) -> str:
    return '"' + hashlib.md5(data).hexdigest() + '"'


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

        self._server = make_server(self._ip_address, self._port, counting, True)
        self._server_ready_event.set()
        self._server.serve_forever()

    @property
    def endpoint(self) -> str:
        host, port = self.get_host_and_port()
        return f"http://{host}:{port}"
