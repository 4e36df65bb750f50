"""convert decides by models, needs zarr only when a Zarr store is a side, and streams its inputs."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import zipfile

import numpy as np
import pytest
import zarr
from ecosystem_cases import KEYED

import arrayio
import arrayio.bloscpack as blp
from arrayio import pycauset
from arrayio.convert import convert

# A plain `pip install .` has none of these: the script below refuses to import them.
_OPTIONAL = ("zarr", "dask", "distributed", "xarray", "numcodecs", "kerchunk", "fsspec")

_WITHOUT_OPTIONAL = textwrap.dedent("""
    import importlib.abc, sys
    class Refuse(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name.split(".")[0] in {blocked!r}:
                raise ModuleNotFoundError(f"No module named {{name!r}}")
    sys.meta_path.insert(0, Refuse())
    sys.argv = ["arrayio", *sys.argv[1:]]
    from arrayio.cli import main
    main()
""").format(blocked=_OPTIONAL)


def _convert_without_optional(cli_argv, *args):
    argv, env = cli_argv("convert", *args)
    return subprocess.run([sys.executable, "-c", _WITHOUT_OPTIONAL, *argv[-len(args) - 1:]], capture_output=True,
                          env=env, timeout=120)


def test_plain_install_converts_keyed_files_and_matrices_without_zarr(cli_argv, kas_file, pycauset_file, tmp_path):
    chain = [kas_file, tmp_path / "a.kast", tmp_path / "a.npz", tmp_path / "b.kas"]
    for source, target in zip(chain, chain[1:]):
        result = _convert_without_optional(cli_argv, source, target)
        assert result.returncode == 0, result.stderr.decode()
    with arrayio.open(chain[-1]) as store:
        assert {key: np.array(store[key]) for key in store}.keys() == KEYED.keys()
        assert all(np.array_equal(store[key], values) for key, values in KEYED.items())
    path, matrix = pycauset_file
    for source, target in ((path, tmp_path / "m.npy"), (tmp_path / "m.npy", tmp_path / "back.pycauset")):
        result = _convert_without_optional(cli_argv, source, target)
        assert result.returncode == 0, result.stderr.decode()
    assert np.array_equal(pycauset.load(tmp_path / "back.pycauset").values(), matrix)
    # A Zarr side still says what it needs.
    result = _convert_without_optional(cli_argv, kas_file, tmp_path / "x.zarr")
    assert result.returncode != 0 and b"zarr" in result.stderr


@pytest.mark.parametrize("extension", ["blp", "pycauset", "npy"])
def test_zarr_array_at_the_store_root_converts_to_one_array_formats(tmp_path, extension):
    array = np.arange(60, dtype=np.float64).reshape(12, 5)
    zarr.save(str(tmp_path / "x.zarr"), array)
    convert(tmp_path / "x.zarr", tmp_path / f"out.{extension}")
    if extension == "blp":
        found = blp.unpack_ndarray_from_file(tmp_path / "out.blp")
    elif extension == "pycauset":
        found = pycauset.load(tmp_path / "out.pycauset").values()
    else:
        found = np.load(tmp_path / "out.npy")
    assert np.array_equal(found, array)


def test_npz_members_are_streamed_not_inflated_whole(tmp_path, monkeypatch):
    """A 200 MB member deflated to a few hundred KB: converting it holds one block, not the member."""
    import tracemalloc

    import arrayio.convert

    source = tmp_path / "zeros.npz"
    member = np.zeros(25_000_000, dtype=np.float64)  # 200 MB
    with zipfile.ZipFile(source, "w", compression=zipfile.ZIP_DEFLATED) as archive, \
            archive.open("zeros.npy", "w", force_zip64=True) as stream:
        np.lib.format.write_array(stream, member)
    del member
    assert source.stat().st_size < 1 << 20
    monkeypatch.setattr(arrayio.convert, "_BLOCK_BYTES", 1 << 20)
    tracemalloc.start()
    try:
        convert(source, tmp_path / "zeros.kast")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 32 << 20, f"peak {peak >> 20} MiB of Python/numpy memory for a 200 MB member"
    with arrayio.open(tmp_path / "zeros.kast") as store:
        assert store["zeros"].shape == (25_000_000,) and not store["zeros"][::1000].any()
