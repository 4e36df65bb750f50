"""Fixtures of the remote tests: an HTTP range server and moto's S3 server on 127.0.0.1, one dask
LocalCluster for the session, and sample files of every format written by us and by the reference
packages."""

from __future__ import annotations

import os
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest
from remote_samples import BUCKET, write_sample
from remote_servers import CountingMotoServer, RangeServer


@pytest.fixture(scope="session")
def http_server():
    """The HTTP range server, started once and stopped at the end of the session."""
    server = RangeServer()
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def s3_server():
    """moto's S3 server on 127.0.0.1 and a free port, with one bucket."""
    for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                       "AWS_DEFAULT_REGION": "us-east-1"}.items():
        os.environ.setdefault(key, value)
    server = CountingMotoServer()
    server.start()
    import boto3

    client = boto3.client("s3", endpoint_url=server.endpoint, region_name="us-east-1",
                          aws_access_key_id="testing", aws_secret_access_key="testing")
    client.create_bucket(Bucket=BUCKET)
    server.client = client
    yield server
    server.stop()


@pytest.fixture(scope="session")
def s3_options(s3_server) -> dict:
    """storage_options that point s3fs at the moto server."""
    return {"key": "testing", "secret": "testing", "client_kwargs": {"endpoint_url": s3_server.endpoint,
                                                                      "region_name": "us-east-1"}}


@pytest.fixture
def s3_put(s3_server) -> Callable[[str, bytes], str]:
    """Upload bytes to the bucket; returns the s3:// URL."""
    def put(name: str, data: bytes) -> str:
        s3_server.client.put_object(Bucket=BUCKET, Key=name, Body=bytes(data))
        return f"s3://{BUCKET}/{name}"
    return put


@pytest.fixture(scope="module")
def dask_client():
    """One real dask.distributed LocalCluster (2 worker processes) per module that uses it (slow to start).

    Module scope: the client is every computation's default scheduler while it lives, so it must
    not outlive the dask tests and run other modules' computations."""
    distributed = pytest.importorskip("distributed")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                           host="127.0.0.1", dashboard_address=None)
        client = distributed.Client(cluster)
    yield client
    client.close()
    cluster.close()


# --------------------------------------------------------------------------- sample files

@pytest.fixture(scope="session")
def sample_folder():
    with tempfile.TemporaryDirectory(prefix="arrayio-remote-") as folder:
        yield Path(folder)


@pytest.fixture(scope="session")
def samples(sample_folder) -> Callable[[str], Path]:
    """The path of a sample file, written on first use."""
    written: dict[str, Path] = {}

    def get(kind: str) -> Path:
        if kind not in written:
            written[kind] = write_sample(kind, sample_folder)
        return written[kind]
    return get
