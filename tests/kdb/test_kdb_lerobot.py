"""LeRobot v2.1 / v3.0 ingest (parquet, PNG images, AV1 and H.264 video through PyAV) and v3.0 export,
checked against the layout facts LeRobotDataset relies on (notes/lerobot.md)."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
from lerobot_cases import (
    CAMERA,
    FPS,
    TASKS,
    closest_frame,
    write_lerobot_v21,
    write_lerobot_v30,
)

from arrayio import kdb
from arrayio.robot.lerobot import export_lerobot, ingest_lerobot

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
av = pytest.importorskip("av")

LENGTHS = [5, 7, 6]


def check_ingested(path, episodes, lossless=False):
    """States/actions exact, tasks, and every camera frame is the right video frame (within codec loss)."""
    every = np.concatenate([episode["frames"] for episode in episodes])
    first = 0
    with kdb.open(path) as f:
        assert len(f) == len(episodes)
        for position, episode in enumerate(episodes):
            read = f.read_episode(position)
            assert read.meta.task == TASKS[episode["task_index"]] and read.meta.fps == FPS
            assert read.meta.embodiment == "fixture_arm"
            np.testing.assert_array_equal(read.states, episode["state"])
            np.testing.assert_array_equal(read.actions, episode["action"])
            assert (read.terminals != 0).tolist() == [False] * (len(episode["state"]) - 1) + [True]
            pictures = read.images["front"]
            for frame, picture in enumerate(pictures):
                best, error = closest_frame(picture, every)
                assert best == first + frame, (position, frame, best)
                assert error == 0 if lossless else error < 6
            first += len(episode["state"])


@pytest.mark.parametrize("codec", ["av1", "h264"])
def test_ingest_v30_video(tmp_path, codec):
    episodes = write_lerobot_v30(tmp_path / "ds", LENGTHS, video=codec)
    assert ingest_lerobot(tmp_path / "ds", tmp_path / "out.kdb") == 3
    check_ingested(tmp_path / "out.kdb", episodes)
    with kdb.open(tmp_path / "out.kdb") as f:
        record = f.image_records(1, 0)[0]
        assert (record.camera, record.width, record.height, record.compressed) == ("front", 96, 64, True)


def test_ingest_v30_images_raw_pixels_and_pandas_index_tasks(tmp_path):
    episodes = write_lerobot_v30(tmp_path / "ds", LENGTHS, video=None, task_column="__index_level_0__")
    assert ingest_lerobot(tmp_path / "ds", tmp_path / "out.kdb", compress=None) == 3
    check_ingested(tmp_path / "out.kdb", episodes, lossless=True)
    table = pq.read_table(tmp_path / "ds" / "data" / "chunk-000" / "file-000.parquet").to_pydict()
    with kdb.open(tmp_path / "out.kdb") as f:  # embedded PNG bytes are kept as they are
        assert bytes(f.read_episode(1).images.raw(2, "front")) == table[CAMERA][LENGTHS[0] + 2]["bytes"]
    video = write_lerobot_v30(tmp_path / "video", [3, 2], video="h264")
    assert ingest_lerobot(tmp_path / "video", tmp_path / "raw.kdb", compress=None) == 2
    with kdb.open(tmp_path / "raw.kdb") as f:
        assert not f.image_records(0, 0)[0].compressed
        assert closest_frame(f.read_frame(1, 1).images["front"], video[1]["frames"])[0] == 1


def test_ingest_v21_video(tmp_path):
    episodes = write_lerobot_v21(tmp_path / "ds", LENGTHS)
    assert ingest_lerobot(tmp_path / "ds", tmp_path / "out.kdb", compress="png") == 3
    check_ingested(tmp_path / "out.kdb", episodes)


def test_ingest_errors_name_the_problem(tmp_path):
    write_lerobot_v30(tmp_path / "ds", [3, 2], video="h264")
    episodes_file = tmp_path / "ds" / "meta" / "episodes" / "chunk-000" / "file-000.parquet"
    table = pq.read_table(episodes_file).to_pydict()
    table[f"videos/{CAMERA}/from_timestamp"][1] += 0.5 / FPS  # off the frame grid
    pq.write_table(pa.table(table), episodes_file)
    with pytest.raises(ValueError, match=r"file-000\.mp4: LeRobot: no frame at 0\.11666"):
        ingest_lerobot(tmp_path / "ds", tmp_path / "out.kdb")
    assert not (tmp_path / "out.kdb").exists()
    (tmp_path / "ds" / "videos" / CAMERA / "chunk-000" / "file-000.mp4").unlink()
    with pytest.raises(ValueError, match="file-000.mp4: LeRobot: cannot open the video") as caught:
        ingest_lerobot(tmp_path / "ds", tmp_path / "out.kdb")
    # The file as every FormatError holds it (before: in the text only, after "kdb: cannot open video").
    assert caught.value.file == str(tmp_path / "ds" / "videos" / CAMERA / "chunk-000" / "file-000.mp4")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="LeRobot: no data") as caught:
        ingest_lerobot(tmp_path / "empty", tmp_path / "out.kdb")
    assert caught.value.file == str(tmp_path / "empty")


@pytest.mark.parametrize("codec", ["h264", "av1"])
def test_export_v30_video_has_the_layout_lerobot_reads(tmp_path, codec):
    episodes = write_lerobot_v30(tmp_path / "ds", LENGTHS, video=None)
    ingest_lerobot(tmp_path / "ds", tmp_path / "in.kdb", compress="jpeg")
    out = tmp_path / "exported"
    assert export_lerobot(tmp_path / "in.kdb", out, codec=codec) == 3
    assert not list(tmp_path.glob(".exported.*"))  # built aside, renamed into place
    info = json.loads((out / "meta" / "info.json").read_text())
    assert info["codebase_version"] == "v3.0" and info["fps"] == FPS and info["total_frames"] == sum(LENGTHS)
    assert info["total_episodes"] == 3 and info["total_tasks"] == 2 and info["splits"] == {"train": "0:3"}
    feature = info["features"][CAMERA]
    assert feature["dtype"] == "video" and feature["shape"] == [64, 96, 3]
    assert feature["info"]["video.codec"] == codec and feature["info"]["video.pix_fmt"] == "yuv420p"
    data = pq.read_table(out / info["data_path"].format(chunk_index=0, file_index=0))
    state_type = data.schema.field("observation.state").type
    assert pa.types.is_fixed_size_list(state_type) and state_type.list_size == 6
    assert state_type.value_type == pa.float32()
    assert str(data.schema.field("timestamp").type) == "float"
    assert b"huggingface" in data.schema.metadata
    rows = data.to_pydict()
    assert rows["index"] == list(range(sum(LENGTHS)))
    assert rows["frame_index"][:7] == [0, 1, 2, 3, 4, 0, 1] and rows["episode_index"][5] == 1
    np.testing.assert_array_equal(np.array(rows["observation.state"][5:12], np.float32), episodes[1]["state"])
    np.testing.assert_array_equal(np.array(rows["timestamp"][5:12], np.float32),
                                  (np.arange(7) / FPS).astype(np.float32))
    meta = pq.read_table(out / "meta" / "episodes" / "chunk-000" / "file-000.parquet").to_pydict()
    assert meta["dataset_from_index"] == [0, 5, 12] and meta["dataset_to_index"] == [5, 12, 18]
    assert meta["length"] == LENGTHS and meta["tasks"][1] == [TASKS[1]]
    tasks = pq.read_table(out / "meta" / "tasks.parquet").to_pydict()
    assert dict(zip(tasks["task"], tasks["task_index"])) == {TASKS[0]: 0, TASKS[1]: 1}
    every = np.concatenate([episode["frames"] for episode in episodes])
    path = out / info["video_path"].format(video_key=CAMERA, chunk_index=0, file_index=0)
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        assert stream.codec_context.name in ({"libdav1d", "av1"} if codec == "av1" else {"h264"})
        times = []
        for frame in container.decode(stream):
            times.append(frame.time)
            episode = int(np.searchsorted(meta["dataset_to_index"], len(times) - 1, side="right"))
            start = meta[f"videos/{CAMERA}/from_timestamp"][episode]
            k = len(times) - 1 - meta["dataset_from_index"][episode]
            assert abs(frame.time - (start + k / FPS)) <= 1e-4  # LeRobot's tolerance_s
            assert closest_frame(frame.to_ndarray(format="rgb24"), every)[0] == len(times) - 1
    assert len(times) == sum(LENGTHS)
    assert ingest_lerobot(out, tmp_path / "back.kdb") == 3  # and our own ingest reads it back
    check_ingested(tmp_path / "back.kdb", episodes)
    with pytest.raises(FileExistsError):
        export_lerobot(tmp_path / "in.kdb", out)


def test_export_v30_images(tmp_path, sample):
    out = tmp_path / "images"
    assert export_lerobot(sample, out, video=False) == 3
    info = json.loads((out / "meta" / "info.json").read_text())
    assert info["video_path"] is None and info["features"]["observation.images.front"]["dtype"] == "image"
    assert (out / "images" / "observation.images.front").is_dir() and not (out / "videos").exists()
    rows = pq.read_table(out / "data" / "chunk-000" / "file-000.parquet").to_pydict()
    from PIL import Image

    with kdb.open(sample) as f:
        cell = rows["observation.images.wrist"][6 + 2]
        assert cell["path"] == "frame-000002.png" and cell["bytes"].startswith(b"\x89PNG")
        np.testing.assert_array_equal(np.asarray(Image.open(io.BytesIO(cell["bytes"]))),
                                      f.read_frame(1, 2).images["wrist"])
        assert rows["next.done"][5] is True and rows["next.reward"][5] == pytest.approx(1.0)
    assert ingest_lerobot(out, tmp_path / "back.kdb") == 3
    with kdb.open(tmp_path / "back.kdb") as back, kdb.open(sample) as f:
        np.testing.assert_array_equal(back.read_episode(2).actions, f.read_episode(2).actions)
        np.testing.assert_array_equal(back.read_episode(2).rewards, f.read_episode(2).rewards)
        assert back.read_meta(2).task == "task 2"
    stats = json.loads((out / "meta" / "stats.json").read_text())
    assert stats["observation.state"]["count"] == [21] and len(stats["action"]["mean"]) == 2
    front = stats["observation.images.front"]
    assert np.array(front["mean"]).shape == (3, 1, 1) and front["count"] == [21]
    assert 0 <= np.array(front["min"]).min() <= np.array(front["max"]).max() <= 1


def test_export_refuses_mixed_fps_and_odd_video_sizes(tmp_path):
    with kdb.Writer(tmp_path / "mixed.kdb") as writer:
        writer.add_episode(np.zeros((2, 1)), np.zeros((2, 1)), fps=10)
        writer.add_episode(np.zeros((2, 1)), np.zeros((2, 1)), fps=20)
    with pytest.raises(ValueError, match="one fps"):
        export_lerobot(tmp_path / "mixed.kdb", tmp_path / "out")
    with kdb.Writer(tmp_path / "odd.kdb") as writer:
        writer.add_episode(np.zeros((2, 1)), np.zeros((2, 1)), images={"c": np.zeros((2, 5, 7, 3), np.uint8)})
    with pytest.raises(ValueError, match="even sizes"):
        export_lerobot(tmp_path / "odd.kdb", tmp_path / "out")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("fps", [1e-30, 1e30, 0.0, float("nan")])
def test_export_refuses_a_frame_rate_no_video_or_timestamp_can_hold(tmp_path, fps):
    # Before: 1e-30 ended in ZeroDivisionError (the video's rate rounded to 0), 1e30 in PyAV's OverflowError.
    with kdb.Writer(tmp_path / "rate.kdb") as writer:
        writer.add_episode(np.zeros((2, 1)), np.zeros((2, 1)), fps=fps, images={"c": np.zeros((2, 4, 4, 3), np.uint8)})
    for video in (True, False):
        with pytest.raises(ValueError, match=r"fps .* is outside the 0.001..1,000,000"):
            export_lerobot(tmp_path / "rate.kdb", tmp_path / "out", video=video)
    assert not (tmp_path / "out").exists()


def images_of(height: int, width: int, channels: int = 3, frames: int = 2) -> np.ndarray:
    return np.zeros((frames, height, width, channels), np.uint8)


@pytest.mark.parametrize(("second", "words"), [
    ({"c": images_of(8, 4)}, r"camera 'c' has a 4x8 image with 3 channel\(s\) at episode 1 frame 0"),
    ({"d": images_of(4, 4)}, r"one set of cameras; episode 0 has \['c'\], episode 1 \['d'\]"),
    ({"c": images_of(4, 4), "d": images_of(4, 4)}, "one set of cameras"),
    ({"c": [images_of(4, 4, frames=1)[0], images_of(6, 4, frames=1)[0]]}, "at episode 1 frame 1"),
])
def test_export_refuses_cameras_or_sizes_that_change_between_frames(tmp_path, second, words):
    # Before: a frame of another size was scaled to the first's by the encoder, silently, and a camera
    # missing from a later episode ended in KeyError.
    with kdb.Writer(tmp_path / "shapes.kdb") as writer:
        writer.add_episode(np.zeros((2, 1)), np.zeros((2, 1)), images={"c": images_of(4, 4)})
        writer.add_episode(np.zeros((2, 1)), np.zeros((2, 1)), images=second)
    for video in (True, False):
        with pytest.raises(ValueError, match=words):
            export_lerobot(tmp_path / "shapes.kdb", tmp_path / "out", video=video)
    assert not (tmp_path / "out").exists()


def test_png_export_keeps_channels_the_same_too(tmp_path):
    with kdb.Writer(tmp_path / "grey.kdb") as writer:
        writer.add_episode(np.zeros((2, 1)), np.zeros((2, 1)), images={"c": images_of(4, 4)})
        writer.add_episode(np.zeros((2, 1)), np.zeros((2, 1)), images={"c": images_of(4, 4, 1)})
    with pytest.raises(ValueError, match=r"a 4x4 image with 1 channel\(s\) at episode 1 frame 0"):
        export_lerobot(tmp_path / "grey.kdb", tmp_path / "out", video=False)
    assert export_lerobot(tmp_path / "grey.kdb", tmp_path / "out") == 2  # video makes every frame RGB


def moving_frames(count: int, first: int) -> np.ndarray:
    """Frames whose whole picture moves from one to the next (a shifting gradient): hard for motion search."""
    y, x = np.mgrid[0:64, 0:96]
    return np.stack([np.stack([(x * 2 + 3 * n) % 256, (y * 3 + 5 * n) % 256, np.full_like(x, (40 * n) % 256)], -1)
                     for n in range(first, first + count)]).astype(np.uint8)


@pytest.mark.parametrize("codec", ["av1", "h264"])
def test_export_puts_every_frame_at_its_own_timestamp(tmp_path, codec):
    """Every frame of episodes of different lengths, read back with PyAV at its timestamp, is its own picture
    (AV1 in 2-frame groups showed the key frame again in place of the next frame: mean error 12-19)."""
    lengths = [10, 14, 9]
    frames = [moving_frames(length, sum(lengths[:number])) for number, length in enumerate(lengths)]
    with kdb.Writer(tmp_path / "in.kdb", compress="png") as writer:
        for pictures in frames:
            writer.add_episode(np.zeros((len(pictures), 2), np.float32), np.zeros((len(pictures), 2), np.float32),
                               images={"front": pictures}, fps=FPS)
    out = tmp_path / "out"
    export_lerobot(tmp_path / "in.kdb", out, codec=codec)
    meta = pq.read_table(out / "meta" / "episodes" / "chunk-000" / "file-000.parquet").to_pydict()
    every = np.concatenate(frames).astype(np.int16)
    shown = {}
    with av.open(str(out / "videos" / CAMERA / "chunk-000" / "file-000.mp4")) as container:
        for frame in container.decode(container.streams.video[0]):
            shown[round(float(frame.time) * FPS)] = frame.to_ndarray(format="rgb24").astype(np.int16)
    assert sorted(shown) == list(range(sum(lengths)))
    for episode, length in enumerate(lengths):
        start = meta[f"videos/{CAMERA}/from_timestamp"][episode]
        for k in range(length):
            wanted = meta["dataset_from_index"][episode] + k
            pixels = shown[round((start + k / FPS) * FPS)]
            errors = np.abs(every - pixels[None]).mean(axis=(1, 2, 3))
            assert int(np.argmin(errors)) == wanted and errors[wanted] < 6, (episode, k, errors[wanted])
