"""Hostile HTTP servers on loopback (issue 19, items 7-9): each misbehaves in one way a real server, proxy or
attacker could, and counts what it sent, so a test can bound the bytes the client let in.

Every answer is bounded: a "huge" body claims gigabytes in its headers but the server stops writing after
``CAP`` bytes or when the client hangs up, whichever is first; a slow body ends after ``SLOW_SECONDS``."""

from __future__ import annotations

import gzip
import re
import threading
import time

from remote_servers import LoopbackServer, QuietHandler

_RANGE = re.compile(r"bytes=(\d+)-(\d+)$")
# What a huge answer claims, and what the server writes at most before giving up on the client.
CLAIMED = 4 << 30
CAP = 256 << 20
SLOW_SECONDS = 20
_BLOCK = bytes(1 << 16)


class HostileServer(LoopbackServer):
    """Serves ``data`` at every path; the first path segment picks the misbehaviour:

    /honest/...       a correct range server (206, exact Content-Range)
    /ignore-range/... 200 and a body of CLAIMED bytes, whatever the Range
    /long-206/...     206 with the asked Content-Range but CLAIMED body bytes
    /shifted/...      206 of the same length, 1000 bytes later than asked, Content-Range saying so
    /gzip/...         when the client accepts gzip: the asked range with a 64 MiB bomb appended, compressed
    /gzip-always/...  the same, whatever the client accepts
    /redirect/...     302 to the same path on ``redirect_to`` (another port: another origin)
    /local-redirect/... 302 to /honest/... on this server (the same origin)
    /slow/...         206 headers, then one body byte every 2 s
    """

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.sent = 0
        self.headers_seen: list[dict[str, str]] = []
        self.redirect_to = ""
        self._lock = threading.Lock()
        server = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:
                server.headers_seen.append(dict(self.headers.items()))
                mode = self.path.split("/")[1]
                match = _RANGE.match(self.headers.get("Range") or "")
                start, last = (int(match.group(1)), int(match.group(2))) if match else (0, len(server.data) - 1)
                last = min(last, len(server.data) - 1)
                body = server.data[start:last + 1]
                total = len(server.data)
                try:
                    getattr(self, "_" + mode.replace("-", "_"))(start, last, body, total)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def _head(self, status: int, headers: dict) -> None:
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, str(value))
                self.end_headers()

            def _write(self, data: bytes) -> None:
                self.wfile.write(data)
                with server._lock:
                    server.sent += len(data)

            def _huge(self, status: int, headers: dict) -> None:
                self._head(status, {**headers, "Content-Length": CLAIMED})
                self.close_connection = True
                while server.sent < CAP:
                    self._write(_BLOCK)

            def _honest(self, start: int, last: int, body: bytes, total: int) -> None:
                self._head(206, {"Content-Range": f"bytes {start}-{last}/{total}", "Content-Length": len(body),
                                 "ETag": '"v1"'})
                self._write(body)

            def _ignore_range(self, start: int, last: int, body: bytes, total: int) -> None:
                self._huge(200, {"ETag": '"v1"'})

            def _long_206(self, start: int, last: int, body: bytes, total: int) -> None:
                self._huge(206, {"Content-Range": f"bytes {start}-{last}/{total}", "ETag": '"v1"'})

            def _shifted(self, start: int, last: int, body: bytes, total: int) -> None:
                shift = min(1000, total - 1 - last)
                moved = server.data[start + shift:last + shift + 1]
                self._head(206, {"Content-Range": f"bytes {start + shift}-{last + shift}/{total}",
                                 "Content-Length": len(moved), "ETag": '"v1"'})
                self._write(moved)

            def _gzip(self, start: int, last: int, body: bytes, total: int) -> None:
                if "gzip" not in (self.headers.get("Accept-Encoding") or ""):
                    self._honest(start, last, body, total)
                    return
                self._gzip_always(start, last, body, total)

            def _gzip_always(self, start: int, last: int, body: bytes, total: int) -> None:
                packed = gzip.compress(body + bytes(64 << 20), compresslevel=9)
                self._head(206, {"Content-Range": f"bytes {start}-{last}/{total}", "Content-Length": len(packed),
                                 "Content-Encoding": "gzip", "ETag": '"v1"'})
                self._write(packed)

            def _redirect(self, start: int, last: int, body: bytes, total: int) -> None:
                rest = self.path.split("/", 2)[2]
                self._head(302, {"Location": f"{server.redirect_to}/honest/{rest}", "Content-Length": 0})

            def _local_redirect(self, start: int, last: int, body: bytes, total: int) -> None:
                rest = self.path.split("/", 2)[2]
                self._head(302, {"Location": f"/honest/{rest}", "Content-Length": 0})

            def _slow(self, start: int, last: int, body: bytes, total: int) -> None:
                self._head(206, {"Content-Range": f"bytes {start}-{last}/{total}", "Content-Length": len(body),
                                 "ETag": '"v1"'})
                deadline = time.monotonic() + SLOW_SECONDS
                for index in range(len(body)):
                    if time.monotonic() > deadline:
                        break
                    self._write(body[index:index + 1])
                    self.wfile.flush()
                    time.sleep(2)
                self.close_connection = True

        self._serve(Handler)

    def url_of(self, mode: str, name: str = "data.kas") -> str:
        """The URL of the object under one misbehaviour."""
        return f"{self.url}/{mode}/{name}"
