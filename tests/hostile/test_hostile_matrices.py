"""Issue 19 item 13: a 4 KB pycauset IDENTITY file declaring n = 2**31 (16 GiB per row)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hostile_run import PEAK_LIMIT_MB, run_cli_hostile

from arrayio import LimitError, limits
from arrayio.pycauset._writer import write_container


def identity_file(path: Path, n: int) -> Path:
    """A container whose metadata declares an n x n IDENTITY matrix (it has no payload bytes)."""
    write_container(path, iter([]), 0, {"matrix_type": "IDENTITY", "data_type": "FLOAT64", "rows": n, "cols": n,
                                        "payload_uuid": "x"})
    return path


@pytest.mark.parametrize("target", ["out.npy", "out.zarr", "out.blp"])
def test_convert_of_a_2_31_identity_is_refused_and_leaves_nothing(tmp_path: Path, target: str):
    identity_file(tmp_path / "ident.pycauset", 2**31)
    outcome = run_cli_hostile("convert", "ident.pycauset", target, cwd=tmp_path)
    assert outcome.returncode == 1, outcome.stderr
    assert "row_block_bytes" in outcome.last_line and "Traceback" not in outcome.stderr
    assert sorted(path.name for path in tmp_path.iterdir()) == ["ident.pycauset"]
    assert outcome.peak_mb < PEAK_LIMIT_MB, outcome.peak_mb


def test_the_zarr_view_refuses_the_row_and_the_limit_can_be_raised(tmp_path: Path):
    zarr = pytest.importorskip("zarr")
    from arrayio.zarr import open_store

    with pytest.raises(LimitError, match="row_block_bytes"):
        open_store(identity_file(tmp_path / "huge.pycauset", 2**31))
    small = identity_file(tmp_path / "small.pycauset", 300)  # 2400 bytes a row
    with limits.raised(row_block_bytes=1000), pytest.raises(LimitError, match="row_block_bytes = 1000 bytes"):
        open_store(small)
    matrix = zarr.open_group(open_store(small), mode="r")["matrix"]
    np.testing.assert_array_equal(matrix[:], np.eye(300))
