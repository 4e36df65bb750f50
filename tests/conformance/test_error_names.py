"""Every FormatError names its file, for every format, wherever the file lives and whenever the damage is found.

``test_damage`` checks it for every truncation and bit flip of a local file; this suite checks the other
ways in (a URL, bytes, the CLI, a pickled error from a worker) and the errors found after open, on a read.
"""

from __future__ import annotations

import json
import pickle
import subprocess
import sys

import numpy as np
import pytest

import arrayio
from arrayio._registry import FORMATS

from .formats import read_everything


def _cut(format_name, demo, tmp_path):
    """The demo file cut in half, beside the test (a truncation every format rejects)."""
    data = demo.read_bytes()
    path = tmp_path / f"cut{FORMATS[format_name].extensions[0]}"
    path.write_bytes(data[: len(data) // 2])
    return path


def _first_error(module, target, format_name):
    """The FormatError that opening and reading ``target`` completely raises."""
    with pytest.raises(arrayio.FormatError) as caught:
        with module.open(target) as reader:
            reader.info()
            read_everything(format_name, reader)
    return caught.value


def test_a_local_file_is_named_and_its_problems_leave_the_name_to_the_caller(format_name, demo, module, tmp_path):
    path = _cut(format_name, demo, tmp_path)
    error = _first_error(module, path, format_name)
    assert error.file == str(path)
    assert str(error) == f"{path}: {error.message}" and error.message.startswith(f"{format_name}:")
    problems = arrayio.validate(path)
    assert problems and not any(str(path) in problem.message for problem in problems)


def test_a_url_is_named(format_name, demo, module, http_server):
    data = demo.read_bytes()
    url = http_server.put(f"error-names/cut-{demo.name}", data[: len(data) // 2])
    error = _first_error(module, url, format_name)
    assert error.file == url and str(error).startswith(f"{url}: {format_name}:")


def test_bytes_have_no_name_to_give(format_name, demo, module):
    data = demo.read_bytes()
    error = _first_error(module, data[: len(data) // 2], format_name)
    assert error.file is None and str(error) == error.message


def test_the_name_survives_pickling(format_name, demo, module, tmp_path):
    # A DataLoader or dask worker raises it again in the parent from its pickle.
    error = _first_error(module, _cut(format_name, demo, tmp_path), format_name)
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is type(error) and again.file == error.file and str(again) == str(error)


# Models whose reads check what they read (chunk digests, image records): damage can be found after open. A
# mapping's arrays are zero-copy views and a matrix's bytes are checked whole at open.
_CHECKED_ON_READ = {"array", "episodes"}


def test_damage_found_on_a_read_after_open_is_named(format_name, demo, module, tmp_path):
    """Each of the last 256 bytes flipped in turn: at open or on a read, every error names the file."""
    data = demo.read_bytes()
    path = tmp_path / f"late{FORMATS[format_name].extensions[0]}"
    stages = set()
    for back in range(1, min(256, len(data)) + 1):
        damaged = bytearray(data)
        damaged[-back] ^= 0xFF
        path.write_bytes(damaged)
        stage = "open"
        try:
            with module.open(path) as reader:
                stage = "read"
                reader.info()
                read_everything(format_name, reader)
        except arrayio.FormatError as error:
            assert error.file == str(path), f"{format_name}: byte -{back}, found on {stage}: {error}"
            stages.add(stage)
    assert "read" in stages or FORMATS[format_name].model not in _CHECKED_ON_READ, stages


def test_the_cli_names_the_file_in_its_line_and_its_json(format_name, demo, tmp_path):
    path = _cut(format_name, demo, tmp_path)
    done = subprocess.run([sys.executable, "-m", "arrayio", "info", "--json", str(path)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 1
    assert done.stderr.startswith(f"arrayio: {path}: {format_name}:"), done.stderr
    report = json.loads(done.stdout)["error"]
    assert report["file"] == str(path) and report["message"].startswith(f"{path}: ")


def test_a_file_of_no_format_and_a_foreign_file_are_named_as_the_formats_are(tmp_path):
    """Detection and the .npy/.npz reads named their file in the text only; now ``file`` says it too."""
    unknown = tmp_path / "unknown.bin"
    unknown.write_bytes(b"nothing we know")
    with pytest.raises(arrayio.FormatError) as caught:
        arrayio.open(unknown)
    assert caught.value.file == str(unknown) and caught.value.message.startswith("not a file of any known format")
    assert arrayio.validate(unknown)[0].message == caught.value.message
    foreign = tmp_path / "cut.npy"
    foreign.write_bytes(b"\x93NUMPY\x01\x00" + bytes(8))
    from arrayio import foreign as foreign_files

    with pytest.raises(arrayio.FormatError) as caught:
        foreign_files.info(foreign)
    assert caught.value.file == str(foreign) and str(caught.value) == f"{foreign}: {caught.value.message}"


def _damaged_chunk(format_name, demo, tmp_path):
    """A copy of the demo file that opens, whose model reads raise a FormatError (None if no flip near the end
    does: that format's reads check nothing the open has not)."""
    from arrayio._tree import tree_of

    data = demo.read_bytes()
    path = tmp_path / f"chunk{FORMATS[format_name].extensions[0]}"
    for back in range(1, min(256, len(data)) + 1):
        damaged = bytearray(data)
        damaged[-back] ^= 0xFF
        path.write_bytes(damaged)
        try:
            with arrayio.open(path) as reader:
                for _name, array in tree_of(reader).arrays():
                    for coords in np.ndindex(*array.grid):
                        array.read(coords)
        except arrayio.FormatError as error:
            if "chunk" in error.message or "image" in error.message or "frame" in error.message:
                return path
    return None


def test_every_view_names_the_file_of_a_damaged_chunk(format_name, demo, tmp_path):
    """The views read chunks through the array model, not the reader's methods: before, a digest mismatch met in
    a dask task, a zarr read or a conversion named no file."""
    import zarr

    from arrayio import dask as arrayio_dask
    from arrayio.convert import convert
    from arrayio.zarr import open_store

    path = _damaged_chunk(format_name, demo, tmp_path)
    if path is None:
        assert FORMATS[format_name].model not in _CHECKED_ON_READ
        return

    def through_zarr():
        store = open_store(str(path))
        try:
            group = zarr.open_group(store=store, mode="r")
            for _name, node in group.members(max_depth=None):
                if isinstance(node, zarr.Array):
                    node[...]
        finally:
            store.close()

    views = {"dask": lambda: [array.compute(scheduler="sync")
                              for array in arrayio_dask.to_dask_tree(str(path)).values()],
             "zarr": through_zarr,
             "convert": lambda: convert(path, tmp_path / "out.zarr")}
    for view, read in views.items():
        with pytest.raises(arrayio.FormatError) as caught:
            read()
        assert caught.value.file == str(path), f"{format_name} through {view}: {caught.value}"
