"""Names from files are data, never paths (issue 19 item 1, item 12's templates and symlinks).

Hostile kdb files are written by the real Writer under a harmless camera name of the same length,
then that name's bytes are replaced: the Writer itself refuses the hostile names.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest

from arrayio import kdb
from arrayio._names import path_segment, relative_under
from arrayio.errors import FormatError, UnsafeNameError
from arrayio.robot import convert as kdb_convert
from arrayio.robot import lerobot

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "kdb"))
from kdb_cases import gradient_frames, write_lerobot  # noqa: E402

HOSTILE = ["", ".", "..", "a/b", "a\\b", "a\0b", "zarr.json", ".zarray",
           "../../../../../../other_ds/videos/observation.images.front"]


def hostile_kdb(path: Path, camera: str) -> Path:
    """A valid one-episode kdb file whose camera is named ``camera`` (no Writer accepts that name)."""
    placeholder = "Q" * len(camera)
    with kdb.Writer(path, compress="png", created_timestamp=1) as writer:
        writer.add_episode(np.zeros((2, 3)), np.zeros((2, 2)), images={placeholder: gradient_frames(2, 16, 16)},
                           fps=5.0)
    data = path.read_bytes()
    assert data.count(placeholder.encode()) == 2
    path.write_bytes(data.replace(placeholder.encode(), camera.encode()))
    return path


def files_under(folder: Path) -> set[str]:
    """Every path below ``folder``, relative to it."""
    return {os.path.relpath(os.path.join(top, name), folder)
            for top, folders, names in os.walk(folder) for name in folders + names}


@pytest.mark.parametrize("name", HOSTILE)
def test_path_segment_refuses_what_is_not_one_segment(name):
    with pytest.raises(UnsafeNameError, match="camera"):
        path_segment(name, "camera")


def test_path_segment_escapes_one_to_one_into_safe_segments():
    names = HOSTILE + ["front", "%", "%2E", "Zarr.JSON", "a b"]
    escaped = [path_segment(name, "key", escape=True) for name in names]
    assert len(set(escaped)) == len(names)
    for segment in escaped:
        assert path_segment(segment, "escaped") == segment
    assert path_segment("front", "camera", escape=True) == "front"


@pytest.mark.parametrize("relative", ["/etc/passwd", "../x.mp4", "videos/../../x.mp4", "C:x", "a\\..\\b", ""])
def test_relative_under_refuses_paths_leaving_the_root(tmp_path, relative):
    with pytest.raises(UnsafeNameError):
        relative_under(tmp_path, relative, "video_path")


@pytest.mark.parametrize("camera", HOSTILE)
def test_kdb_writer_refuses_camera_names_no_reader_could_map(tmp_path, camera):
    with pytest.raises(UnsafeNameError, match="camera name"):
        with kdb.Writer(tmp_path / "x.kdb") as writer:
            writer.add_episode(np.zeros((1, 1)), np.zeros((1, 1)), images={camera: np.zeros((1, 4, 4, 3), np.uint8)})
    assert not (tmp_path / "x.kdb").exists()


def test_kdb_writer_streaming_refuses_hostile_camera(tmp_path):
    with pytest.raises(UnsafeNameError):
        with kdb.Writer(tmp_path / "x.kdb") as writer:
            writer.begin_episode(state_dim=1, action_dim=1, fps=5.0)
            writer.add_frame(np.zeros(1), np.zeros(1), images={"../up": np.zeros((4, 4, 3), np.uint8)})


@pytest.mark.parametrize("video", [True, False], ids=["video", "images"])
def test_export_lerobot_never_writes_outside_the_target(tmp_path, video):
    pytest.importorskip("pyarrow")
    source = hostile_kdb(tmp_path / "evil.kdb", "../../../../../../other_ds/videos/observation.images.front")
    (tmp_path / "work").mkdir()
    before = files_under(tmp_path)
    with pytest.raises(UnsafeNameError):
        lerobot.export_lerobot(source, tmp_path / "work" / "out", video=video, codec="h264")
    assert files_under(tmp_path) == before


def test_export_npz_refuses_member_names_with_parent_parts(tmp_path):
    source = hostile_kdb(tmp_path / "evil.kdb", "../../x")
    with pytest.raises(UnsafeNameError):
        kdb_convert.export_npz(source, tmp_path / "out.npz")
    assert not (tmp_path / "out.npz").exists()


@pytest.mark.parametrize("camera", [".", "..", "zarr.json"])
def test_kdb_to_zarr_maps_cameras_named_like_store_paths(tmp_path, camera):
    zarr = pytest.importorskip("zarr")
    from arrayio.zarr import open_store

    source = hostile_kdb(tmp_path / "odd.kdb", camera)
    group = zarr.open_group(open_store(source), mode="r")
    images = group["episodes/0/images"]
    (name,) = list(images.array_keys())
    assert images[name].attrs["camera"] == camera
    assert images[name].shape == (2, 16, 16, 3)


def test_ingest_lerobot_refuses_a_column_that_names_a_path(tmp_path):
    pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    folder = write_lerobot(tmp_path / "ds", episodes=1, frames=2)
    path = folder / "data" / "chunk-000" / "episode_000000.parquet"
    table = pq.read_table(path)
    names = ["observation.images.../../../../x" if name == "observation.images.top" else name
             for name in table.column_names]
    pq.write_table(table.rename_columns(names), path)
    with pytest.raises(UnsafeNameError, match="camera name"):
        lerobot.ingest_lerobot(folder, tmp_path / "out.kdb")
    assert not (tmp_path / "out.kdb").exists()


@pytest.mark.parametrize("template", ["/etc/{video_key}.mp4", "../../{video_key}/file-{file_index:03d}.mp4",
                                      "videos/{nosuchfield}.mp4", 7])
def test_ingest_lerobot_refuses_templates_leading_outside(tmp_path, template):
    pytest.importorskip("av")
    from lerobot_cases import write_lerobot_v30

    folder = tmp_path / "ds"
    write_lerobot_v30(folder, [2], video="h264")
    info = json.loads((folder / "meta" / "info.json").read_text())
    info["video_path"] = template
    (folder / "meta" / "info.json").write_text(json.dumps(info))
    with pytest.raises(FormatError, match="video_path"):  # UnsafeNameError for the paths, as all FormatErrors
        lerobot.ingest_lerobot(folder, tmp_path / "out.kdb")


def test_ingest_lerobot_refuses_symlinked_parquet_leading_outside(tmp_path):
    pytest.importorskip("pyarrow")
    folder = write_lerobot(tmp_path / "ds", episodes=1, frames=2)
    outside = write_lerobot(tmp_path / "other", episodes=1, frames=2)
    os.symlink(outside / "data" / "chunk-000" / "episode_000000.parquet",
               folder / "data" / "chunk-000" / "episode_000001.parquet")
    with pytest.raises(UnsafeNameError, match="symbolic link"):
        lerobot.ingest_lerobot(folder, tmp_path / "out.kdb")


def test_unsafe_names_are_format_errors():
    assert issubclass(UnsafeNameError, FormatError)


def test_convert_to_npz_refuses_keys_that_would_leave_the_archive(tmp_path):
    from arrayio import kastore
    from arrayio.convert import convert

    kastore.dump({"nodes/time": np.arange(3), "../../escape": np.arange(2)}, tmp_path / "keys.kas")
    with pytest.raises(UnsafeNameError, match="escape"):
        convert(tmp_path / "keys.kas", tmp_path / "out.npz")
    assert not (tmp_path / "out.npz").exists()
    kastore.dump({"nodes/time": np.arange(3)}, tmp_path / "fine.kas")
    convert(tmp_path / "fine.kas", tmp_path / "fine.npz")
    assert np.load(tmp_path / "fine.npz")["nodes/time"].tolist() == [0, 1, 2]
