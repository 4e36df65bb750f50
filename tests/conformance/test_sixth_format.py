"""A sixth format needs its own package and one registry line: every view then reads it.

The package below (``rawf``: magic ``RAWF``, a u4 count, then that many little-endian uint16 values) is
written to a temporary folder and registered by adding its one line to ``_registry._PACKAGES``; nothing
else of arrayio changes, and open, the zarr store, dask, kerchunk references and convert all read it.
"""

from __future__ import annotations

import sys
import textwrap

import numpy as np
import pytest
import zarr

import arrayio
from arrayio import _registry
from arrayio import dask as arrayio_dask
from arrayio.convert import convert
from arrayio.kerchunk import references
from arrayio.zarr import open_store

PACKAGE = textwrap.dedent('''
    """rawf: b"RAWF", a u4 count, then the count's uint16 values (little endian)."""

    from pathlib import Path

    import numpy as np

    from arrayio._binary import Source
    from arrayio._readers import ReaderBase, problems_of
    from arrayio._registry import FormatSpec
    from arrayio._text import value_lines
    from arrayio._tree import Array, ChunkRef, Group
    from arrayio.errors import ErrorKinds

    ERRORS = ErrorKinds("rawf")


    class RawFile(ReaderBase):
        format = "rawf"

        def __init__(self, source):
            self.source = source
            self.count = int(np.frombuffer(source.view(4, 4, "count"), "<u4")[0])
            source.check(8, 2 * self.count, "values")

        def _release(self):
            self.source.close()

        def values(self):
            return self.source.array(8, self.count, np.dtype("<u2"), "values")

        def info(self):
            return {"format": "rawf", "version": "1", "file_size": self.source.size,
                    "summary": f"{self.count} values"}

        def validate(self):
            return []

        def entries(self):
            return [{"name": "values"}]

        def cat(self, name, numbers=False):
            if name != "values":
                raise KeyError(name)
            yield from value_lines(self.values(), numbers)


    def open(target, storage_options=None):
        return RawFile(Source.open(target, ERRORS))


    def validate(target):
        return problems_of(open, target)


    def demo(folder):
        path = Path(folder) / "demo.rawf"
        path.write_bytes(b"RAWF" + np.uint32(5000).tobytes() + np.arange(5000, dtype="<u2").tobytes())
        return path


    def tree(reader):
        step = 1024

        def read(coords):
            return reader.values()[coords[0] * step:(coords[0] + 1) * step]

        def reference(coords):
            start = 8 + coords[0] * step * 2
            return ChunkRef(start, step * 2) if start + step * 2 <= reader.source.size else None

        array = Array((reader.count,), np.dtype("<u2"), (step,), ("value",), {}, read, reference=reference,
                      why_computed="the short last block ends the file")
        return Group({}, {"values": array})


    def save(values, target, attributes):
        Path(target).write_bytes(b"RAWF" + np.uint32(len(values)).tobytes() + np.asarray(values, "<u2").tobytes())


    FORMAT = FormatSpec("rawf", b"RAWF", (".rawf",), "array", "rawf: uint16 values", open=open, demo=demo,
                        tree=tree, sections=lambda source: [], errors=ERRORS, module=__name__, save=save)
''')


@pytest.fixture
def sixth_format(tmp_path, monkeypatch):
    folder = tmp_path / "packages"
    (folder / "rawf").mkdir(parents=True)
    (folder / "rawf" / "__init__.py").write_text(PACKAGE)
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.setitem(_registry._PACKAGES, "rawf", "rawf")  # the one registry line
    monkeypatch.setattr(_registry.FORMATS, "_specs", None)  # read the packages again
    yield _registry.FORMATS["rawf"].demo(tmp_path)
    sys.modules.pop("rawf", None)


def test_every_view_reads_a_sixth_format_from_its_package_alone(sixth_format, tmp_path):
    expected = np.arange(5000, dtype="<u2")
    assert arrayio.detect(sixth_format) == "rawf" and arrayio.validate(sixth_format) == []
    with arrayio.open(sixth_format) as reader:
        assert list(reader.cat("values"))[:3] == ["0", "1", "2"]
    group = zarr.open_group(store=open_store(sixth_format), mode="r")
    assert np.array_equal(group["values"][:], expected)
    assert np.array_equal(arrayio_dask.to_dask(sixth_format, block_bytes=2048).compute(scheduler="sync"), expected)
    refs = references(sixth_format)
    assert refs["refs"]["values/0"] == [str(sixth_format), 8, 2048] and refs["left_out"] == []
    convert(sixth_format, tmp_path / "values.npy")
    assert np.array_equal(np.load(tmp_path / "values.npy"), expected)
    convert(tmp_path / "values.npy", tmp_path / "back.rawf")
    assert (tmp_path / "back.rawf").read_bytes() == sixth_format.read_bytes()
