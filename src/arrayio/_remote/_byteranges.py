"""Several byte ranges of one HTTP object in one request (RFC 9110 ``multipart/byteranges``).

Object stores (S3, GCS, Azure) answer one range per GET, but most HTTP
servers answer ``Range: bytes=a-b,c-d`` with one 206 whose body holds every
range as a part. Where a reader needs a handful of small ranges scattered over
a big file (the top-level keys of a tree sequence), that is one round trip
instead of one per range. A server is not trusted: the body is read up to a
bound computed from the ranges asked, and every part must be a range asked.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ..errors import RemoteError
from ._transports import content_range

# Servers cap the ranges of one request (Apache: 200); stay well below.
MAX_RANGES = 64
# Bytes a part may spend on its delimiter and headers (Content-Type, Content-Range), and the closing delimiter.
PART_OVERHEAD = 512
_BOUNDARY = re.compile(r'multipart/byteranges\s*;\s*boundary="?([^";\s]+)"?', re.IGNORECASE)


def range_header(spans: Sequence[tuple[int, int]]) -> str:
    """The ``Range`` header of ``(start, stop)`` spans."""
    return "bytes=" + ",".join(f"{start}-{stop - 1}" for start, stop in spans)


def body_limit(spans: Sequence[tuple[int, int]]) -> int:
    """The most bytes a multipart answer to ``spans`` may hold."""
    return sum(stop - start for start, stop in spans) + PART_OVERHEAD * (len(spans) + 1)


def boundary(content_type: str | None) -> str | None:
    """The boundary of a ``multipart/byteranges`` Content-Type, else None."""
    match = _BOUNDARY.search(content_type or "")
    return match.group(1) if match else None


def parse_parts(url: str, body: bytes | bytearray, delimiter: str) -> tuple[list[tuple[int, memoryview]], int]:
    """The ``(first byte, bytes)`` parts of a multipart/byteranges body, and the object's size its parts
    name; each part's length comes from its Content-Range, so a boundary inside the data cannot cut it."""
    view = memoryview(body)
    marker = b"--" + delimiter.encode("latin-1")
    position = body.find(marker, 0, PART_OVERHEAD)
    parts: list[tuple[int, memoryview]] = []
    sizes = set()
    while True:
        if position < 0 or bytes(view[position:position + len(marker)]) != marker:
            raise RemoteError(f"{url}: a multipart/byteranges answer without its boundary where a part should start")
        position += len(marker)
        if bytes(view[position:position + 2]) == b"--":
            break
        end_of_headers = bytes(view[position:position + PART_OVERHEAD]).find(b"\r\n\r\n")
        if end_of_headers < 0:
            raise RemoteError(f"{url}: a multipart/byteranges part whose headers do not end within "
                              f"{PART_OVERHEAD} bytes")
        headers = bytes(view[position:position + end_of_headers]).decode("latin-1").split("\r\n")
        ranges = [line.split(":", 1)[1] for line in headers if line.lower().startswith("content-range:")]
        answered = content_range(ranges[0]) if ranges else None
        if answered is None:
            raise RemoteError(f"{url}: a multipart/byteranges part without a valid Content-Range")
        first, last, size = answered
        start = position + end_of_headers + 4
        stop = start + last + 1 - first
        if last < first or stop > len(body):
            raise RemoteError(f"{url}: a multipart/byteranges part of bytes {first}..{last} runs past the body")
        parts.append((first, view[start:stop]))
        sizes.add(size)
        position = stop + 2 if bytes(view[stop:stop + 2]) == b"\r\n" else stop
    if len(sizes) != 1:
        raise RemoteError(f"{url}: a multipart/byteranges answer with no parts, or parts naming different "
                          f"object sizes")
    return parts, sizes.pop()
