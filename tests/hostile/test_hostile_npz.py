"""Issue 19 item 15 (npz input): a 1 MB .npz whose member inflates to 640 MiB is converted in row blocks."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hostile_files import zeros_npz
from hostile_run import PEAK_LIMIT_MB, run_cli_hostile

from arrayio import FormatError, LimitError
from arrayio.convert import convert

pytest.importorskip("zarr")


def test_an_npz_bomb_converts_in_bounded_memory(tmp_path: Path):
    source = zeros_npz(tmp_path / "bomb.npz", "zeros", (640 << 17,))  # 640 MiB of float64 zeros
    assert source.stat().st_size < 1 << 20
    outcome = run_cli_hostile("convert", source, tmp_path / "out.zarr")
    assert outcome.returncode == 0, outcome.stderr
    assert outcome.peak_mb < PEAK_LIMIT_MB, outcome.peak_mb
    import zarr

    converted = zarr.open_group(tmp_path / "out.zarr", mode="r")["zeros"]
    assert converted.shape == (640 << 17,) and not converted[-1000:].any()


def test_an_npz_member_row_over_the_limit_or_short_is_refused(tmp_path: Path):
    huge_row = zeros_npz(tmp_path / "row.npz", "wide", (2, 1 << 28), data_bytes=1024)  # a row of 2 GiB
    with pytest.raises(LimitError, match="npz_member_bytes"):
        convert(huge_row, tmp_path / "row.zarr")
    short = zeros_npz(tmp_path / "short.npz", "rows", (1000, 10), data_bytes=800)
    with pytest.raises(FormatError, match="member 'rows' rows 0..1000"):
        convert(short, tmp_path / "short.zarr")
    assert not (tmp_path / "row.zarr").exists() and not (tmp_path / "short.zarr").exists()
    fine = tmp_path / "fine.npz"
    np.savez_compressed(fine, a=np.arange(12.0).reshape(3, 4), b=np.asfortranarray(np.ones((3, 2))))
    convert(fine, tmp_path / "fine.zarr")
    import zarr

    group = zarr.open_group(tmp_path / "fine.zarr", mode="r")
    np.testing.assert_array_equal(group["a"][:], np.arange(12.0).reshape(3, 4))
    np.testing.assert_array_equal(group["b"][:], np.ones((3, 2)))
