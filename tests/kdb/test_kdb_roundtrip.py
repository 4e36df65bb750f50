"""Round trips through our writer and reader (hypothesis), the writer's refusals, atomicity,
lookup by id, frame access and the registry protocol."""

from __future__ import annotations

import io
import os
import struct

import numpy as np
import pytest
from kdb_cases import gradient_frames, write_sample
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image

import arrayio
from arrayio import kdb
from arrayio._names import _problem
from arrayio.kdb._records import HEADER, INDEX_ENTRY

names = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
# Camera names become folder and member names in every export: the Writer refuses those no reader could map.
camera_names = names.filter(lambda name: _problem(name) is None)


@st.composite
def episodes(draw):
    frames = draw(st.integers(1, 6))
    state_dim = draw(st.integers(0, 5))
    action_dim = draw(st.integers(0, 4))
    floats = st.floats(-1e6, 1e6, width=32, allow_nan=False)
    states = np.array(draw(st.lists(st.lists(floats, min_size=state_dim, max_size=state_dim),
                                    min_size=frames, max_size=frames)), np.float32).reshape(frames, state_dim)
    actions = np.array(draw(st.lists(st.lists(floats, min_size=action_dim, max_size=action_dim),
                                     min_size=frames, max_size=frames)), np.float32).reshape(frames, action_dim)
    cameras = draw(st.lists(camera_names, max_size=3, unique=True))
    images = {}
    for number, camera in enumerate(cameras):
        channels = draw(st.sampled_from([1, 3, 4]))
        height, width = draw(st.integers(1, 9)), draw(st.integers(1, 9))
        seed = draw(st.integers(0, 2**16))
        pixels = np.random.default_rng(seed).integers(0, 256, (frames, height, width, channels), dtype=np.uint8)
        images[camera] = pixels[..., 0] if channels == 1 and number % 2 else pixels
    return dict(states=states, actions=actions,
                rewards=np.array(draw(st.lists(floats, min_size=frames, max_size=frames)), np.float32),
                terminals=np.array(draw(st.lists(st.booleans(), min_size=frames, max_size=frames))),
                images=images, embodiment=draw(names), task=draw(names), fps=draw(floats),
                success=draw(st.sampled_from([None, True, False])),
                total_reward=draw(st.one_of(st.none(), floats)))


def check_equal(episode, given_episode, lossless=True):
    np.testing.assert_array_equal(episode.states, given_episode["states"])
    np.testing.assert_array_equal(episode.actions, given_episode["actions"])
    np.testing.assert_array_equal(episode.rewards, given_episode["rewards"])
    np.testing.assert_array_equal(episode.terminals != 0, given_episode["terminals"])
    meta = episode.meta
    assert (meta.embodiment, meta.task, meta.success) == (given_episode["embodiment"], given_episode["task"],
                                                          given_episode["success"])
    assert meta.fps == np.float32(given_episode["fps"])
    assert meta.total_reward == (None if given_episode["total_reward"] is None
                                 else np.float32(given_episode["total_reward"]))
    assert episode.images.cameras == list(given_episode["images"])
    for camera, pixels in given_episode["images"].items():
        stored = episode.images[camera]
        expected = pixels if pixels.ndim == 4 else pixels[..., None]
        assert stored.shape == expected.shape
        if lossless:
            np.testing.assert_array_equal(stored, expected)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(episodes(), min_size=1, max_size=3), st.sampled_from([None, "png", "jpeg"]))
def test_round_trip(tmp_path, given_episodes, compress):
    path = tmp_path / "rt.kdb"
    with kdb.Writer(path, compress=compress) as writer:
        for given_episode in given_episodes:
            writer.add_episode(**given_episode)
    with kdb.open(path) as f:
        assert len(f) == len(given_episodes)
        assert f.num_frames == sum(len(e["states"]) for e in given_episodes)
        for position, given_episode in enumerate(given_episodes):
            check_equal(f.read_episode(position), given_episode, lossless=compress != "jpeg")
    assert kdb.validate(path) == []


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(episodes())
def test_streaming_and_whole_episode_bytes_agree(tmp_path, given_episode):
    whole, streamed = tmp_path / "whole.kdb", tmp_path / "streamed.kdb"
    with kdb.Writer(whole, created_timestamp=5) as writer:
        writer.add_episode(**given_episode)
    with kdb.Writer(streamed, created_timestamp=5) as writer:
        writer.begin_episode(state_dim=given_episode["states"].shape[1],
                             action_dim=given_episode["actions"].shape[1],
                             embodiment=given_episode["embodiment"], task=given_episode["task"],
                             fps=given_episode["fps"], success=given_episode["success"],
                             total_reward=given_episode["total_reward"])
        for t in range(len(given_episode["states"])):
            writer.add_frame(given_episode["states"][t], given_episode["actions"][t],
                             reward=given_episode["rewards"][t], terminal=given_episode["terminals"][t],
                             images={camera: pixels[t] for camera, pixels in given_episode["images"].items()})
        writer.end_episode()
    assert whole.read_bytes() == streamed.read_bytes()


def test_jpeg_round_trip_is_close(tmp_path):
    frames = gradient_frames(4, 32, 40)
    path = tmp_path / "j.kdb"
    with kdb.Writer(path, compress="jpeg", quality=95) as writer:
        writer.add_episode(np.zeros((4, 1)), np.zeros((4, 1)), images={"cam": frames, "gray": frames[..., 0]})
    with kdb.open(path) as f:
        images = f.read_episode(0).images
        assert all(record.compressed for record in images.records(0))
        assert np.abs(np.asarray(images["cam"]).astype(int) - frames).mean() < 4
        assert images["gray"].shape == (4, 32, 40, 1)
        assert len(images.raw(0, "cam")) < frames[0].nbytes


def test_encoded_images_are_stored_as_given(tmp_path):
    out = io.BytesIO()
    Image.fromarray(gradient_frames(1, 6, 7)[0]).save(out, format="PNG")
    png = out.getvalue()
    path = tmp_path / "e.kdb"
    with kdb.Writer(path) as writer:
        writer.add_episode(np.zeros((1, 2)), np.zeros((1, 2)), images={"c": [kdb.EncodedImage(png, "png")]})
    with kdb.open(path) as f:
        record = f.image_records(0, 0)[0]
        assert (record.width, record.height, record.channels, record.compressed) == (7, 6, 3, True)
        assert bytes(f.read_episode(0).images.raw(0, "c")) == png
        np.testing.assert_array_equal(f.read_frame(0, 0).images["c"], gradient_frames(1, 6, 7)[0])


def test_encoded_image_must_be_what_it_says():
    out = io.BytesIO()
    Image.fromarray(gradient_frames(1, 4, 4)[0]).save(out, format="PNG")
    with pytest.raises(ValueError, match="stated as jpeg holds png"):
        kdb.EncodedImage(out.getvalue(), "jpeg").with_dimensions()
    with pytest.raises(ValueError, match="encoding must be one of"):
        kdb.EncodedImage(out.getvalue(), "gif")


def test_writer_to_a_file_object_and_reader_from_bytes():
    stream = io.BytesIO()
    with kdb.Writer(stream) as writer:
        writer.add_episode(np.ones((3, 2)), np.zeros((3, 1)), task="in memory")
    with kdb.open(stream.getvalue()) as f:
        assert f.read_meta(0).task == "in memory" and f.read_episode(0).states.sum() == 6
    stream.seek(0)
    with kdb.open(stream) as f:
        assert not f.source.is_mapped and f.read_frame(0, 2).state.tolist() == [1.0, 1.0]


def test_raw_pixels_that_look_like_jpeg_stay_raw(tmp_path):
    pixels = np.zeros((1, 2, 2, 3), np.uint8)
    pixels[0, 0, 0] = (0xFF, 0xD8, 0xFF)  # the reference sniffs this as a JPEG and loses the frame
    path = tmp_path / "s.kdb"
    with kdb.Writer(path) as writer:
        writer.add_episode(np.zeros((1, 1)), np.zeros((1, 1)), images={"c": pixels})
    with kdb.open(path) as f:
        np.testing.assert_array_equal(f.read_episode(0).images["c"], pixels)


@pytest.mark.parametrize("call, message", [
    (lambda w: w.add_episode([[1.0, 2.0], [3.0]], [[0.0], [0.0]]), "ragged"),
    (lambda w: w.add_episode(np.zeros((2, 2)), np.zeros((3, 1))), "actions has 3 frames"),
    (lambda w: w.add_episode(np.zeros((0, 2)), np.zeros((0, 1))), "at least one frame"),
    (lambda w: w.add_episode(np.zeros(3), np.zeros((3, 1))), "must be \\(frames, dim\\)"),
    (lambda w: w.add_episode(np.zeros((1, 70000)), np.zeros((1, 1))), "state_dim = 70000"),
    (lambda w: w.add_episode(np.zeros((1, 1)), np.zeros((1, 1)), task="x" * 70000), "task is 70000"),
    (lambda w: w.add_episode(np.zeros((1, 1)), np.zeros((1, 1)), embodiment="é" * 40000), "embodiment"),
    (lambda w: w.add_episode(np.zeros((1, 1)), np.zeros((1, 1)), rewards=[1, 2]), "rewards must have shape"),
    (lambda w: w.add_episode(np.zeros((1, 1)), np.zeros((1, 1)), fps=1e40), "fps"),
    (lambda w: w.add_episode(np.full((1, 1), 1e39), np.zeros((1, 1))), "beyond the 32-bit float range"),
    (lambda w: w.add_episode(np.zeros((1, 1)), np.zeros((1, 1)), rewards=[-1e300]), "rewards holds"),
    (lambda w: w.add_episode([["a"]], np.zeros((1, 1))), "numeric"),
    (lambda w: w.add_episode(np.zeros((1, 1)), np.zeros((1, 1)), images={"c": [b"\xff\xd8\xff"]}), "EncodedImage"),
    (lambda w: w.add_episode(np.zeros((1, 1)), np.zeros((1, 1)), images={"c": np.zeros((2, 2, 2, 3), np.uint8)}),
     "2 images for 1 frames"),
    (lambda w: w.add_episode(np.zeros((1, 1)), np.zeros((1, 1)), images={"c": np.zeros((1, 2, 2), np.float32)}),
     "uint8"),
    (lambda w: w.add_episode(np.zeros((1, 1)), np.zeros((1, 1)), images={"c" * 70000: np.zeros((1, 2, 2), np.uint8)}),
     "camera name"),
    (lambda w: w.add_episode(np.zeros((1, 1)), np.zeros((1, 1)), images={"../c": np.zeros((1, 2, 2), np.uint8)}),
     "camera name"),
    (lambda w: w.add_episode(np.zeros((1, 1)), np.zeros((1, 1)), success=1), "success must be"),
])
def test_writer_refuses_what_the_reference_corrupts(tmp_path, call, message):
    with kdb.Writer(tmp_path / "x.kdb") as writer:
        with pytest.raises((ValueError, TypeError), match=message):
            call(writer)
        assert len(writer) == 0  # nothing half-written: the writer stays usable
        writer.add_episode(np.zeros((1, 1)), np.zeros((1, 1)))
    assert kdb.validate(tmp_path / "x.kdb") == []


def test_streaming_refusals(tmp_path):
    with kdb.Writer(tmp_path / "s.kdb") as writer:
        writer.begin_episode(state_dim=2, action_dim=1)
        with pytest.raises(ValueError, match="frame 0 state has 3 values"):
            writer.add_frame([1, 2, 3], [0])
        writer.add_frame([1, 2], [0])
        with pytest.raises(ValueError, match="frame 1 action has 2 values"):
            writer.add_frame([1, 2], [0, 1])
        with pytest.raises(RuntimeError, match="episode is open"):
            writer.add_episode(np.zeros((1, 1)), np.zeros((1, 1)))
        writer.end_episode()
        writer.begin_episode(state_dim=1, action_dim=1)
        with pytest.raises(ValueError, match="at least one frame"):
            writer.end_episode()
        writer.add_frame([1], [1])
        writer.end_episode()
    with kdb.open(tmp_path / "s.kdb") as f:
        assert [f.read_meta(i).num_frames for i in range(len(f))] == [1, 1]


def test_failed_write_leaves_no_file_and_keeps_the_old_one(tmp_path):
    path = tmp_path / "a.kdb"
    path.write_bytes(b"old contents")
    with pytest.raises(RuntimeError, match="boom"), kdb.Writer(path) as writer:
        writer.add_episode(np.zeros((2, 1)), np.zeros((2, 1)))
        raise RuntimeError("boom")
    assert path.read_bytes() == b"old contents"
    assert os.listdir(tmp_path) == ["a.kdb"]
    with pytest.raises(RuntimeError, match="begun but not ended"), kdb.Writer(tmp_path / "b.kdb") as writer:
        writer.begin_episode(state_dim=1, action_dim=1)
        writer.add_frame([1], [1])
        writer.close()
    assert not (tmp_path / "b.kdb").exists()


def test_streaming_memory_spills_to_disk(tmp_path, monkeypatch):
    from arrayio.kdb import _writer as writer_module

    monkeypatch.setattr(writer_module, "SPOOL_BYTES", 1024)
    frames = gradient_frames(50, 16, 16)
    with kdb.Writer(tmp_path / "big.kdb") as writer:
        writer.begin_episode(state_dim=1, action_dim=1)
        for t in range(50):
            writer.add_frame([t], [t], images={"c": frames[t]})
        assert writer._episode.images._rolled  # past the bound, the episode lives in a temporary file
        writer.end_episode()
    with kdb.open(tmp_path / "big.kdb") as f:
        np.testing.assert_array_equal(f.read_episode(0).images["c"], frames)


def test_lookup_by_id_frames_and_locate(sample):
    with kdb.open(sample) as f:
        assert f.position_of(2) == 2
        assert f.episode_by_id(1).meta.task == "task 1"
        with pytest.raises(kdb.EpisodeIdNotFound):
            f.episode_by_id(99)
        with pytest.raises(kdb.EpisodeNotFound):
            f.read_meta(3)
        assert f.read_meta(-1).episode_id == 2
        assert f.locate(0) == (0, 0) and f.locate(6) == (1, 0) and f.locate(20) == (2, 7)
        frame = f.read_frame(1, 3, cameras=["wrist"])
        assert list(frame.images) == ["wrist"] and frame.images["wrist"].shape == (16, 20, 3)
        assert f.read_episode_actions_only(0).images is None
        assert [episode.meta.episode_id for episode in f] == [0, 1, 2]


def test_protocol_functions(sample, tmp_path):
    facts = arrayio.info(sample)
    assert facts["num_episodes"] == 3 and facts["num_frames"] == 21 and facts["cameras"] == ["front", "wrist"]
    assert facts["embodiments"] == ["arm"] and "summary" in facts
    rows = kdb.open(sample).entries()
    assert [row["name"] for row in rows] == ["0", "1", "2"] and rows[1]["num_frames"] == 7
    lines = list(kdb.open(sample).cat("1"))
    assert lines[0].startswith("# episode 1") and len(lines) == 2 + 7
    assert lines[2].split("\t")[0] == "0" and "front:20x16x3 compressed" in lines[2]
    with pytest.raises(KeyError):
        list(kdb.open(sample).cat("nope"))
    demo = kdb.demo(tmp_path)
    assert kdb.validate(demo) == []


def test_big_sample_with_many_episodes_opens(tmp_path):
    path = write_sample(tmp_path / "many.kdb", episodes=40, frames=2, compress=None)
    with kdb.open(path) as f:
        assert len(f) == 40 and f.first_frames[-1] == f.num_frames


def test_episode_images_is_a_mapping_of_lazily_decoded_frames(tmp_path, monkeypatch):
    from collections.abc import Mapping

    front, wrist = gradient_frames(5, 12, 10), gradient_frames(5, 6, 8)
    path = tmp_path / "m.kdb"
    with kdb.Writer(path) as writer:
        writer.add_episode(np.zeros((5, 2)), np.zeros((5, 1)), images={"front": front, "wrist": wrist})
    with kdb.open(path) as f:
        images = f.read_episode(0).images
        assert isinstance(images, Mapping)
        assert len(images) == 2 and list(images) == ["front", "wrist"] and "front" in images
        assert "top" not in images
        with pytest.raises(KeyError):
            images["top"]
        decoded = []
        real_decode = kdb.KdbFile.decode_image
        # On the class: a closed reader has no attributes left for monkeypatch to restore.
        monkeypatch.setattr(kdb.KdbFile, "decode_image",
                            lambda self, record: decoded.append(record.camera) or real_decode(self, record))
        frames = images["front"]
        assert isinstance(frames, kdb.CameraFrames) and len(frames) == 5
        assert frames.shape == (5, 12, 10, 3) and decoded == []  # the shape comes from the records
        np.testing.assert_array_equal(frames[3], front[3])
        np.testing.assert_array_equal(frames[-1], front[4])
        assert decoded == ["front", "front"]
        np.testing.assert_array_equal(frames[1:3], front[1:3])
        np.testing.assert_array_equal(np.asarray(images["wrist"]), wrist)
        assert {camera: value.shape for camera, value in images.items()} == {"front": (5, 12, 10, 3),
                                                                             "wrist": (5, 6, 8, 3)}


def test_after_close_episodes_raise_file_closed_error(sample):
    f = kdb.open(sample)
    episode = f.read_episode(1)
    states = episode.states  # handed out before close: stays valid
    f.close()
    assert states.shape[0] == 7
    for access in (lambda: episode.images["front"][0], lambda: episode.images.frame(0), lambda: len(f),
                   lambda: f.read_episode(0), lambda: f[0], lambda: f.header):
        with pytest.raises(kdb.FileClosedError) as raised:
            access()
        assert isinstance(raised.value, arrayio.ClosedError)
        assert str(raised.value).startswith("kdb: the file is closed")


def test_overlapping_sections_are_reported_by_validate(sample, tmp_path):
    data = bytearray(sample.read_bytes())
    index_offset = HEADER.unpack(data).index_offset
    at = INDEX_ENTRY.offset_of("actions_offset", index_offset, 1)
    (actions_offset,) = struct.unpack_from("<Q", data, at)
    struct.pack_into("<Q", data, at, actions_offset + 1)  # one byte into the next section
    path = tmp_path / "overlap.kdb"
    path.write_bytes(bytes(data))
    problems = kdb.validate(path)
    assert any("clear of episode 1's state/action section" in str(problem) for problem in problems), problems
    assert all(isinstance(problem.offset, int) for problem in problems)


@pytest.mark.parametrize("frame", [1.5, 1.0, "1", True])
def test_a_frame_that_is_not_an_int_is_named(sample, frame):
    # Before: read_frame(0, 1.5) ended in numpy's "only integers, slices (`:`), ellipsis ..." IndexError.
    with kdb.open(sample) as f:
        with pytest.raises(TypeError, match="kdb: frame must be an int"):
            f.read_frame(0, frame)
        with pytest.raises(TypeError, match="kdb: episode position must be an int"):
            f.read_frame(0.5, 1)
        assert f.read_frame(np.int64(0), np.int64(1)).index == 1


@pytest.mark.parametrize("quality", [90.5, "90", True, 0, 101])
def test_jpeg_quality_must_be_a_whole_number_from_1_to_100(tmp_path, quality):
    # Before: 90.5 and "90" were taken as 90 (int() of them).
    with pytest.raises(ValueError, match="quality must be a whole number 1..100"):
        kdb.Writer(tmp_path / "q.kdb", compress="jpeg", quality=quality)
    assert not (tmp_path / "q.kdb").exists()
    kdb.Writer(tmp_path / "ok.kdb", compress="jpeg", quality=np.int64(80)).close()
