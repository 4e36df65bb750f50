"""Bad remote input gets a clear error naming the URL: a missing object (on every backend), a refused
connection, an object shorter than its header says, an object that changes between open and a later read."""

from __future__ import annotations

import re
import socket

import numpy as np
import pytest
from remote_samples import BUCKET, OBJECT_STORES

import arrayio
from arrayio import kastore


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def store_bytes(samples) -> bytes:
    return samples("kastore/ours").read_bytes()


def test_missing_object_over_http(http_server):
    url = f"{http_server.url}/no/such.kas"
    with pytest.raises(FileNotFoundError, match="no/such.kas"):
        arrayio.open(url)
    with pytest.raises(FileNotFoundError, match="no/such.kas"):
        kastore.load(url)


@pytest.mark.parametrize("object_store", OBJECT_STORES, indirect=True)
def test_missing_object_in_an_object_store(object_store):
    url = f"{object_store.root}/no/such.blp"
    with pytest.raises(FileNotFoundError, match=re.escape(url)):
        arrayio.open(url, storage_options=object_store.options)
    with pytest.raises(FileNotFoundError, match=re.escape(url)):
        kastore.load(url, storage_options=object_store.options)
    with pytest.raises(FileNotFoundError):
        arrayio.validate(url, storage_options=object_store.options)


def test_refused_connection_names_the_url():
    url = f"http://127.0.0.1:{_free_port()}/data.kas"
    with pytest.raises(arrayio.RemoteError, match=r"127\.0\.0\.1:\d+/data\.kas") as caught:
        arrayio.open(url)
    assert isinstance(caught.value, OSError)


def test_refused_connection_on_s3():
    options = {"key": "k", "secret": "s", "skip_instance_cache": True, "retries": 1,
               "config_kwargs": {"retries": {"max_attempts": 1}, "connect_timeout": 2},
               "client_kwargs": {"endpoint_url": f"http://127.0.0.1:{_free_port()}", "region_name": "us-east-1"}}
    with pytest.raises(arrayio.RemoteError, match=f"s3://{BUCKET}/x.kas"):
        arrayio.open(f"s3://{BUCKET}/x.kas", storage_options=options)


@pytest.mark.parametrize("backend", ["http", *OBJECT_STORES])
def test_object_shorter_than_its_header_says(http_server, object_stores, store_bytes, backend):
    cut = store_bytes[:len(store_bytes) // 2]
    if backend == "http":
        url, options = http_server.put("cut.kas", cut), {}
    else:
        store = object_stores(backend)
        url, options = store.put("cut.kas", cut), store.options
    with pytest.raises(arrayio.TruncatedError, match="cut.kas") as caught:
        arrayio.open(url, storage_options=options)
    assert isinstance(caught.value, kastore.FileFormatError)
    assert "header.file_size" in str(caught.value)


def test_object_replaced_by_one_of_another_size(http_server, store_bytes):
    url = http_server.put("changing.kas", store_bytes)
    with arrayio.open(url) as store:
        http_server.put("changing.kas", store_bytes + bytes(8))
        with pytest.raises(arrayio.ObjectChangedError, match="changing.kas.*size"):
            store["big"]


def test_object_replaced_by_one_of_the_same_size_over_http(http_server, store_bytes):
    url = http_server.put("same-size.kas", store_bytes)
    with arrayio.open(url) as store:
        changed = bytearray(store_bytes)
        changed[-1] ^= 0xFF
        http_server.put("same-size.kas", bytes(changed))
        with pytest.raises(arrayio.ObjectChangedError, match="same-size.kas.*ETag"):
            store["small"]


def test_object_replaced_by_one_of_another_size_on_gs(object_stores, store_bytes):
    # The emulator sends no generation with media downloads: only the size from Content-Range can differ.
    store = object_stores("gs")
    url = store.put("resized.kas", store_bytes)
    with arrayio.open(url, storage_options=store.options) as reader:
        store.put("resized.kas", store_bytes + bytes(8))
        with pytest.raises(arrayio.ObjectChangedError, match="resized.kas.*size"):
            reader["big"]


def test_object_replaced_on_s3(s3_put, s3_options, store_bytes):
    url = s3_put("replaced.kas", store_bytes)
    with arrayio.open(url, storage_options=s3_options) as store:
        changed = bytearray(store_bytes)
        changed[-1] ^= 0xFF
        s3_put("replaced.kas", bytes(changed))
        with pytest.raises(arrayio.ObjectChangedError, match="replaced.kas"):
            store["small"]


def test_unchanged_object_reads_fine_after_a_rewrite_of_the_same_bytes(http_server, store_bytes):
    url = http_server.put("rewritten.kas", store_bytes)
    with arrayio.open(url) as store:
        http_server.put("rewritten.kas", store_bytes)
        assert np.array_equal(store["small"], np.arange(100, dtype=np.int32))


def test_not_a_known_format_names_the_url(http_server):
    url = http_server.put("junk.bin", b"nothing to see here" * 10)
    with pytest.raises(arrayio.FormatError, match="junk.bin"):
        arrayio.open(url)


def test_storage_options_need_a_url(samples):
    with pytest.raises(TypeError, match="storage_options"):
        arrayio.open(samples("kastore/ours"), storage_options={"anon": True})


@pytest.mark.parametrize("options", ["anon=true", "", 5, [("anon", True)]])
def test_storage_options_that_are_not_a_dict_are_named(http_server, store_bytes, samples, options):
    # Before: "dictionary update sequence element #0 has length 1" or "'int' object is not iterable" from
    # deep in the transport, and FrameDataset over a local file took any value without a word.
    url = http_server.put("options.kas", store_bytes)
    for call in (lambda: arrayio.open(url, storage_options=options),
                 lambda: arrayio.info(url, storage_options=options),
                 lambda: kastore.load(url, storage_options=options),
                 lambda: arrayio.open(samples("kastore/ours"), storage_options=options)):
        with pytest.raises(TypeError, match="storage_options must be a dict of options for the remote backend"):
            call()
    pytest.importorskip("torch")
    from arrayio.robot.torch import FrameDataset

    with pytest.raises(TypeError, match="storage_options must be a dict"):
        FrameDataset(samples("kdb/ours"), storage_options=options)
