"""The 222-byte golden vector of notes/kdb.md §2.9, read byte for byte and written back identically."""

from __future__ import annotations

import numpy as np
import pytest
from kdb_cases import GOLDEN, GOLDEN_EPISODE

from arrayio import kdb
from arrayio.errors import FormatError, VersionTooNewError


def test_golden_is_222_bytes():
    assert len(GOLDEN) == 222


@pytest.mark.parametrize("as_path", [False, True])
def test_golden_reads(tmp_path, as_path):
    target = GOLDEN
    if as_path:
        target = tmp_path / "golden.kdb"
        target.write_bytes(GOLDEN)
    with kdb.open(target) as f:
        assert f.source.is_mapped == as_path
        assert (len(f), f.num_frames, f.version) == (1, 2, "0.1")
        assert f.header.index_offset == 158 and f.header.index_length == 64
        assert f.header.created_timestamp == 1700000000
        entry = f.index[0]
        assert [int(entry[name]) for name in ("actions_offset", "actions_length", "images_offset",
                                              "images_length", "meta_offset", "meta_length")] == [80, 34, 114, 44,
                                                                                                   64, 16]
        meta = f.read_meta(0)
        assert meta == kdb.EpisodeMeta(episode_id=0, num_frames=2, state_dim=2, action_dim=1, embodiment="a",
                                       task="t", fps=10.0, success=True, total_reward=1.0)
        episode = f.read_episode(0)
        np.testing.assert_array_equal(episode.states, GOLDEN_EPISODE["states"])
        np.testing.assert_array_equal(episode.actions, GOLDEN_EPISODE["actions"])
        np.testing.assert_array_equal(episode.rewards, GOLDEN_EPISODE["rewards"])
        np.testing.assert_array_equal(episode.terminals, [0, 1])
        np.testing.assert_array_equal(episode.images["c"], GOLDEN_EPISODE["images"]["c"])
        record = f.image_records(0, 1)[0]
        assert (record.camera, record.width, record.height, record.channels, record.format, record.offset,
                record.length) == ("c", 1, 1, 3, 0, 155, 3)


def test_golden_arrays_are_zero_copy_views(tmp_path):
    path = tmp_path / "golden.kdb"
    path.write_bytes(GOLDEN)
    with kdb.open(path) as f:
        episode = f.read_episode(0)
        for array in (episode.states, episode.actions, episode.rewards, episode.terminals):
            assert not array.flags.owndata and not array.flags.writeable
        raw = f.read_frame(0, 0).images["c"]
        assert not raw.flags.owndata


def test_writer_bytes_equal_golden(tmp_path):
    path = tmp_path / "out.kdb"
    with kdb.Writer(path, created_timestamp=1700000000) as writer:
        assert writer.add_episode(**GOLDEN_EPISODE) == 0
    assert path.read_bytes() == GOLDEN


def test_streaming_writer_bytes_equal_golden(tmp_path):
    path = tmp_path / "out.kdb"
    episode = GOLDEN_EPISODE
    with kdb.Writer(path, created_timestamp=1700000000) as writer:
        writer.begin_episode(state_dim=2, action_dim=1, embodiment="a", task="t", fps=10.0)
        for t in range(2):
            writer.add_frame(episode["states"][t], episode["actions"][t], reward=episode["rewards"][t],
                             terminal=episode["terminals"][t], images={"c": episode["images"]["c"][t]})
        assert writer.end_episode(success=True, total_reward=1.0) == 0
    assert path.read_bytes() == GOLDEN


def test_newer_minor_is_accepted():
    data = bytearray(GOLDEN)
    data[6:8] = (99).to_bytes(2, "little")
    with kdb.open(bytes(data)) as f:
        assert f.version == "0.99" and f.read_meta(0).task == "t"


def test_newer_major_is_rejected():
    data = bytearray(GOLDEN)
    data[4:6] = (1).to_bytes(2, "little")
    with pytest.raises(kdb.UnsupportedVersion) as caught:
        kdb.open(bytes(data))
    assert isinstance(caught.value, VersionTooNewError)
    assert "header.version_major at byte 4" in str(caught.value)


def test_golden_validates_clean(tmp_path):
    path = tmp_path / "golden.kdb"
    path.write_bytes(GOLDEN)
    assert kdb.validate(path) == []


def test_error_classes_are_format_errors():
    for cls in (kdb.KinoError, kdb.BadMagic, kdb.UnexpectedEof, kdb.UnsupportedVersion, kdb.InvalidUtf8,
                kdb.ImageDecodeError):
        assert issubclass(cls, FormatError)
    assert issubclass(kdb.EpisodeNotFound, IndexError)
    assert issubclass(kdb.EpisodeIdNotFound, KeyError)
