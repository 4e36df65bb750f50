"""Fixtures of the remote tests: an HTTP range server, moto's S3 server, the gcp-storage-emulator and
Azurite (installed by npm on first use) on 127.0.0.1, one dask LocalCluster for the session, and sample files of
every format written by us and by the reference packages."""

from __future__ import annotations

import os
import tempfile
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from remote_samples import BUCKET, write_sample
from remote_servers import AzuriteServer, CountingGcsServer, CountingMotoServer, Counts, RangeServer

# gcsfs's default filesystem asks a gRPC control API for each bucket's layout; emulators have none, and
# every lookup waits out a 60 s timeout. Set before gcsfs is first imported (here or in a subprocess).
os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")


@dataclass
class ObjectStore:
    """One object store backend as the tests see it: where new objects go, how to reach it, what it served."""

    name: str
    root: str                         # URL of the test bucket or container, e.g. "s3://arrayio-test"
    options: dict                     # storage_options for its fsspec filesystem
    counts: Counts                    # requests and bytes as the server saw them
    put: Callable[[str, bytes], str]  # upload bytes under a name; returns the object's URL


# Every remote test runs once per client (obstore, fsspec) unless its module narrows REMOTE_CLIENTS or it is
# marked one_client (slow tests where the client adds nothing: CLI subprocesses, clusters).
REMOTE_CLIENTS = ("obstore", "fsspec")


def pytest_generate_tests(metafunc):
    if "remote_client" in metafunc.fixturenames:
        clients = getattr(metafunc.module, "REMOTE_CLIENTS", REMOTE_CLIENTS)
        if metafunc.definition.get_closest_marker("one_client"):
            clients = clients[:1]
        metafunc.parametrize("remote_client", clients, indirect=True, scope="function")


@pytest.fixture(autouse=True)
def remote_client(request, monkeypatch):
    """The client this test reads through, chosen for the process (and the CLI subprocesses it starts)."""
    client = getattr(request, "param", "obstore")
    monkeypatch.setenv("ARRAYIO_REMOTE_CLIENT", client)
    return client


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


@pytest.fixture(scope="session")
def gcs_server():
    """gcp-storage-emulator on 127.0.0.1 and a free port, with one bucket."""
    pytest.importorskip("gcsfs")
    pytest.importorskip("gcp_storage_emulator")
    server = CountingGcsServer()
    server.start()
    server.create_bucket(BUCKET)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def azurite_server(tmp_path_factory):
    """Azurite's blob service on 127.0.0.1 and a free port, with one container (skips where not installed)."""
    pytest.importorskip("adlfs")
    server = AzuriteServer.find(tmp_path_factory.mktemp("azurite"))
    if server is None:
        pytest.skip("az:// is tested against Azurite, a Node.js program that pip cannot install: it comes "
                    "from PATH or is installed by npm into ~/.cache/arrayio-tests/azurite, and this machine has "
                    "no npm (or npm could not install it)")
    server.start()
    import fsspec

    fsspec.filesystem("az", connection_string=server.connection_string).mkdir(BUCKET)
    yield server
    server.stop()


def _s3_store(s3_server, s3_options, s3_put) -> ObjectStore:
    return ObjectStore("s3", f"s3://{BUCKET}", s3_options, s3_server.counts, s3_put)


def _gs_store(gcs_server) -> ObjectStore:
    import fsspec

    options = {"endpoint_url": gcs_server.endpoint, "token": "anon"}

    def put(name: str, data: bytes) -> str:
        fsspec.filesystem("gs", **options).pipe_file(f"{BUCKET}/{name}", bytes(data))
        return f"gs://{BUCKET}/{name}"
    return ObjectStore("gs", f"gs://{BUCKET}", options, gcs_server.counts, put)


def _az_store(azurite_server) -> ObjectStore:
    import fsspec

    options = {"connection_string": azurite_server.connection_string}
    filesystem = fsspec.filesystem("az", **options)

    def put(name: str, data: bytes) -> str:
        filesystem.pipe_file(f"{BUCKET}/{name}", bytes(data))
        return f"az://{BUCKET}/{name}"
    return ObjectStore("az", f"az://{BUCKET}", options, azurite_server.counts, put)


@pytest.fixture
def object_stores(request) -> Callable[[str], ObjectStore]:
    """The object store of a name, "s3", "gs" or "az" (OBJECT_STORES); its server starts on first use."""
    def get(name: str) -> ObjectStore:
        if name == "s3":
            return _s3_store(request.getfixturevalue("s3_server"), request.getfixturevalue("s3_options"),
                             request.getfixturevalue("s3_put"))
        if name == "gs":
            return _gs_store(request.getfixturevalue("gcs_server"))
        return _az_store(request.getfixturevalue("azurite_server"))
    return get


@pytest.fixture
def object_store(request, object_stores) -> ObjectStore:
    """The object store named by the test's (indirect) parameter."""
    return object_stores(request.param)


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


@pytest.fixture
def fetches_meet(monkeypatch) -> Callable[..., list]:
    """``fetches_meet(thread_prefix="")``: from now on each kdb episode prefetch (``KdbFile.prefetch_episodes``)
    on a thread whose name starts so first waits at a barrier of two; the list it returns gets each arrival's
    number. Two fetches that run side by side meet there; one waiting for the other breaks the barrier
    (BrokenBarrierError, after 5 s), and the list then stays short."""
    import threading

    from arrayio.kdb import KdbFile

    def patch(thread_prefix: str = "") -> list:
        met = threading.Barrier(2, timeout=5)
        arrivals: list = []
        original = KdbFile.prefetch_episodes

        def meet_then_fetch(self, positions, **options):
            if threading.current_thread().name.startswith(thread_prefix):
                arrivals.append(met.wait())
            return original(self, positions, **options)

        monkeypatch.setattr(KdbFile, "prefetch_episodes", meet_then_fetch)
        return arrivals

    return patch
