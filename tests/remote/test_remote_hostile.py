"""Hostile servers (issue 19, items 7-10), each a loopback server of hostile_servers.py, bounded in time and
bytes: no answer is read past the length asked for, compressed bodies are refused, a range other than the one
asked is an error, redirects keep credentials on their origin, timeouts are settable, and a truncated file over
HTTP names its URL. Run through both clients (obstore and fsspec)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import pytest
from hostile_servers import HostileServer

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "hostile"))  # the peak-memory harness of tests/hostile
from hostile_run import PEAK_LIMIT_MB, run_cli_hostile  # noqa: E402

import arrayio
from arrayio import kastore, pycauset

# The most a client may take in from a hostile answer: what it asked for plus a few socket buffers.
INTAKE_BOUND = 16 << 20


@pytest.fixture(scope="module")
def store_bytes(samples) -> bytes:
    return samples("kastore/ours").read_bytes()


@pytest.fixture(scope="module")
def expected(samples) -> np.ndarray:
    with kastore.load(samples("kastore/ours")) as local:
        return np.array(local["big"])


@pytest.fixture(scope="module")
def hostile(store_bytes):
    """A hostile server and a second one on another port (another origin), serving the kastore sample."""
    server, other = HostileServer(store_bytes), HostileServer(store_bytes)
    server.start()
    other.start()
    server.redirect_to = other.url
    yield server, other
    server.stop()
    other.stop()


def _read_big_key(url: str, options: dict | None = None) -> np.ndarray:
    with kastore.load(url, storage_options=options) as store:
        return np.array(store["big"])


@pytest.mark.parametrize("mode", ["ignore-range", "long-206"])
def test_an_answer_longer_than_asked_is_not_read(hostile, mode):
    server, _other = hostile
    server.sent = 0
    started = time.monotonic()
    # Refused (a 206 past its length; a 200 to a read past byte 0), or its first bytes, all that is read of
    # a 200 to the first read, are not a kastore file.
    with pytest.raises((arrayio.RemoteError, arrayio.FormatError)):
        _read_big_key(server.url_of(mode))
    assert server.sent < INTAKE_BOUND  # the server offered 4 GiB and would write 256 MiB before giving up
    assert time.monotonic() - started < 10


def test_identity_is_asked_for_and_a_compressed_body_refused(hostile, expected):
    server, _other = hostile
    server.headers_seen.clear()
    # A server that compresses only when the client accepts it sends plain bytes: nothing accepts gzip.
    assert np.array_equal(_read_big_key(server.url_of("gzip")), expected)
    assert all("gzip" not in seen.get("Accept-Encoding", "") for seen in server.headers_seen)
    # One that compresses anyway (a 64 MiB bomb in a few KB) is refused before anything is decoded.
    with pytest.raises(arrayio.RemoteError, match="gzip-always/data.kas"):
        _read_big_key(server.url_of("gzip-always"))


def test_a_range_other_than_the_one_asked_is_an_error(hostile):
    server, _other = hostile
    with pytest.raises(arrayio.RemoteError, match=r"shifted/data.kas.*(answered|got) .*1000"):
        _read_big_key(server.url_of("shifted"))


def test_redirects_keep_credentials_on_their_origin(hostile, expected):
    server, other = hostile
    options = {"headers": {"X-Token": "secret"}}
    assert np.array_equal(_read_big_key(server.url_of("local-redirect"), options), expected)
    other.headers_seen.clear()
    with pytest.raises(arrayio.RemoteError, match="another origin"):
        _read_big_key(server.url_of("redirect"), options)
    assert other.headers_seen == []
    # Allowed by name, the redirect is followed.
    allowed = {**options, "cross_origin_redirects": True}
    assert np.array_equal(_read_big_key(server.url_of("redirect"), allowed), expected)


def test_a_slow_server_is_stopped_by_the_read_timeout(hostile):
    server, _other = hostile
    started = time.monotonic()
    with pytest.raises(arrayio.RemoteError, match="slow/data.kas"):
        _read_big_key(server.url_of("slow"), {"read_timeout": 0.5, "connect_timeout": 2})
    assert time.monotonic() - started < 10  # with retries: obstore retries twice


@pytest.mark.parametrize("bad", [{"read_timeout": 0}, {"client": "curl"}, {"part_bytes": 0}])
def test_bad_transport_settings_are_usage_errors(hostile, bad):
    server, _other = hostile
    with pytest.raises(ValueError, match=next(iter(bad))):
        arrayio.open(server.url_of("honest"), storage_options=bad)


def test_a_truncated_pycauset_file_over_http_names_the_url(http_server, samples):
    data = samples("pycauset/reference").read_bytes()
    url = http_server.put("hostile/truncated.pycauset", data[:len(data) // 2])
    with pytest.raises(arrayio.FormatError, match="hostile/truncated.pycauset"):
        with pycauset.load(url) as container:
            container.array  # noqa: B018 - the payload read is where a truncated file fails
    with pytest.raises(arrayio.FormatError, match="hostile/truncated.pycauset"):
        arrayio.open(url)


@pytest.mark.parametrize("mode", ["ignore-range", "long-206", "gzip-always"])
def test_a_hostile_answer_costs_bounded_memory(hostile, mode):
    # The CLI in a child process whose peak resident memory is measured (VmHWM): 4 GiB offered without a
    # range, past its range, or as a gzip bomb: before, 8.2 GB and 2.1 GB of RSS.
    server, _other = hostile
    outcome = run_cli_hostile("cat", server.url_of(mode), "big")
    assert outcome.returncode == 1, outcome.stderr
    assert outcome.last_line.startswith("arrayio:"), outcome.stderr
    assert 0 < outcome.peak_mb < PEAK_LIMIT_MB, outcome.peak_mb
