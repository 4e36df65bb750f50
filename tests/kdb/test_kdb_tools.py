"""kinodb's tools: merge, filter (with the --where language), stats, and the new CLI verbs end to end."""

from __future__ import annotations

import json

import numpy as np
import pytest
from kdb_cases import gradient_frames, write_sample
from lerobot_cases import write_lerobot_v30

import arrayio
from arrayio import kdb
from arrayio.robot import tools


def write_varied(path, compress="jpeg", ids_from=0):
    """Four episodes with different tasks, outcomes, fps, lengths and a raw or compressed camera."""
    rows = [("pick cube", True, 10.0, 6), ("pick ball", False, 10.0, 3), ("push", None, 5.0, 8),
            ("pick cube", True, 20.0, 4)]
    with kdb.Writer(path, compress=compress) as writer:
        for number, (task, success, fps, frames) in enumerate(rows):
            writer.begin_episode(state_dim=2, action_dim=1, task=task, success=success, fps=fps,
                                 embodiment="arm" if number % 2 == 0 else "hand", episode_id=ids_from + number,
                                 total_reward=float(number) if number != 2 else None)
            for frame, picture in enumerate(gradient_frames(frames, 8, 10, shift=number)):
                writer.add_frame([number, frame], [frame * 0.5], reward=frame, terminal=frame == frames - 1,
                                 images={"top": picture})
            writer.end_episode()
    return path


def assert_same_episode(a, pa_, b, pb):
    ea, eb = a.read_episode(pa_), b.read_episode(pb)
    np.testing.assert_array_equal(ea.steps, eb.steps)
    meta_a, meta_b = ea.meta.as_dict(), eb.meta.as_dict()
    meta_a.pop("episode_id"), meta_b.pop("episode_id")
    assert meta_a == meta_b
    for frame in range(len(ea)):
        assert bytes(ea.images.raw(frame, "top")) == bytes(eb.images.raw(frame, "top"))


def test_merge_renumbers_or_keeps_ids(tmp_path):
    a = write_varied(tmp_path / "a.kdb")
    b = write_varied(tmp_path / "b.kdb", compress=None, ids_from=10)
    assert tools.merge([a, b], tmp_path / "m.kdb") == 8
    with kdb.open(tmp_path / "m.kdb") as merged, kdb.open(a) as fa, kdb.open(b) as fb:
        assert merged.index["episode_id"].tolist() == list(range(8))
        assert_same_episode(merged, 1, fa, 1)
        assert_same_episode(merged, 6, fb, 2)  # raw images stay raw, bytes identical
        assert not merged.image_records(6, 0)[0].compressed
    assert kdb.validate(tmp_path / "m.kdb") == []
    assert tools.merge([str(tmp_path / "[ab].kdb")], tmp_path / "k.kdb", keep_ids=True) == 8
    with kdb.open(tmp_path / "k.kdb") as kept:
        assert kept.index["episode_id"].tolist() == [0, 1, 2, 3, 10, 11, 12, 13]
    with pytest.raises(ValueError, match="episode id 0 is in both"):
        tools.merge([a, a], tmp_path / "bad.kdb", keep_ids=True)
    assert not (tmp_path / "bad.kdb").exists()


def test_filter_conditions_and_where_language(tmp_path):
    source = write_varied(tmp_path / "a.kdb")

    def kept(**conditions):
        target = tmp_path / "out.kdb"
        tools.filter_file(source, target, tools.episode_filter(**conditions))
        with kdb.open(target) as f:
            return f.index["episode_id"].tolist()

    assert kept(task="^pick") == [0, 1, 3]
    assert kept(embodiment="hand") == [1, 3]
    assert kept(success="true") == [0, 3] and kept(success="unknown") == [2] and kept(success="false") == [1]
    assert kept(min_frames=5) == [0, 2]
    assert kept(where="fps >= 10 and success") == [0, 3]
    assert kept(where="not success and success != unknown") == [1]
    assert kept(where="total_reward > 0.5 or frames == 8") == [1, 2, 3]  # unknown reward compares false
    assert kept(where="task in ('push', 'pick ball')", task="ball") == [1]
    assert kept(where="success == unknown") == [2]
    for bad, message in (("fps >=", "invalid syntax"), ("__import__('os')", "Call is not part"),
                         ("speed > 3", "unknown name 'speed'"), ("task > 3", "cannot compare")):
        with pytest.raises(ValueError, match=message):
            kept(where=bad)
    with pytest.raises(ValueError, match="regular expression"):
        tools.episode_filter(task="(")


def test_stats(tmp_path):
    a = write_varied(tmp_path / "a.kdb")
    sample = write_sample(tmp_path / "sample.kdb")
    facts = tools.stats([a, sample])
    assert facts["episodes"] == 7 and facts["frames"] == 21 + 21
    assert facts["tasks"]["pick cube"] == {"episodes": 2, "frames": 10, "success": 2, "failure": 0, "unknown": 0,
                                           "success_rate": 1.0}
    assert facts["tasks"]["push"]["success_rate"] is None
    assert facts["success"] == {"success": 3, "failure": 3, "unknown": 1} and facts["success_rate"] == 0.5
    assert facts["cameras"]["top"] == {"episodes": 4, "sizes": {"10x8x3": 4}, "encodings": {"jpeg": 4}}
    assert facts["cameras"]["front"]["sizes"] == {"20x16x3": 3}
    with kdb.open(a) as f:
        parts = facts["files"][0]["parts"]
        assert parts["index"] == 4 * 64 and parts["header"] == 64 and parts["other"] == 0
        assert sum(parts.values()) == f.source.size
    assert facts["fps"] == [5.0, 10.0, 20.0] and facts["embodiments"] == {"arm": 5, "hand": 2}
    assert any("pick cube" in line for line in tools.stats_lines(facts))


def test_one_path_given_as_a_string_is_one_source_not_its_letters(tmp_path):
    # Before: merge("a.kdb", ...) and stats("a.kdb") iterated the string and said "folder '/' holds no .kdb files".
    path = write_varied(tmp_path / "a.kdb")
    assert tools.stats(str(path))["episodes"] == tools.stats([path])["episodes"] == 4
    assert tools.merge(str(path), tmp_path / "m.kdb") == 4 and tools.merge(path, tmp_path / "n.kdb") == 4


def test_min_frames_must_be_a_whole_number():
    # Before: min_frames="x" was taken and the filter failed later comparing an int with a string.
    with pytest.raises(TypeError, match="--min-frames must be a whole number, got 'x'"):
        tools.episode_filter(min_frames="x")
    with pytest.raises(ValueError, match="--min-frames must be >= 0"):
        tools.episode_filter(min_frames=-1)


def test_cli_merge_filter_stats_and_lerobot(cli, tmp_path):
    a = write_varied(tmp_path / "a.kdb")
    b = write_varied(tmp_path / "b.kdb", ids_from=4)
    result = cli("kdb", "merge", a, b, "-o", tmp_path / "m.kdb", "--keep-ids")
    assert result.returncode == 0, result.stderr
    assert arrayio.info(tmp_path / "m.kdb")["num_episodes"] == 8
    result = cli("kdb", "filter", tmp_path / "m.kdb", tmp_path / "f.kdb", "--where", "fps >= 10 and success",
                 "--embodiment", "arm")
    assert result.returncode == 0 and b"kept 2 of 8" in result.stdout, result.stderr
    stats = cli("kdb", "stats", tmp_path / "f.kdb", "--json")
    assert stats.returncode == 0, stats.stderr
    facts = json.loads(stats.stdout)  # progress goes to stderr, stdout is the JSON alone
    assert facts["episodes"] == 2 and facts["tasks"] == {"pick cube": {"episodes": 2, "frames": 12, "success": 2, "failure": 0, "unknown": 0, "success_rate": 1.0}}
    text = cli("kdb", "stats", str(tmp_path / "*.kdb"))
    assert text.returncode == 0 and b"episodes" in text.stdout and b"cameras:" in text.stdout
    bad = cli("kdb", "filter", a, tmp_path / "x.kdb", "--where", "open('x')")
    assert bad.returncode == 1 and b"not part of the filter language" in bad.stderr
    assert not (tmp_path / "x.kdb").exists()
    clash = cli("kdb", "merge", a, a, "-o", tmp_path / "x.kdb", "--keep-ids")
    assert clash.returncode == 1 and b"episode id 0" in clash.stderr
    write_lerobot_v30(tmp_path / "lr", [3, 4], video="h264")
    result = cli("kdb", "ingest-lerobot", tmp_path / "lr", tmp_path / "lr.kdb")
    assert result.returncode == 0, result.stderr
    assert arrayio.info(tmp_path / "lr.kdb")["cameras"] == ["front"]
    result = cli("kdb", "export-lerobot", tmp_path / "lr.kdb", tmp_path / "out", "--codec", "h264")
    assert result.returncode == 0 and b"LeRobot v3.0" in result.stdout, result.stderr
    assert (tmp_path / "out" / "videos" / "observation.images.front" / "chunk-000" / "file-000.mp4").exists()
    again = cli("kdb", "export-lerobot", tmp_path / "lr.kdb", tmp_path / "out")
    assert again.returncode == 1 and b"already exists" in again.stderr


def test_merge_of_an_image_marked_compressed_but_not_jpeg_or_png_names_the_file(tmp_path):
    # Before: a plain ValueError ("kdb: episode 0 frame 0 camera 'top' is marked compressed ...") naming no file.
    path = write_varied(tmp_path / "a.kdb")
    data = bytearray(path.read_bytes())
    start = data.index(b"\xff\xd8\xff")
    data[start:start + 4] = b"\x00\x00\x00\x00"
    path.write_bytes(bytes(data))
    with pytest.raises(arrayio.FormatError, match="episode 0 frame 0 camera 'top' is marked compressed") as caught:
        tools.merge([path], tmp_path / "m.kdb")
    assert caught.value.file == str(path)
    assert not (tmp_path / "m.kdb").exists()
