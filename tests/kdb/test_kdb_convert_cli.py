"""Ingest from robomimic HDF5 and LeRobot folders, export to .npz, and the CLI end to end."""

from __future__ import annotations

import json

import numpy as np
import pytest
from kdb_cases import GOLDEN, gradient_frames, write_lerobot, write_robomimic

import arrayio
from arrayio import kdb
from arrayio.robot import convert

h5py = pytest.importorskip("h5py")
pq = pytest.importorskip("pyarrow.parquet")


def test_ingest_hdf5(tmp_path):
    source = write_robomimic(tmp_path / "robomimic.hdf5")
    target = tmp_path / "out.kdb"
    assert convert.ingest_hdf5(source, target, compress=None, embodiment="panda") == 3
    with kdb.open(target) as f, h5py.File(source, "r") as hdf5:
        for position, demo in enumerate(["demo_0", "demo_1", "demo_10"]):  # numeric order, not lexicographic
            group = hdf5["data"][demo]
            episode = f.read_episode(position)
            np.testing.assert_array_equal(episode.actions, group["actions"][()].astype(np.float32))
            np.testing.assert_array_equal(episode.states, group["states"][()].astype(np.float32))
            np.testing.assert_array_equal(episode.terminals != 0, group["dones"][()] != 0)
            np.testing.assert_array_equal(episode.images["agentview"], group["obs/agentview_image"][()])
            meta = episode.meta
            assert (meta.task, meta.embodiment, meta.success, meta.total_reward) == ("Lift", "panda", True, 1.0)
            assert episode.images.cameras == ["agentview", "robot0_eye_in_hand"]


def test_ingest_hdf5_skips_empty_demos_and_groups(tmp_path):
    source = write_robomimic(tmp_path / "robomimic.hdf5", demos=2)
    with h5py.File(source, "a") as hdf5:
        hdf5["data/demo_5/actions"] = np.zeros((0, 7))
        hdf5["data/demo_1/obs"].create_group("nested")
    with pytest.warns(RuntimeWarning, match="HDF5: data/demo_5 has no frames"):
        assert convert.ingest_hdf5(source, tmp_path / "out.kdb", compress="png") == 2
    assert arrayio.info(tmp_path / "out.kdb")["cameras"] == ["agentview", "robot0_eye_in_hand"]


def test_ingest_lerobot(tmp_path):
    source = write_lerobot(tmp_path / "lerobot", episodes=2, frames=4)
    target = tmp_path / "out.kdb"
    assert convert.ingest_lerobot(source, target) == 2
    table = pq.read_table(source / "data" / "chunk-000" / "episode_000001.parquet").to_pydict()
    with kdb.open(target) as f:
        episode = f.read_episode(1)
        assert (episode.meta.fps, episode.meta.embodiment, episode.meta.task) == (15.0, "koch", "stack the cubes 1")
        np.testing.assert_array_equal(episode.states, np.array(table["observation.state"], np.float32))
        np.testing.assert_array_equal(episode.actions, np.array(table["action"], np.float32))
        assert episode.terminals.tolist() == [0, 0, 0, 0, 1]
        assert bytes(episode.images.raw(2, "top")) == table["observation.images.top"][2]["bytes"]
        np.testing.assert_array_equal(episode.images["top"], gradient_frames(5, 10, 14, shift=20))


def test_export_npz(sample, tmp_path):
    target = tmp_path / "out.npz"
    assert convert.export_npz(sample, target) == 3
    with np.load(target) as archive, kdb.open(sample) as f:
        episode = f.read_episode(2)
        np.testing.assert_array_equal(archive["episode_2.states"], episode.states)
        np.testing.assert_array_equal(archive["episode_2.images.wrist"], episode.images["wrist"])
        assert json.loads(str(archive["episodes.json"]))[1]["task"] == "task 1"


def test_cli_generic_verbs(cli, sample, tmp_path):
    result = cli("info", sample)
    assert result.returncode == 0 and b"format: kdb" in result.stdout and b"3 episodes, 21 frames" in result.stdout
    assert cli("validate", sample).returncode == 0
    listing = cli("ls", "-l", sample)
    header, *rows = listing.stdout.decode().splitlines()
    assert listing.returncode == 0 and header.split()[0] == "NUM_FRAMES" and header.endswith("NAME")
    assert [row.split()[-1] for row in rows] == ["0", "1", "2"]
    lines = cli("cat", sample, "2").stdout.decode().splitlines()
    assert lines[0].startswith("# episode 2") and len(lines) == 10
    bad = tmp_path / "bad.kdb"
    bad.write_bytes(GOLDEN[:100] + GOLDEN[101:])
    result = cli("validate", bad)
    assert result.returncode == 1 and b"index" in result.stdout
    assert cli("cat", sample, "9").returncode == 1


def test_cli_kdb_group(cli, tmp_path):
    hdf5 = write_robomimic(tmp_path / "r.hdf5")
    out = tmp_path / "r.kdb"
    result = cli("kdb", "ingest-hdf5", hdf5, out, "--embodiment", "panda")
    assert result.returncode == 0, result.stderr
    assert kdb.validate(out) == [] and arrayio.info(out)["embodiments"] == ["panda"]
    lerobot = write_lerobot(tmp_path / "lr")
    assert cli("kdb", "ingest-lerobot", lerobot, tmp_path / "l.kdb").returncode == 0
    assert arrayio.info(tmp_path / "l.kdb")["num_episodes"] == 2
    assert cli("kdb", "export", out, tmp_path / "r.npz").returncode == 0
    png = tmp_path / "episode.png"
    result = cli("kdb", "show", out, "2", "--png", png)
    assert result.returncode == 0, result.stderr
    assert b"camera 'agentview'" in result.stdout and png.read_bytes().startswith(b"\x89PNG")
    missing = cli("kdb", "show", out, "7")
    assert missing.returncode == 1 and b"episode 7" in missing.stderr
    broken = cli("kdb", "ingest-lerobot", tmp_path, tmp_path / "x.kdb")
    assert broken.returncode == 1 and b"parquet" in broken.stderr


@pytest.mark.parametrize(("flag", "value"), [("--fps", "nan"), ("--fps", "0"), ("--fps", "-5"), ("--fps", "inf"),
                                             ("--tolerance-s", "nan"), ("--tolerance-s", "-1"),
                                             ("--tolerance-s", "inf")])
def test_ingest_refuses_a_frame_rate_or_tolerance_that_is_not_a_finite_number(cli, tmp_path, flag, value):
    # Before, --fps nan/0/-5/inf wrote episodes with that fps, and a NaN or negative tolerance failed at the
    # first video frame with a message about the video.
    lerobot = write_lerobot(tmp_path / "lr")
    out = tmp_path / "l.kdb"
    out.write_bytes(b"kept")
    result = cli("kdb", "ingest-lerobot", lerobot, out, flag, value, "--force")
    name = flag.lstrip("-").replace("-", "_")
    assert result.returncode == 1 and f"{name} must be a finite number".encode() in result.stderr, result.stderr
    assert out.read_bytes() == b"kept"
    if flag == "--fps":
        with pytest.raises(ValueError, match="fps must be a finite number > 0"):
            convert.ingest_hdf5(write_robomimic(tmp_path / "r.hdf5"), tmp_path / "r.kdb", fps=float(value))
        assert not (tmp_path / "r.kdb").exists()


def test_ingest_hdf5_of_a_file_that_is_not_hdf5_names_it(cli, sample, tmp_path):
    # Before: "arrayio: Unable to synchronously open file (file signature not found)", naming no file.
    result = cli("kdb", "ingest-hdf5", sample, tmp_path / "x.kdb")
    assert result.returncode == 1 and b"sample.kdb: HDF5: not an HDF5 file" in result.stderr, result.stderr
    assert not (tmp_path / "x.kdb").exists()


@pytest.mark.parametrize(("change", "words"), [
    (lambda data: data.create_dataset("demo_7", data=np.zeros(3)), "data/demo_7 is a dataset, not a demo group"),
    (lambda data: data["demo_1"].__delitem__("states") or data["demo_1"].create_dataset("states", data=[b"a"] * 5),
     "demo_1/states holds |S1 values, not numbers"),
    (lambda data: data["demo_0"].__delitem__("rewards") or data["demo_0"].create_dataset("rewards",
                                                                                          data=np.zeros((5, 2))),
     r"demo_0/rewards has shape \(5, 2\); one value per frame"),
    # Before: plain ValueErrors that named the demo but not the file, and "kdb:" (the output's format).
    (lambda data: data["demo_1"].__delitem__("actions"), "HDF5: data/demo_1 has no 'actions' dataset"),
    (lambda data: data["demo_0"].__delitem__("states") or data["demo_0"].create_dataset("states",
                                                                                         data=np.zeros((4, 9))),
     "HDF5: data/demo_0 state part 0 has 4 rows, actions has 5"),
    (lambda data: data["demo_0/obs"].__delitem__("agentview_image") or data["demo_0/obs"].create_dataset(
        "agentview_image", data=np.zeros((3, 12, 12, 3), np.uint8)),
     "HDF5: data/demo_0/obs/agentview has 3 frames, actions has 5"),
    (lambda data: data.file.move("data", "other"), "HDF5: no 'data' group"),
])
def test_ingest_hdf5_names_the_demo_and_dataset_it_cannot_read(tmp_path, change, words):
    # Before: AttributeError ('Dataset' object has no attribute 'get'), "could not convert string to float",
    # and "rewards has 10 rows" for a (5, 2) array.
    source = write_robomimic(tmp_path / "r.hdf5")
    with h5py.File(source, "a") as hdf5:
        change(hdf5["data"])
    with pytest.raises(arrayio.FormatError, match=words) as caught:
        convert.ingest_hdf5(source, tmp_path / "r.kdb")
    assert caught.value.file == str(source)  # before: the demo and dataset, not the file that holds them
    assert not (tmp_path / "r.kdb").exists()
