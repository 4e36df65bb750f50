"""Issue 19 item 1: the dask graph and the reference set a file makes are counted against limits."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from arrayio import LimitError, kastore, limits
from arrayio import bloscpack as blp


def test_a_dask_graph_over_graph_tasks_is_refused(tmp_path: Path):
    pytest.importorskip("dask")
    from arrayio.dask import to_dask

    path = tmp_path / "many.blp"
    blp.pack_ndarray_to_file(np.arange(5000, dtype=np.int64), path, chunk_size=400)  # 100 chunks
    # block_bytes=1: a task per chunk (runs of chunks up to the default block size would be one task here)
    assert int(to_dask(path, block_bytes=1).sum().compute()) == sum(range(5000))
    with limits.raised(graph_tasks=99), pytest.raises(LimitError, match=r"graph_tasks = 99 tasks"):
        to_dask(path, block_bytes=1)


def test_a_reference_set_over_references_is_refused(tmp_path: Path):
    pytest.importorskip("zarr")
    from arrayio.kerchunk import references

    path = tmp_path / "keys.kas"
    kastore.dump({f"key{number}": np.arange(number + 1) for number in range(40)}, path)
    assert len(references(path)["refs"]) > 40 * 3
    with limits.raised(references=50), pytest.raises(LimitError, match="references = 50 references"):
        references(path)
