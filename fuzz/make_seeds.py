"""Write the seed corpus: small valid files covering every feature of every format, plus the tests' crafted files.

    python fuzz/make_seeds.py [--out fuzz/seeds] [--no-crafted]

Valid seeds come from our writers (every kastore/KAST dtype, empty stores and
arrays; bloscpack codecs, checksums, metadata, offsets, empty data and byte
streams; kdb JPEG/PNG/raw images, rewards, several episodes; pycauset every
matrix layout and data type and every metadata value type). Crafted seeds are
the bytes the format tests write or load (golden files, corpora and the
malformed cases), collected by running those tests with a recording plugin.
Every seed stays under ``_common.MAX_LEN`` bytes.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import _common
import numpy as np
from _common import FUZZ_DIR, MAX_LEN, ROOT

KEYED_DTYPES = ("int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float32", "float64")


def keyed_seeds(dumps: Callable[[dict], bytes]) -> Iterator[tuple[str, bytes]]:
    """kastore/KAST stores: every dtype, empty store, empty arrays, one key, unicode keys, many keys."""
    rng = np.random.default_rng(1)
    every = {f"a_{name}": (rng.standard_normal(5) * 100).astype(name) for name in KEYED_DTYPES}
    yield "every_dtype", dumps(every)
    yield "empty_store", dumps({})
    yield "empty_arrays", dumps({f"e_{name}": np.zeros(0, name) for name in KEYED_DTYPES})
    yield "one_key", dumps({"x": np.arange(3, dtype=np.int32)})
    yield "unicode_keys", dumps({"ключ": np.arange(2, dtype=np.uint8), "键": np.ones(1), "é": np.zeros(3, np.int16)})
    yield "many_keys", dumps({f"k{index:03d}": np.arange(index % 4, dtype=np.int8) for index in range(60)})
    yield "long_array", dumps({"long": np.arange(600, dtype=np.float64)})
    for name in KEYED_DTYPES:
        yield f"single_{name}", dumps({name: np.arange(7).astype(name)})


def bloscpack_seeds() -> Iterator[tuple[str, bytes]]:
    """Every codec and checksum, with and without offsets and metadata, arrays of several dtypes and orders,
    empty data and byte streams."""
    import arrayio.bloscpack as bp

    array = np.arange(600, dtype=np.float64).reshape(60, 10)
    for cname in ("blosclz", "lz4", "lz4hc", "zlib", "zstd"):
        yield f"codec_{cname}", bp.pack_ndarray_to_bytes(array, chunk_size=1024, blosc_args={"cname": cname})
    for checksum in bp.CHECKSUM_NAMES:
        yield f"checksum_{checksum}", bp.pack_ndarray_to_bytes(
            np.arange(64, dtype=np.int32), chunk_size=128, bloscpack_args={"checksum": checksum})
    yield "no_offsets", bp.pack_ndarray_to_bytes(array, chunk_size=1024, bloscpack_args={"offsets": False})
    yield "no_app_chunks", bp.pack_ndarray_to_bytes(array, chunk_size=2048, bloscpack_args={"max_app_chunks": 0})
    yield "noshuffle_clevel0", bp.pack_ndarray_to_bytes(
        array, chunk_size=2048, blosc_args={"shuffle": False, "clevel": 0})
    yield "fortran", bp.pack_ndarray_to_bytes(np.asfortranarray(array[:20]), chunk_size=512)
    yield "uint8_3d", bp.pack_ndarray_to_bytes(np.arange(120, dtype=np.uint8).reshape(4, 5, 6), chunk_size=50)
    yield "complex", bp.pack_ndarray_to_bytes(np.arange(30, dtype=np.complex64) * 1j, chunk_size=64)
    yield "structured", bp.pack_ndarray_to_bytes(np.zeros(8, dtype=[("a", "<i4"), ("b", "<f8")]), chunk_size=48)
    yield "strings", bp.pack_ndarray_to_bytes(np.array(["ab", "cde", "f"]), chunk_size=24)
    yield "scalar", bp.pack_ndarray_to_bytes(np.array(3.5))
    yield "empty_array", bp.pack_ndarray_to_bytes(np.zeros(0, dtype=np.float32))
    yield "one_chunk", bp.pack_ndarray_to_bytes(np.arange(10, dtype=np.int16))
    data = bytes(range(256)) * 6
    yield "bytes", bp.pack_bytes_to_bytes(data, chunk_size=500)
    yield "bytes_empty", bp.pack_bytes_to_bytes(b"")
    yield "bytes_metadata", bp.pack_bytes_to_bytes(data, chunk_size=700, metadata={"name": "x", "list": [1, 2.5, None]})
    yield "bytes_metadata_raw", bp.pack_bytes_to_bytes(
        data[:300], chunk_size=128, metadata={"a": "b" * 40},
        metadata_args={"meta_codec": "None", "meta_checksum": "sha256"})
    yield "bytes_metadata_nochecksum", bp.pack_bytes_to_bytes(
        data[:100], metadata={"k": 1}, metadata_args={"meta_checksum": "None"})
    yield "bytes_no_offsets_crc", bp.pack_bytes_to_bytes(
        data, chunk_size=300, bloscpack_args={"offsets": False, "checksum": "crc32"})


def kdb_seeds(folder: Path) -> Iterator[tuple[str, bytes]]:
    """JPEG, PNG and raw images, several cameras and episodes, rewards, success flags, no images."""
    from arrayio import kdb

    rng = np.random.default_rng(2)

    def write(name: str, compress: str | None, episodes: list[dict]) -> tuple[str, bytes]:
        path = folder / f"{name}.kdb"
        with kdb.Writer(path, compress=compress, created_timestamp=1_700_000_000) as writer:
            for episode in episodes:
                writer.add_episode(**episode)
        return name, path.read_bytes()

    def episode(frames: int, cameras: dict, **extra) -> dict:
        return {"states": rng.standard_normal((frames, 3)).astype(np.float32),
                "actions": rng.standard_normal((frames, 2)).astype(np.float32), "images": cameras,
                "embodiment": "arm", "task": "reach", **extra}

    def pixels(frames: int, channels: int, size: int = 8) -> np.ndarray:
        return rng.integers(0, 256, (frames, size, size, channels), dtype=np.uint8)

    yield write("jpeg", "jpeg", [episode(3, {"front": pixels(3, 3)}), episode(2, {"grey": pixels(2, 1)})])
    yield write("png", "png", [episode(2, {"rgba": pixels(2, 4), "grey": pixels(2, 1)})])
    yield write("raw", None, [episode(3, {"front": pixels(3, 3, 4)}, success=True, fps=30.0)])
    yield write("rewards", None, [episode(4, {}, rewards=np.linspace(0, 1, 4, dtype=np.float32),
                                          terminals=np.array([0, 0, 0, 1], bool), success=False,
                                          total_reward=1.5)])
    yield write("several", "png", [episode(frames, {"c": pixels(frames, 3, 4)}, success=frames % 2 == 0)
                                   for frames in (1, 2, 3, 2)])
    yield write("no_images", None, [episode(5, {}), episode(1, {})])
    yield write("empty", None, [])
    jpeg = kdb.EncodedImage(kdb_jpeg(), "jpeg")
    yield write("encoded", None, [episode(2, {"enc": [jpeg, jpeg]})])


def kdb_jpeg() -> bytes:
    """A small JPEG made by Pillow (so the seeds cover Pillow-written bytes too)."""
    import io

    from PIL import Image

    out = io.BytesIO()
    Image.fromarray(np.full((8, 8, 3), 120, np.uint8)).save(out, format="JPEG")
    return out.getvalue()


def pycauset_seeds(folder: Path) -> Iterator[tuple[str, bytes]]:
    """Dense matrices and vectors of every data type, every packed layout, metadata of every value type."""
    import arrayio.pycauset as pc

    def write(name: str, matrix, **options) -> tuple[str, bytes]:
        path = folder / f"{name}.pycauset"
        pc.save(matrix, path, **options)
        return name, path.read_bytes()

    square = np.arange(16, dtype=np.float64).reshape(4, 4)
    for dtype in ("float16", "float32", "float64", "complex64", "complex128", "int8", "int16", "int32", "int64",
                  "uint8", "uint16", "uint32", "uint64", "bool"):
        yield write(f"dense_{dtype}", (np.arange(12).reshape(3, 4) % 3).astype(dtype))
    yield write("vector", np.arange(5, dtype=np.float64))
    yield write("vector_bool", np.array([True, False, True]))
    yield write("empty_matrix", np.zeros((0, 0)))
    yield write("empty_vector", np.zeros(0, dtype=np.int32))
    yield write("triangular", pc.triangular(np.triu(square, 1)))
    yield write("triangular_diagonal", pc.triangular(np.triu(square), diagonal=True))
    yield write("causal", pc.causal(np.triu(np.ones((5, 5), bool), 1)))
    yield write("symmetric", pc.symmetric(square + square.T))
    yield write("antisymmetric", pc.antisymmetric(square - square.T))
    yield write("diagonal", pc.diagonal(np.arange(4, dtype=np.float32)))
    yield write("metadata", square, properties={"flag": True, "n": -3, "x": 2.5, "s": "text", "b": b"\x00\x01",
                                                "list": [1, "a", [2.0]], "map": {"inner": {"deep": 1}}})
    yield write("metadata_extra", square[:2], metadata={"provenance": {"tool": "fuzz", "run": 1}})
    name, _ = write("updated", square)
    path = folder / f"{name}.pycauset"
    pc.update_metadata(path, {"note": "second generation"})
    yield "updated", path.read_bytes()
    pc.update_metadata(path, {"note": "third", "more": [1, 2, 3]})
    yield "updated_twice", path.read_bytes()


def valid_seeds(format: str, folder: Path) -> Iterator[tuple[str, bytes]]:
    """The valid seed files of ``format`` as (name, bytes)."""
    if format in _common.AROUND:  # the harnesses around the readers build their own
        yield from _common.harness(format).seeds(folder)
    elif format in ("kastore", "kast"):
        import importlib

        yield from keyed_seeds(importlib.import_module(f"arrayio.{format}").dumps)
    elif format == "bloscpack":
        yield from bloscpack_seeds()
    elif format == "kdb":
        yield from kdb_seeds(folder)
    else:
        yield from pycauset_seeds(folder)


# The format tests whose files (golden, corpora, crafted malformed cases) become crafted seeds.
CRAFTED_TESTS = {
    "kastore": ["tests/kastore/test_kastore_malformed.py", "tests/kastore/test_kastore_layout.py",
                "tests/kastore/test_kastore_standard_files.py"],
    "kast": ["tests/kast/test_kast_malformed.py", "tests/kast/test_kast_roundtrip.py"],
    "bloscpack": ["tests/bloscpack/test_bloscpack_malformed.py", "tests/bloscpack/test_bloscpack_layout.py"],
    "kdb": ["tests/kdb/test_kdb_corrupt.py", "tests/kdb/test_kdb_golden.py"],
    "pycauset": ["tests/pycauset/test_pycauset_container.py", "tests/pycauset/test_pycauset_codec.py"],
}


def crafted_seeds(format: str, out: Path) -> int:
    """Run the format's crafted-file tests with the recording plugin; the files land in ``out``."""
    tests = [test for test in CRAFTED_TESTS.get(format, []) if (ROOT / test).exists()]
    if not tests:
        return 0
    env = {**_environ(), "ARRAYIO_SEED_OUT": str(out), "ARRAYIO_SEED_FORMAT": format,
           "ARRAYIO_SEED_MAX_LEN": str(MAX_LEN)}
    before = len(list(out.iterdir()))
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "_record_seeds", "--no-header",
                    "-p", "no:cacheprovider", *tests], cwd=ROOT, env=env, check=False,
                   stdout=subprocess.DEVNULL)
    return len(list(out.iterdir())) - before


def _environ() -> dict[str, str]:
    import os

    paths = [str(ROOT / "src"), str(FUZZ_DIR), os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(path for path in paths if path)}


def main() -> None:
    """Write every format's seeds under --out/<format>/."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=FUZZ_DIR / "seeds")
    parser.add_argument("--format", choices=_common.HARNESSES, action="append")
    parser.add_argument("--no-crafted", action="store_true", help="only the valid files from our writers")
    args = parser.parse_args()
    for format in args.format or _common.FORMATS:
        target = args.out / format
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True)
        with tempfile.TemporaryDirectory() as scratch:
            count = 0
            for name, data in valid_seeds(format, Path(scratch)):
                if len(data) > MAX_LEN:
                    raise SystemExit(f"fuzz: seed {format}/{name} has {len(data)} bytes, more than {MAX_LEN}")
                (target / f"valid-{name}").write_bytes(data)
                count += 1
        crafted = 0 if args.no_crafted else crafted_seeds(format, target)
        size = sum(path.stat().st_size for path in target.iterdir())
        print(f"{format}: {count} valid + {crafted} crafted seeds, {size} bytes")


def digest(data: bytes) -> str:
    """A short content name for a seed or regression file."""
    return hashlib.sha1(data).hexdigest()[:16]


if __name__ == "__main__":
    main()
