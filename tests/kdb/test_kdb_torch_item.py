"""FrameDataset[item]'s one-item path (robot/torch_item.py) against the batch path it stands in for: the
same keys in the same order, dtypes, shapes and values, for every item, in every configuration; where it
declines (a window of images, PNG records, a damaged JPEG), the batch path answers."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import arrayio.robot.torch as robot_torch  # noqa: E402
from arrayio import kdb  # noqa: E402
from arrayio.robot import torch_item  # noqa: E402
from arrayio.robot.torch import FrameDataset  # noqa: E402

CONFIGS = {
    "defaults": {},
    "uint8": {"image_format": "uint8"},
    "history and horizon": {"history": 2, "horizon": 3},
    "windows of state and action": {"delta_timestamps": {"state": [-0.4, 0.0], "action": [0.0, 0.2, 0.4]}},
    "windows of images": {"delta_timestamps": {"image.front": [-0.2, 0.0], "terminal": [0.0, 0.2]}},
    "one camera": {"cameras": ["wrist"]},
    "no camera": {"cameras": []},
}


def _batch_path_item(dataset: FrameDataset, item: int, monkeypatch) -> dict:
    with monkeypatch.context() as patched:
        patched.setattr(robot_torch, "one_item", lambda dataset, item: None)
        return dataset[item]


def _assert_same(got: dict, want: dict) -> None:
    assert list(got) == list(want)
    for key, value in want.items():
        assert got[key].dtype == value.dtype and got[key].shape == value.shape, key
        assert got[key].stride() == value.stride(), key  # images: the same channels-last view
        assert torch.equal(got[key], value), key


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("compress", ["jpeg", "png", None])
def test_one_item_equals_the_batch_path_for_every_item(tmp_path, monkeypatch, config, compress):
    from kdb_cases import write_sample

    shards = [write_sample(tmp_path / f"part-{number}.kdb", episodes=2 + number, compress=compress)
              for number in range(2)]
    dataset = FrameDataset(shards, **CONFIGS[config])
    made = 0
    for item in [*range(len(dataset)), -1, -len(dataset)]:
        made += torch_item.one_item(dataset, item) is not None
        _assert_same(dataset[item], _batch_path_item(dataset, item, monkeypatch))
    # it answers for JPEG or raw images at the current frame (and items without images), and declines the rest
    answers = compress != "png" and config != "windows of images" or config == "no camera"
    assert made == (len(dataset) + 2 if answers else 0)


def test_a_returned_item_owns_its_memory(sample):
    """The state/action rows are this process's cached copy of the file's: an item changed in place must not
    change the next item read from them."""
    dataset = FrameDataset(sample)
    first = dataset[2]
    state = first["state"].clone()
    first["state"].add_(100)
    first["action"].add_(100)
    first["image.front"].add_(1)
    again = dataset[2]
    assert torch.equal(again["state"], state) and float(again["image.front"].max()) <= 1


def test_out_of_range_and_damaged_images_say_what_the_batch_path_says(tmp_path, monkeypatch):
    from kdb_cases import write_sample

    path = write_sample(tmp_path / "sample.kdb")
    dataset = FrameDataset(path)
    for item in (len(dataset), -len(dataset) - 1):
        with pytest.raises(IndexError) as fast:
            dataset[item]
        with pytest.raises(IndexError) as batch:
            _batch_path_item(dataset, item, monkeypatch)
        assert str(fast.value) == str(batch.value) and f"frame {item} is outside" in str(fast.value)
    table = dataset.shards.load_images(np.array([0]))
    front = table.columns["front"][int(table.start[0]) + 3]
    damaged = bytearray(path.read_bytes())
    damaged[int(front["offset"]):int(front["offset"]) + 4] = b"GIF8"  # no JPEG any more, its record unchanged
    broken = tmp_path / "broken.kdb"
    broken.write_bytes(bytes(damaged))
    bad = FrameDataset(broken)
    assert torch_item.one_item(bad, 3) is None
    with pytest.raises(kdb.ImageDecodeError) as fast:
        bad[3]
    with pytest.raises(kdb.ImageDecodeError) as batch:
        _batch_path_item(bad, 3, monkeypatch)
    assert str(fast.value) == str(batch.value) and f"byte {int(front['offset'])}" in str(fast.value)
    assert str(fast.value).endswith("found UnidentifiedImageError: cannot identify image file")  # no address
    _assert_same(bad[4], _batch_path_item(bad, 4, monkeypatch))
