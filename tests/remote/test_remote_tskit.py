"""Tree sequences and tszip files from http:// (the range server) and s3:// (moto): equal to the local read,
with request and byte bounds counted by the servers themselves."""

from __future__ import annotations

import json

import pytest

tskit = pytest.importorskip("tskit")
pytest.importorskip("msprime")
tszip = pytest.importorskip("tszip")

import tree_sequences  # noqa: E402

import arrayio  # noqa: E402
from arrayio import tskit as arrayio_tskit  # noqa: E402

BACKENDS = ["http", "s3"]
HEAD = 64 << 10  # the read-ahead of the first request


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict:
    """A 2.4 MB msprime tree sequence (tables far larger than the read-ahead) and its tszip form."""
    folder = tmp_path_factory.mktemp("remote-trees")
    trees = folder / "mid.trees"
    tree_sequences.simulated(samples=200, length=5e6, seed=3).dump(trees)
    tsz = folder / "mid.tsz"
    arrayio_tskit.to_tszip(trees, tsz, chunk=1 << 16)
    return {"trees": trees, "tsz": tsz}


@pytest.fixture(scope="module")
def large(tmp_path_factory):
    """A 5 MB msprime tree sequence with 2000 provenance records and 300 kB of top-level metadata: its
    top-level keys lie in four places hundreds of kB apart (after the edges, the individuals, the provenances
    and the sites, as tskit sorts its keys), so no read-ahead or joining of near ranges reaches them all."""
    tables = tree_sequences.simulated(samples=300, length=1e7, seed=5).dump_tables()
    tables.metadata_schema = tskit.MetadataSchema({"codec": "json"})
    tables.metadata = {"notes": "x" * 300_000}
    for index in range(2000):
        tables.provenances.add_row(record=json.dumps({"step": index, "parameters": "y" * 200}),
                                   timestamp="2026-11-26T09:00:00")
    path = tmp_path_factory.mktemp("remote-large-trees") / "large.trees"
    tables.tree_sequence().dump(path)
    return path


@pytest.fixture
def serve(request, files):
    """(url, storage_options, counts) of a file on a backend, counts reset."""
    def put(name: str, backend: str):
        data = files[name].read_bytes()
        if backend == "http":
            server = request.getfixturevalue("http_server")
            url, options, counts = server.put(f"w23-{files[name].name}", data), {}, server.counts
        else:
            store = request.getfixturevalue("object_stores")(backend)
            url, options, counts = store.put(f"w23-{files[name].name}", data), store.options, store.counts
        counts.reset()
        return url, options, counts
    return put


@pytest.mark.parametrize("backend", BACKENDS)
def test_info_over_a_url_reads_the_index_and_small_keys(serve, files, backend):
    url, options, counts = serve("trees", backend)
    remote = arrayio_tskit.info(url, storage_options=options)
    local = arrayio_tskit.info(files["trees"])
    assert remote == local
    requests, sent = counts.total()
    size = files["trees"].stat().st_size
    assert requests <= 4
    assert sent < size // 5  # the tables themselves (the bulk of the file) are never fetched


@pytest.mark.parametrize("backend", BACKENDS)
def test_load_over_a_url_equals_tskit_load(serve, files, backend):
    url, options, counts = serve("trees", backend)
    loaded = arrayio_tskit.load(url, storage_options=options)
    loaded.tables.assert_equals(tskit.load(files["trees"]).tables)
    requests, sent = counts.total()
    size = files["trees"].stat().st_size
    # the head, format/name (a run of its own in this file), then the file in parallel 8 MiB parts
    assert requests <= 2 + -(-size // (8 << 20))
    assert sent <= size + 2 * HEAD


@pytest.mark.parametrize("backend", BACKENDS)
def test_metadata_only_over_a_url_in_three_requests(serve, files, backend):
    url, options, counts = serve("trees", backend)
    loaded = arrayio_tskit.load(url, storage_options=options, skip_tables=True)
    loaded.tables.assert_equals(tskit.load(files["trees"], skip_tables=True).tables)
    requests, sent = counts.total()
    assert requests <= 3
    assert sent < files["trees"].stat().st_size // 5


def test_a_subset_of_tables_fetches_only_their_columns(serve, files):
    url, options, counts = serve("trees", "http")
    nodes = arrayio_tskit.load(url, tables=["nodes"])
    nodes.nodes.assert_equals(tskit.load(files["trees"]).tables.nodes)
    _requests, sent = counts.total()
    assert sent < files["trees"].stat().st_size // 3


@pytest.mark.parametrize("backend", BACKENDS)
def test_tsz_over_a_url(serve, files, backend):
    url, options, counts = serve("tsz", backend)
    facts = arrayio.info(url, storage_options=options)
    assert facts["format"] == "tszip" and facts["columns"]
    requests, _sent = counts.total()
    assert requests <= 3
    counts.reset()
    tree_sequence = arrayio_tskit.from_tszip(url, storage_options=options)
    tree_sequence.tables.assert_equals(tskit.load(files["trees"]).tables)
    requests, sent = counts.total()
    size = files["tsz"].stat().st_size
    assert requests <= 5 and sent <= 2 * size + 2 * HEAD


def test_cli_info_of_a_url(serve, cli):
    url, _options, counts = serve("trees", "http")
    result = cli("info", url, "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["tables"]["edges"]["rows"] > 1000
    assert counts.total()[0] <= 4


def test_an_object_replaced_while_loading_is_named_not_mixed(request, files):
    from arrayio import RemoteFile
    from arrayio.errors import ObjectChangedError

    server = request.getfixturevalue("http_server")
    url = server.put("w23-replaced.trees", files["trees"].read_bytes())
    remote = RemoteFile(url)
    assert remote.size == files["trees"].stat().st_size  # opened: size and ETag learned
    server.put("w23-replaced.trees", files["trees"].read_bytes()[::-1])  # same size, other bytes and ETag
    with pytest.raises(ObjectChangedError, match="changed"):
        arrayio_tskit.load(remote)


def test_metadata_of_a_large_file_over_http_in_at_most_three_requests(request, large, cli, remote_client):
    """The head, then every small key (and the last provenance record) in one several-range GET, whichever
    client reads: tskit.load(skip_tables=True), info and `arrayio info` alike (five requests and more before)."""
    server = request.getfixturevalue("http_server")
    url = server.put("w23-large.trees", large.read_bytes())
    server.counts.reset()
    loaded = arrayio_tskit.load(url, skip_tables=True)
    loaded.tables.assert_equals(tskit.load(large, skip_tables=True).tables)
    assert server.counts.total()[0] <= 3
    server.counts.reset()
    assert arrayio_tskit.info(url) == arrayio_tskit.info(large)
    requests, sent = server.counts.total()
    assert requests <= 3 and sent < large.stat().st_size // 5
    server.counts.reset()
    result = cli("info", url, "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["provenances"]["count"] == tskit.load(large).num_provenances
    assert server.counts.total()[0] <= 3


def test_metadata_of_a_large_file_from_an_object_store(serve, request, large):
    """S3 answers one range a GET, so the floor is the head plus one request per place the small keys lie
    (four in a tskit file whose tables are large); the last provenance record comes with them."""
    store = request.getfixturevalue("object_stores")("s3")
    url = store.put("w23-large.trees", large.read_bytes())
    store.counts.reset()
    loaded = arrayio_tskit.load(url, storage_options=store.options, skip_tables=True)
    loaded.tables.assert_equals(tskit.load(large, skip_tables=True).tables)
    assert store.counts.total()[0] <= 5
    store.counts.reset()
    assert arrayio_tskit.info(url, storage_options=store.options) == arrayio_tskit.info(large)
    assert store.counts.total()[0] <= 5 + 3  # and the metadata schemas of the tables, each amid its columns


def test_a_server_without_several_ranges_is_read_one_range_a_request(large):
    """A server that answers several ranges with the whole object (as many do): the answer is dropped
    unread, the server remembered, and the small keys fetched one range a request from then on."""
    from remote_servers import RangeServer

    server = RangeServer()
    server.several_ranges = False
    server.start()
    try:
        url = server.put("w23-single.trees", large.read_bytes())
        loaded = arrayio_tskit.load(url, skip_tables=True)
        loaded.tables.assert_equals(tskit.load(large, skip_tables=True).tables)
        assert server.counts.total()[0] <= 6  # the head, the refused GET, one per place the keys lie
        server.counts.reset()
        assert arrayio_tskit.info(url) == arrayio_tskit.info(large)
        assert server.counts.total()[0] <= 8  # never asks several ranges again
    finally:
        server.stop()


@pytest.mark.parametrize("kind", sorted(tree_sequences.SLIM_FILES))
def test_slim_written_files_over_http(request, kind):
    """What SLiM wrote (its metadata schemas and provenance) reads the same over a URL as from the path."""
    path = tree_sequences.SLIM_FILES[kind]
    server = request.getfixturevalue("http_server")
    url = server.put(f"w23-{path.name}", path.read_bytes())
    server.counts.reset()
    assert arrayio_tskit.info(url) == arrayio_tskit.info(path)
    assert server.counts.total()[0] <= 3
    arrayio_tskit.load(url).tables.assert_equals(tskit.load(path).tables)
    arrayio_tskit.load(url, skip_tables=True).tables.assert_equals(tskit.load(path, skip_tables=True).tables)
