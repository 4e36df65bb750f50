"""Issue 19 items 12 and 16: LeRobot metadata and kdb filter expressions that used to cost gigabytes or
print tracebacks; each is now a FormatError (or a usage error) naming what is wrong."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hostile_run import PEAK_LIMIT_MB, run_cli_hostile, run_hostile

from arrayio import FormatError
from arrayio.robot.lerobot import expand_template

pytest.importorskip("pyarrow")
pytest.importorskip("av")


def patch_info(folder: Path, **changes) -> None:
    info_path = folder / "meta" / "info.json"
    info = json.loads(info_path.read_text())
    info.update(changes)
    info_path.write_text(json.dumps(info))


def refused(outcome, *words: str) -> None:
    """The CLI ended with one `arrayio:` line naming ``words``, no traceback, exit 1, in bounded memory."""
    assert outcome.returncode == 1, outcome.stderr
    assert "Traceback" not in outcome.stderr, outcome.stderr
    assert outcome.last_line.startswith("arrayio: ") and all(word in outcome.last_line for word in words), \
        outcome.last_line
    assert outcome.peak_mb < PEAK_LIMIT_MB, outcome.peak_mb


@pytest.fixture
def v30(tmp_path: Path) -> Path:
    from lerobot_cases import write_lerobot_v30

    write_lerobot_v30(tmp_path / "v30", [2, 3], video="h264")
    return tmp_path / "v30"


@pytest.fixture
def v21(tmp_path: Path) -> Path:
    from lerobot_cases import write_lerobot_v21

    write_lerobot_v21(tmp_path / "v21", [2, 3])
    return tmp_path / "v21"


def test_a_format_width_of_a_billion_in_video_path_is_refused(v30: Path, tmp_path: Path):
    patch_info(v30, video_path="{video_key:>1000000000}")
    assert (v30 / "meta" / "info.json").stat().st_size < 4096
    refused(run_cli_hostile("kdb", "ingest-lerobot", v30, tmp_path / "out.kdb"), "video_path", "{field:0Nd}")
    assert not (tmp_path / "out.kdb").exists()


@pytest.mark.parametrize("changes, words", [
    ({"chunks_size": 0}, ("chunks_size", "a positive integer")),
    ({"chunks_size": "many"}, ("chunks_size",)),
    ({"video_path": 42}, ("video_path", "template string")),
    ({"video_path": ["videos"]}, ("video_path",)),
    ({"fps": "fast"}, ("fps", "a positive number")),
    ({"features": ["observation.images.front"]}, ("features",)),
])
def test_v21_metadata_of_the_wrong_type_is_a_format_error(v21: Path, tmp_path: Path, changes: dict, words: tuple):
    patch_info(v21, **changes)
    refused(run_cli_hostile("kdb", "ingest-lerobot", v21, tmp_path / "out.kdb"), *words)


def test_an_8192_square_video_is_refused_before_a_frame_is_decoded(v30: Path, tmp_path: Path):
    video = next((v30 / "videos").rglob("*.mp4"))
    made = run_hostile("""
import sys, av
with av.open(sys.argv[1], "w") as container:
    stream = container.add_stream("libx264", rate=30, options={"preset": "ultrafast"})
    stream.width = stream.height = 8192
    stream.pix_fmt = "yuv420p"
    for number in range(5):
        frame = av.VideoFrame(8192, 8192, "yuv420p")
        for plane in frame.planes:
            plane.update(bytes(plane.buffer_size))
        frame.pts = number
        container.mux(stream.encode(frame))
    container.mux(stream.encode(None))
""", video)
    assert made.returncode == 0, made.stderr
    assert video.stat().st_size < 1 << 20
    refused(run_cli_hostile("kdb", "ingest-lerobot", v30, tmp_path / "out.kdb"), "image_bytes", "8192x8192")


def test_templates_expand_only_the_documented_fields():
    fields = {"video_key": "observation.images.front", "chunk_index": 3, "file_index": 12}
    template = "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
    assert expand_template(template, fields, name="video_path", path="info.json") == template.format(**fields)
    v21 = {"episode_chunk": 0, "video_key": "cam", "episode_index": 7}
    v21_template = "videos/chunk-{episode_chunk:03d}/{video_key}/episode_{episode_index:06d}.mp4"
    assert expand_template(v21_template, v21, name="video_path", path="info.json") == v21_template.format(**v21)
    for hostile in ("{video_key:>1000000000}", "{video_key!r}", "{0}", "{video_key.__class__}", "{chunk_index:>5}",
                    "{chunk_index:0100d}", "{token}", "{video_key", "x" * 5000, "{video_key:03d}"):
        with pytest.raises(FormatError, match="video_path"):
            expand_template(hostile, fields, name="video_path", path="info.json")


@pytest.mark.parametrize("where, words", [
    ("-task", ("cannot negate",)),
    ("-success", ("cannot negate",)),
    ("not " * 5000 + "success", ("nested more than 100",)),
    ("not " * 200 + "success", ("nested more than 100",)),
])
def test_filter_expressions_never_print_a_traceback(tmp_path: Path, where: str, words: tuple):
    from kdb_cases import write_sample

    sample = write_sample(tmp_path / "sample.kdb")
    refused(run_cli_hostile("kdb", "filter", sample, tmp_path / "out.kdb", "--where", where), *words)


def test_frames_that_disagree_on_cameras_are_a_format_error(tmp_path: Path):
    import numpy as np

    from arrayio import kdb
    from arrayio.kdb import MissingImage

    frames = np.zeros((2, 4, 4, 3), np.uint8)
    path = tmp_path / "cameras.kdb"
    with kdb.Writer(path) as writer:
        writer.begin_episode(state_dim=1, action_dim=1)
        writer.add_frame(np.zeros(1), np.zeros(1), images={"front": frames[0]})
        writer.add_frame(np.zeros(1), np.zeros(1), images={"gront": frames[1]})
        writer.end_episode()
    with kdb.open(path) as f:
        images = f.read_episode(0).images
        for read in (lambda: images["front"][1], lambda: np.asarray(images["front"]),
                     lambda: images.record(1, "front")):
            with pytest.raises(MissingImage, match="episode 0 frame 1 has no") as caught:
                read()
            assert isinstance(caught.value, FormatError) and isinstance(caught.value, KeyError)
            assert str(caught.value).startswith(f"{path}: kdb: episode 0 frame 1")  # a KeyError, not quoted
    torch = pytest.importorskip("torch")
    from arrayio.robot.torch import FrameDataset

    with pytest.raises(MissingImage, match="frame 1 has no image of camera 'front'"):
        FrameDataset(path, cameras=["front"])[1]
    assert torch is not None


@pytest.mark.parametrize("bad", [float("nan"), None, float("inf")])
def test_a_timestamp_that_is_not_a_finite_number_is_named_with_its_file(v30: Path, tmp_path: Path, bad):
    # Before: "...file-000.mp4 ends before nan s", naming the video, not the row that held the NaN.
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = v30 / "data" / "chunk-000" / "file-000.parquet"
    table = pq.read_table(path)
    times = table.column("timestamp").to_pylist()
    times[3] = bad
    pq.write_table(table.set_column(table.schema.get_field_index("timestamp"), "timestamp",
                                    pa.array(times, pa.float32())), path)
    refused(run_cli_hostile("kdb", "ingest-lerobot", v30, tmp_path / "out.kdb"), "file-000.parquet",
            "episode 1 frame 1: timestamp", "not a finite number of seconds")
    assert not (tmp_path / "out.kdb").exists()


def test_a_video_time_past_a_billion_seconds_reads_as_a_number(v30: Path, tmp_path: Path):
    # Before: the time was printed with six decimals, 300 digits long.
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = v30 / "meta" / "episodes" / "chunk-000" / "file-000.parquet"
    rows = pq.read_table(path).to_pylist()
    rows[1]["videos/observation.images.front/from_timestamp"] = 1e300
    pq.write_table(pa.Table.from_pylist(rows), path)
    refused(run_cli_hostile("kdb", "ingest-lerobot", v30, tmp_path / "out.kdb"), "ends before 1e+300 s")
