"""The datasets and loaders of arrayio.robot say which argument is wrong and why: before, a float index or
history was truncated, a NaN offset or tolerance accepted, a camera name split into letters, an empty batch
ended in a KeyError and a bad device or mixture entry in a message about something else."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from arrayio.robot.torch import EpisodeDataset, FrameDataset, MixtureDataset  # noqa: E402
from arrayio.robot.torch_loader import GpuLoader  # noqa: E402


@pytest.mark.parametrize("item", [1.5, 2.0, "3", True, np.float64(1.0), torch.tensor(1.5)])
def test_a_frame_index_that_is_not_an_integer_is_refused_not_truncated(sample, item):
    dataset = FrameDataset(sample)
    with pytest.raises(TypeError, match="a frame index must be an integer"):
        dataset[item]
    if item is not True:  # numpy reads [0, True] as integers, as it reads any list of ints and bools
        with pytest.raises(TypeError, match="a frame index must be an integer"):
            dataset.__getitems__([0, item])


def test_integer_indices_of_every_kind_still_work(sample):
    dataset = FrameDataset(sample)
    assert int(dataset[np.int64(3)]["index"]) == 3 and int(dataset[torch.tensor(4)]["index"]) == 4
    assert dataset.__getitems__(np.array([1, 2], np.uint8)).batch["index"].tolist() == [1, 2]
    assert dataset.__getitems__(torch.tensor([2, -1])).batch["index"].tolist() == [2, len(dataset) - 1]
    with pytest.raises(IndexError, match="outside"):
        dataset.__getitems__([0, 2**70])
    with pytest.raises(IndexError, match="outside"):
        dataset.__getitems__(np.array([0, 2**64 - 1], np.uint64))


def test_an_empty_batch_says_so(sample):
    with pytest.raises(ValueError, match=r"at least one index \(a frame\)"):
        FrameDataset(sample).__getitems__([])


@pytest.mark.parametrize("offset", [float("nan"), float("inf"), -float("inf"), "0.1", None])
def test_delta_timestamps_must_be_finite_seconds(sample, offset):
    with pytest.raises(ValueError, match=r"delta_timestamps\['action'\]\[1\] must be a finite number"):
        FrameDataset(sample, delta_timestamps={"action": [0.0, offset]})


def test_delta_timestamps_far_past_any_episode_are_refused(sample):
    with pytest.raises(ValueError, match=r"delta_timestamps\['action'\] = 1e\+300 s is more than"):
        FrameDataset(sample, delta_timestamps={"action": [1e300]})
    assert FrameDataset(sample, delta_timestamps={"action": [1e6]})[0]["action_is_pad"].tolist() == [True]


@pytest.mark.parametrize("window", ["abc", 0.1, {"a": 1}])
def test_a_window_that_is_not_a_list_of_seconds_is_named(sample, window):
    with pytest.raises(TypeError, match=r"delta_timestamps\['action'\] must be a list of offsets"):
        FrameDataset(sample, delta_timestamps={"action": window})
    with pytest.raises(TypeError, match="delta_timestamps must be a mapping"):
        FrameDataset(sample, delta_timestamps=[("action", [0.0])])


@pytest.mark.parametrize("tolerance", [float("nan"), -1.0, "x"])
def test_the_tolerance_is_a_finite_number_of_seconds(sample, tolerance):
    with pytest.raises((TypeError, ValueError), match="tolerance_s must be a"):
        FrameDataset(sample, delta_timestamps={"action": [0.0]}, tolerance_s=tolerance)


@pytest.mark.parametrize(("keyword", "value", "error"), [
    ("history", 1.5, TypeError), ("history", -1, ValueError), ("horizon", "2", TypeError),
    ("horizon", 0, ValueError), ("horizon", 2.0, TypeError)])
def test_history_and_horizon_are_whole_numbers(sample, keyword, value, error):
    with pytest.raises(error, match=f"{keyword} must be"):
        FrameDataset(sample, **{keyword: value})


def test_one_camera_name_is_one_camera_not_its_letters(sample):
    assert FrameDataset(sample, cameras="front").cameras == ["front"]
    assert FrameDataset(sample, cameras="front")[0]["image.front"].shape[0] == 3
    assert EpisodeDataset(sample, cameras="wrist").cameras == ["wrist"]
    with pytest.raises(TypeError, match="camera names"):
        FrameDataset(sample, cameras=[0])


def test_an_episode_index_that_is_not_an_integer_is_refused(sample):
    with pytest.raises(TypeError, match="an episode index must be an integer"):
        EpisodeDataset(sample)[0.5]
    assert EpisodeDataset(sample)[np.int64(-1)]["shard"] == 0


@pytest.mark.parametrize(("options", "error", "message"), [
    ({"cores": 0}, ValueError, "cores must be >= 1"),
    ({"cores": -3}, ValueError, "cores must be >= 1"),
    ({"cores": 2.5}, TypeError, "cores must be a whole number"),
    ({"switch_interval_s": float("nan")}, ValueError, "switch_interval_s must be a finite number > 0"),
    ({"switch_interval_s": 0}, ValueError, "switch_interval_s must be a finite number > 0"),
    ({"prefetch": 1.5}, TypeError, "prefetch must be a whole number"),
    ({"prefetch": 0}, ValueError, "prefetch must be >= 1"),
    ({"num_workers": 1.0}, TypeError, "num_workers must be a whole number"),
    ({"device": "bogus"}, ValueError, "device 'bogus' is not a torch device"),
    ({"device": 3.5}, ValueError, "device 3.5 is not a torch device"),
])
def test_the_loader_names_the_argument_it_cannot_take(sample, options, error, message):
    with pytest.raises(error, match=message):
        GpuLoader(FrameDataset(sample), 4, **{"device": "cpu", **options})
    with pytest.raises(ValueError, match="batch_size must be >= 1"):
        GpuLoader(FrameDataset(sample), 0, device="cpu")


def test_a_mixture_names_the_entry_it_cannot_take(sample):
    dataset = FrameDataset(sample)
    with pytest.raises(TypeError, match=r"mixture entry 0 must be a \(dataset, weight\) pair"):
        MixtureDataset([dataset])
    with pytest.raises(TypeError, match=r"mixture weights\[1\] must be a number, got 'abc'"):
        MixtureDataset([(dataset, 1), (dataset, "abc")])
    with pytest.raises(TypeError, match="num_samples must be a whole number"):
        MixtureDataset([(dataset, 1)], num_samples=2.7)
    with pytest.raises(ValueError, match="seed must be >= 0"):
        MixtureDataset([(dataset, 1)], seed=-1)
    assert len(MixtureDataset([(dataset, np.float32(1))], num_samples=np.int64(5))) == 5


def test_decode_batch_and_the_read_ahead_sampler_name_what_they_cannot_take(sample):
    # Before: torch's "Expected one of cpu, cuda, ... device type at start of device string: bogus" with no
    # word of kdb, and workers=2.5 silently taken as 2.
    from arrayio.robot.torch import ReadAheadSampler, collate, decode_batch

    batch = collate(FrameDataset(sample, decode="none").__getitems__([0, 1]))
    with pytest.raises(ValueError, match="kdb: device 'bogus' is not a torch device"):
        decode_batch(batch, device="bogus")
    batches = torch.utils.data.BatchSampler(range(4), 2, drop_last=False)
    with pytest.raises(TypeError, match="workers must be a whole number"):
        ReadAheadSampler(batches, 2.5)
    with pytest.raises(ValueError, match="workers must be >= 0"):
        ReadAheadSampler(batches, -1)
    assert [list(items) for items in ReadAheadSampler(batches, 0)] == [[0, 1], [2, 3]]
