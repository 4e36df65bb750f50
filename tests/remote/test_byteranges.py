"""The multipart/byteranges answer of a several-range GET, as a hostile server could shape it: every part is
cut by its own Content-Range, and anything that does not add up is a RemoteError naming the URL."""

from __future__ import annotations

import pytest

from arrayio._remote import _byteranges as byteranges
from arrayio.errors import RemoteError

REMOTE_CLIENTS = ("obstore",)  # a parser of bytes: no client is involved, so once is enough
URL = "http://127.0.0.1:1/x.trees"
DATA = bytes(range(256)) * 40


def _part(start: int, stop: int, boundary: str = "b", claimed: tuple[int, int] | None = None) -> bytes:
    first, last = claimed or (start, stop - 1)
    return (f"--{boundary}\r\nContent-Type: application/octet-stream\r\nContent-Range: bytes {first}-{last}/"
            f"{len(DATA)}\r\n\r\n").encode() + DATA[start:stop] + b"\r\n"


def test_parts_are_cut_by_their_content_range_even_around_a_boundary_in_the_data():
    data_with_boundary = b"--b\r\n"
    body = (_part(0, 10) + b"--b\r\nContent-Range: bytes 5000-5004/10240\r\n\r\n" + data_with_boundary
            + b"\r\n" + _part(9000, 9100) + b"--b--\r\n")
    parts, size = byteranges.parse_parts(URL, body, "b")
    assert size == len(DATA)
    assert [(first, bytes(data)) for first, data in parts] == [
        (0, DATA[:10]), (5000, data_with_boundary), (9000, DATA[9000:9100])]


@pytest.mark.parametrize("body, message", [
    (_part(0, 10)[:-5], "runs past the body"),                                # a part cut short
    (b"no parts at all" * 40, "without its boundary"),                         # no delimiter near the start
    (_part(0, 10) + b"--c--\r\n", "without its boundary"),                     # another boundary after a part
    (_part(0, 10, claimed=(10, 0)) + b"--b--\r\n", "runs past the body"),      # last before first
    (b"--b\r\nContent-Type: x\r\n\r\n" + DATA[:10] + b"\r\n--b--\r\n", "without a valid Content-Range"),
    (b"--b\r\n" + b"X" * 600, "do not end within"),                           # endless part headers
    (b"--b--\r\n", "no parts"),                                                # nothing at all
    (_part(0, 10) + _part(20, 30).replace(b"/10240", b"/99") + b"--b--\r\n", "different object sizes"),
])
def test_a_malformed_multipart_answer_is_a_named_error(body, message):
    with pytest.raises(RemoteError, match=message) as raised:
        byteranges.parse_parts(URL, body, "b")
    assert URL in str(raised.value)


def test_the_header_and_the_bound_of_an_answer():
    spans = [(0, 10), (5000, 5100)]
    assert byteranges.range_header(spans) == "bytes=0-9,5000-5099"
    assert byteranges.body_limit(spans) == 110 + 3 * byteranges.PART_OVERHEAD
    assert byteranges.boundary('multipart/byteranges; boundary="3d6b6a416f9b5"') == "3d6b6a416f9b5"
    assert byteranges.boundary("application/octet-stream") is None
