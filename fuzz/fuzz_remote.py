"""Fuzz the remote Source against a fake HTTP server on loopback whose answers the input decides.

The input is a script and a file: its first SCRIPT bytes say, request by request, how the server
misbehaves (ignores Range and sends everything, sends more or fewer bytes than asked, another range,
another total, an error status, a compressed encoding, a changed ETag, no length, a redirect); the
rest is the object it serves (a file of any format). The client opens the URL, reads every entry,
validates and asks for its info. Allowed outcomes: success, an arrayio error (a FormatError, or a
RemoteError naming the URL), or the FileNotFoundError/PermissionError of a 404/403 naming the URL;
aiohttp's, asyncio's or any other exception escaping is a finding.
Every response closes its connection, so a short body ends at once instead of hanging.
"""

from __future__ import annotations

import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import arrayio
from arrayio.errors import ArrayIOError

FORMAT = "remote"
# A 404 (or 403) is FileNotFoundError (PermissionError) naming the URL, as a missing local file is.
ALLOWED = (ArrayIOError, FileNotFoundError, PermissionError)
SCRIPT = 8
_RANGE = re.compile(r"bytes=(\d+)-(\d*)$")
_state: dict = {"script": b"\0", "body": b"", "served": 0}
_server: list[ThreadingHTTPServer] = []


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        """Quiet: the fuzzer's output is its own."""

    def do_HEAD(self) -> None:  # noqa: N802 - http.server's name
        self._answer(head=True)

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self._answer(head=False)

    def _answer(self, head: bool) -> None:
        body, script = _state["body"], _state["script"]
        mode = script[_state["served"] % len(script)]
        _state["served"] += 1
        match = _RANGE.match(self.headers.get("Range", ""))
        start, stop = (int(match.group(1)), int(match.group(2) or len(body) - 1) + 1) if match else (0, len(body))
        stop = min(stop, len(body))
        status, part, total = (206, body[start:stop], len(body)) if match else (200, body, len(body))
        headers = {"ETag": '"fixed"', "Accept-Ranges": "bytes"}
        kind = mode % 12
        if kind == 1:  # ignore the range
            status, part = 200, body
        elif kind == 2:  # more bytes than asked
            part = body[start:stop + 1 + mode // 12]
        elif kind == 3:  # fewer bytes than asked
            part = part[:len(part) // 2]
        elif kind == 4:  # another range than asked
            shift = 1 + mode // 12
            part = body[start + shift:stop + shift]
            start += shift
        elif kind == 5:  # another total
            total += 1 + mode // 12
        elif kind == 6:
            status, part = (500, 503, 404, 416)[mode // 12 % 4], b"no"
        elif kind == 7:
            headers["Content-Encoding"] = "gzip"
        elif kind == 8:
            headers["ETag"] = f'"changed{_state["served"]}"'
        elif kind == 9:  # a Content-Length that promises more than is sent
            headers["X-Short"] = "1"
        elif kind == 10:
            status, part = 302, b""
            headers["Location"] = self.path
        elif kind == 11:
            part = bytes(len(part))  # zeros instead of the data
        if status == 206:
            headers["Content-Range"] = f"bytes {start}-{start + max(len(part), 1) - 1}/{total}"
        self.send_response(status)
        length = len(part) + (5 if "X-Short" in headers else 0)
        headers.pop("X-Short", None)
        for name, value in {**headers, "Content-Length": str(length), "Connection": "close"}.items():
            self.send_header(name, value)
        self.end_headers()
        if not head:
            self.wfile.write(part)
        self.close_connection = True


def _url() -> str:
    if not _server:
        server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        _server.append(server)
    host, port = _server[0].server_address[:2]
    return f"http://{host}:{port}/object"


def close() -> None:
    """Stop the loopback server (the next input starts a new one)."""
    while _server:
        server = _server.pop()
        server.shutdown()
        server.server_close()


def exercise(path: str, data: bytes) -> None:
    """Serve ``data``'s object as its script says and read it through arrayio's remote Source."""
    script, body = data[:SCRIPT], data[SCRIPT:]
    if arrayio.detect(body) is None:
        return
    _state.update(script=script or b"\0", body=body, served=0)
    url = _url()
    storage_options = {"client_kwargs": {"timeout": _timeout()}}
    problems = arrayio.validate(url, storage_options)
    assert isinstance(problems, list)
    arrayio.info(url, storage_options)
    with arrayio.open(url, storage_options) as reader:
        for entry in list(getattr(reader, "entries", lambda: [])())[:4]:
            assert isinstance(entry, dict)


def _timeout():
    import aiohttp

    return aiohttp.ClientTimeout(total=2, sock_read=0.5)


def seeds(folder):
    """Every format's smallest valid files, each behind an honest script and a few misbehaving ones."""
    from pathlib import Path

    root = Path(__file__).resolve().parent / "seeds"
    for format in ("kastore", "kast", "bloscpack", "kdb", "pycauset"):
        for seed in sorted((root / format).glob("valid-*"), key=lambda path: path.stat().st_size)[:2]:
            body = seed.read_bytes()
            for number, script in enumerate((bytes(SCRIPT), bytes(range(1, 1 + SCRIPT)))):
                yield f"{format}-{seed.name[len('valid-'):]}-{number}", script + body
