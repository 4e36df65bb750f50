"""Issue 19 item 14 (reader level): one element of a bloscpack chunk claiming 2 GiB decodes one Blosc block."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hostile_files import BLOCK, block_pattern, claiming_bloscpack
from hostile_run import PEAK_LIMIT_MB

from arrayio import LimitError, limits
from arrayio import bloscpack as blp

CLAIMED = (1 << 31) - BLOCK  # the most a Blosc1 chunk holds, rounded to whole blocks


def test_one_element_of_a_2_gib_chunk_stays_small(hostile, tmp_path: Path):
    path = claiming_bloscpack(tmp_path / "claims-2GiB.blp", CLAIMED)
    assert path.stat().st_size < 200_000
    outcome = hostile("""
import sys
from arrayio import LimitError
from arrayio import bloscpack as blp
with blp.open(sys.argv[1]) as f:
    print(f.shape[0], f[0:1].tolist(), f[-1], f[70000:70002].tolist(), f.validate())
    try:
        f.read_chunk(0)
    except LimitError as error:
        print(error.limit)
""", path)
    assert outcome.returncode == 0, outcome.stderr
    expected = [str(CLAIMED), "[0]", str((BLOCK - 1) % 251), f"[{70000 % BLOCK % 251},", f"{70001 % BLOCK % 251}]",
                "[]", "chunk_bytes"]
    assert outcome.stdout.split() == expected
    assert outcome.peak_mb < PEAK_LIMIT_MB, outcome.peak_mb


@pytest.fixture
def small_blocks():
    """python-blosc compresses in small blocks (so every chunk has several, and a short last one)."""
    blosc = pytest.importorskip("blosc")
    blosc.set_blocksize(1 << 14)
    yield 1 << 14
    blosc.set_blocksize(0)


@pytest.mark.parametrize("dtype", [np.int64, np.int16])
def test_block_reads_match_whole_chunk_reads(tmp_path: Path, small_blocks: int, dtype):
    # Every codec and shuffle: a slice read block by block (the chunks over a lowered limit) equals
    # the same slice of the whole array decoded chunk by chunk.
    data = (np.arange(300_001) // 7).astype(dtype)
    for cname in ("blosclz", "lz4", "zlib", "zstd"):
        for shuffle in (0, 1, 2):
            path = tmp_path / f"{cname}{shuffle}.blp"
            blp.pack_ndarray_to_file(data, path, chunk_size="1M", blosc_args={"cname": cname, "shuffle": shuffle})
            with blp.open(path) as f:
                largest = max(f.chunk_location(index)[1].blocksize for index in range(f.nchunks))
                assert largest < f.chunk_location(0)[1].nbytes  # several blocks per chunk
                whole = f[:]
                with limits.raised(chunk_bytes=largest):
                    for start, stop in ((0, 1), (12_345, 80_000), (131_070, 131_075), (299_990, 300_001)):
                        np.testing.assert_array_equal(f[start:stop], whole[start:stop])
                    assert f.validate() == []
                    with pytest.raises(LimitError, match="chunk_bytes"):
                        f.read_chunk(0)
            np.testing.assert_array_equal(whole, data)


def test_decompress_streams_a_chunk_over_the_limit_in_parts(tmp_path: Path):
    path = claiming_bloscpack(tmp_path / "claims-4MiB.blp", 64 * BLOCK)
    with limits.raised(chunk_bytes=3 * BLOCK + 5):
        blp.unpack_file_from_file(path, tmp_path / "out.bin")
        with pytest.raises(LimitError, match=r"chunk_bytes = 196613 bytes.*raised\(chunk_bytes=\.\.\.\)"):
            blp.open(path).read_chunk(0)
    assert (tmp_path / "out.bin").read_bytes() == np.tile(block_pattern(), 64).tobytes()


def test_the_chunk_limit_is_raised_from_the_environment(hostile, tmp_path: Path):
    path = claiming_bloscpack(tmp_path / "claims-4MiB.blp", 64 * BLOCK)
    code = """
import sys
from arrayio import LimitError
from arrayio import bloscpack as blp
try:
    print(len(blp.open(sys.argv[1]).read_chunk(0)))
except LimitError as error:
    print(error.limit, error.value)
"""
    assert hostile(code, path, env={"ARRAYIO_LIMITS": "chunk_bytes=1M"}).stdout.split() == ["chunk_bytes", "1048576"]
    assert hostile(code, path, env={"ARRAYIO_LIMITS": "chunk_bytes=8M"}).stdout.split() == [str(64 * BLOCK)]
