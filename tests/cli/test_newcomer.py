"""What a newcomer hit (issue 20), item by item: each stumble, reproduced, is now a test."""

from __future__ import annotations

import json
import socket

import numpy as np
import pytest

from arrayio import kastore, kdb
from arrayio._registry import module_for


@pytest.fixture(scope="module")
def demos(tmp_path_factory):
    folder = tmp_path_factory.mktemp("demos")
    return {name: module_for(name).demo(folder) for name in ("kastore", "bloscpack", "kdb", "pycauset")}


def test_validate_names_the_file_once(tmp_path, invoke):
    empty = tmp_path / "empty.kas"
    empty.write_bytes(b"")
    code, out, _err = invoke("validate", empty)
    assert code == 1
    assert out == f"{empty}: not a file of any known format (magic bytes none)\n"


def test_cat_of_an_unknown_key_names_the_file_and_its_keys(demos, invoke):
    code, _out, err = invoke("cat", demos["kastore"], "nosuchkey")
    assert code == 1
    assert err.startswith(f"arrayio: {demos['kastore']}: no such entry: 'nosuchkey'; its entries: float32, float64, ")
    assert err.count("\n") == 1


def test_kdb_stats_and_map_print_a_json_error_object(tmp_path, invoke):
    for argv in (("kdb", "stats", tmp_path / "none.kdb", "--json"), ("map", tmp_path / "none.kas", "--json")):
        code, out, err = invoke(*argv)
        assert code == 1
        assert json.loads(out)["error"]["message"] == err.removeprefix("arrayio: ").rstrip("\n")


def test_a_directory_exits_1_from_every_reading_verb(tmp_path, invoke):
    for verb in ("info", "ls", "validate", "map"):
        code, _out, err = invoke(verb, tmp_path)
        assert code == 1, (verb, err)


def test_kdb_show_and_map_read_urls_with_storage_options(demos, invoke):
    fsspec = pytest.importorskip("fsspec")
    with fsspec.open("memory://newcomer/demo.kdb", "wb") as handle:
        handle.write(demos["kdb"].read_bytes())
    with fsspec.open("memory://newcomer/demo.kas", "wb") as handle:
        handle.write(demos["kastore"].read_bytes())
    code, out, err = invoke("kdb", "show", "memory://newcomer/demo.kdb", "1",
                            "--storage-option", "skip_instance_cache=false")
    assert code == 0, err
    assert out.startswith("episode 1 (position 1): 6 frames")
    code, out, err = invoke("map", "memory://newcomer/demo.kas", "--json",
                            "--storage-option", "skip_instance_cache=false")
    assert code == 0, err
    assert json.loads(out)["size"] == demos["kastore"].stat().st_size


def test_conversion_warnings_are_one_arrayio_line(demos, tmp_path, cli):
    result = cli("convert", demos["pycauset"], tmp_path / "matrix.npy")
    assert result.returncode == 0
    lines = result.stderr.decode().splitlines()
    assert lines and all(line.startswith("arrayio: warning: ") for line in lines), lines
    # the warning names what is lost: the container's metadata and its properties
    assert "npy keeps no attributes" in lines[0] and '"metadata"' in lines[0] and "properties" in lines[0]


def test_kdb_filter_that_keeps_nothing_says_so_and_writes_nothing(demos, tmp_path, invoke):
    target = tmp_path / "kept.kdb"
    code, _out, err = invoke("kdb", "filter", demos["kdb"], target, "--task", "no such task")
    assert code == 1
    assert err == (f"arrayio: kdb filter: none of the 3 episodes of {demos['kdb']} meets the conditions; "
                   f"{target} was not written\n")
    assert not target.exists()


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_kdb_stats_of_an_unreachable_s3_glob_is_one_line(cli):
    pytest.importorskip("s3fs")
    result = cli("kdb", "stats", "s3://bucket/shards/*.kdb", "--storage-option", "anon=true",
                 "--storage-option", f"client_kwargs.endpoint_url=http://127.0.0.1:{_closed_port()}",
                 "--storage-option", "config_kwargs.retries.max_attempts=1")
    assert result.returncode == 1
    lines = result.stderr.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith("arrayio: s3://bucket/shards/*.kdb: cannot list ("), lines


def test_an_unexpected_error_is_one_line_and_debug_shows_the_traceback(demos, cli, monkeypatch, tmp_path):
    # a bug, forced: a sitecustomize that breaks the keyed stores' info of this process
    (tmp_path / "sitecustomize.py").write_text(
        "import arrayio._keyed\narrayio._keyed.Store.info = lambda self, key=None: 1 / 0\n", encoding="utf-8")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    result = cli("info", demos["kastore"])
    assert result.returncode == 1
    assert result.stderr.decode().splitlines() == [
        "arrayio: unexpected ZeroDivisionError: division by zero (run with --debug for the traceback, and please "
        "report it)"]
    debug = cli("--debug", "info", demos["kastore"])
    assert debug.returncode == 1 and "Traceback" in debug.stderr.decode()


def test_export_lerobot_with_av1_prints_no_encoder_banner(demos, tmp_path, cli):
    pytest.importorskip("av")
    pytest.importorskip("pyarrow")
    result = cli("kdb", "export-lerobot", demos["kdb"], tmp_path / "lerobot")
    assert result.returncode == 0, result.stderr
    assert result.stderr.decode() == ""
    assert (tmp_path / "lerobot" / "meta" / "info.json").exists()


def test_bloscpack_force_works_after_the_subcommand_too(tmp_path, invoke):
    data = tmp_path / "x.dat"
    data.write_bytes(np.arange(10_000, dtype=np.int64).tobytes())
    assert invoke("bloscpack", "compress", data)[0] == 0
    assert invoke("bloscpack", "compress", data)[0] == 1  # exists
    assert invoke("bloscpack", "compress", "-f", data)[0] == 0
    assert invoke("bloscpack", "-f", "compress", data)[0] == 0
    assert invoke("blpk", "c", "--force", data)[0] == 0


def test_convert_to_a_trees_file_writes_kastore(demos, tmp_path, invoke):
    pytest.importorskip("zarr")
    store = tmp_path / "sim.zarr"
    assert invoke("convert", demos["kastore"], store)[0] == 0
    code, out, err = invoke("convert", store, tmp_path / "back.trees")
    assert code == 0, err
    assert out.endswith("(kastore)\n")
    with kastore.load(tmp_path / "back.trees") as store, kastore.load(demos["kastore"]) as original:
        assert all(np.array_equal(store[key], original[key]) for key in original)


def test_cat_prints_byte_text_and_json_as_text_and_numbers_on_request(tmp_path, invoke):
    path = tmp_path / "text.kas"
    kastore.dump({"format/name": np.frombuffer(b"tskit.trees", np.int8),
                  "metadata": np.frombuffer(b'{"description": "a run", "seed": 7}', np.uint8),
                  "bytes": np.arange(5, dtype=np.uint8)}, path)
    assert invoke("cat", path, "format/name")[1] == "tskit.trees\n"
    assert invoke("cat", path, "format/name", "--numbers")[1].splitlines()[:3] == ["116", "115", "107"]
    assert json.loads(invoke("cat", path, "metadata")[1]) == {"description": "a run", "seed": 7}
    assert invoke("cat", path, "metadata")[1].splitlines()[1] == '  "description": "a run",'
    assert invoke("cat", path, "bytes")[1] == "0\n1\n2\n3\n4\n"  # not text: numbers


def test_cat_of_a_tskit_file_prints_its_format_name(tmp_path, invoke):
    msprime = pytest.importorskip("msprime")
    path = tmp_path / "sim.trees"
    msprime.sim_ancestry(4, sequence_length=1000, random_seed=1).dump(path)
    assert invoke("cat", path, "format/name")[1] == "tskit.trees\n"


def test_info_ls_cat_of_the_npy_npz_and_zarr_that_convert_writes(demos, tmp_path, invoke):
    pytest.importorskip("zarr")
    written = {}
    for source, target in ((demos["kastore"], "keys.npz"), (demos["bloscpack"], "array.npy"),
                           (demos["bloscpack"], "array.zarr")):
        written[target] = tmp_path / target
        assert invoke("convert", source, written[target])[0] == 0
    facts = json.loads(invoke("info", written["keys.npz"], "--json")[1])
    assert facts["format"] == "npz" and facts["num_arrays"] == 11
    rows = json.loads(invoke("ls", written["keys.npz"], "--json")[1])
    assert {"name": "int32", "dtype": "int32", "shape": [5], "nbytes": 20} in rows
    assert invoke("cat", written["keys.npz"], "int32")[1] == "0\n1\n2\n3\n4\n"
    facts = json.loads(invoke("info", written["array.npy"], "--json")[1])
    assert (facts["format"], facts["shape"], facts["dtype"]) == ("npy", [512, 8], "float64")
    assert invoke("cat", written["array.npy"], "array")[1].splitlines()[:2] == ["0.0", "1.0"]
    facts = json.loads(invoke("info", written["array.zarr"], "--json")[1])
    assert facts["format"] == "zarr" and facts["items"][0]["shape"] == [512, 8]
    assert invoke("ls", written["array.zarr"])[1] == "array\n"
    lines = invoke("cat", written["array.zarr"], "array")[1].splitlines()
    assert len(lines) == 512 * 8 and lines[:2] == ["0.0", "1.0"]
    code, _out, err = invoke("cat", written["array.npy"], "nope")
    assert code == 1 and "its entries: array" in err
    numpy_written = tmp_path / "numpy.npz"  # one that numpy wrote: compressed, a Fortran-order member, text bytes
    np.savez_compressed(numpy_written, big=np.arange(300_000), fortran=np.asfortranarray(np.arange(6).reshape(2, 3)),
                        note=np.frombuffer(b"made by numpy", np.uint8))
    lines = invoke("cat", numpy_written, "big")[1].splitlines()
    assert len(lines) == 300_000 and lines[-1] == "299999"
    assert invoke("cat", numpy_written, "fortran")[1].split() == ["0", "3", "1", "4", "2", "5"]  # storage order
    assert invoke("cat", numpy_written, "note")[1] == "made by numpy\n"
    broken = tmp_path / "broken.npy"
    broken.write_bytes(written["array.npy"].read_bytes()[:20])
    code, _out, err = invoke("info", broken)
    assert code == 1 and err.startswith(f"arrayio: {broken}: not a readable .npy file")


def test_kdb_writer_refuses_channels_first_images_and_takes_them_with_layout_chw(tmp_path):
    states = np.zeros((4, 3), np.float32)
    chw = np.random.default_rng(1).integers(0, 256, (4, 3, 16, 20), dtype=np.uint8)
    with pytest.raises(ValueError, match=r"looks channels-first .*transpose\(0, 2, 3, 1\).*layout='chw'"):
        with kdb.Writer(tmp_path / "refused.kdb") as writer:
            writer.add_episode(states, states, images={"front": chw})
    assert not (tmp_path / "refused.kdb").exists()
    with kdb.Writer(tmp_path / "chw.kdb", layout="chw") as writer:
        writer.add_episode(states, states, images={"front": chw})
        writer.begin_episode(state_dim=3, action_dim=3)
        writer.add_frame(states[0], states[0], images={"front": chw[0]})
        writer.end_episode()
    with kdb.open(tmp_path / "chw.kdb") as reader:
        assert np.array_equal(reader.read_episode(0).images["front"], chw.transpose(0, 2, 3, 1))
        assert np.array_equal(reader.read_episode(1).images["front"][0], chw[0].transpose(1, 2, 0))
    hwc = chw.transpose(0, 2, 3, 1)  # (4, 16, 20, 3): channels last, as kdb stores it
    with kdb.Writer(tmp_path / "hwc.kdb") as writer:
        writer.add_episode(states, states, images={"front": hwc})
    with pytest.raises(ValueError, match="layout must be one of"):
        kdb.Writer(tmp_path / "bad.kdb", layout="cwh")
