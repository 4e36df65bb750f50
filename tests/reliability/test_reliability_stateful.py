"""Stateful property tests: sequences of in-place updates against an in-memory model.

bloscpack: appends (some too big for the spare offset slots) and metadata rewrites (some too big
for the section) on one file; pycauset: metadata updates (set, nest, delete) on one file. Every
step is checked against the model, and reopen and validate are steps of their own.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

import arrayio
from arrayio import bloscpack, pycauset
from arrayio.bloscpack import (
    MetadataSectionTooSmall,
    NoChangeInMetadata,
    NotEnoughSpace,
)

CHUNK = 256
SLOTS = 6
BOUNDED = settings(max_examples=25, stateful_step_count=15, deadline=None)
# tmpfs when there is one: the steps fsync, and the disk's latency is not what is tested here
SCRATCH = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None


class BloscpackAppends(RuleBasedStateMachine):
    """A bloscpack byte stream and its metadata under appends and rewrites."""

    def __init__(self) -> None:
        super().__init__()
        self.folder = Path(tempfile.mkdtemp(prefix="arrayio-stateful-", dir=SCRATCH))
        self.path = self.folder / "s.blp"
        self.data = b""
        self.metadata: dict = {}
        self.slots_left = 0
        self.room = 0
        self.reader = None

    @precondition(lambda self: not self.data)
    @rule(initial=st.binary(min_size=1, max_size=3 * CHUNK), name=st.text(max_size=8))
    def create(self, initial: bytes, name: str) -> None:
        self.metadata = {"name": name}
        bloscpack.pack_bytes_to_file(initial, self.path, chunk_size=CHUNK, metadata=self.metadata,
                                     bloscpack_args={"max_app_chunks": SLOTS})
        self.data = initial
        self.slots_left = SLOTS
        self.room = bloscpack.open(self.path).metadata_section.header.max_meta_size

    def chunk_size(self) -> int:
        return min(CHUNK, len(self.data)) if self.slots_left == SLOTS else CHUNK

    @precondition(lambda self: bool(self.data))
    @rule(extra=st.binary(max_size=4 * CHUNK))
    def append(self, extra: bytes) -> None:
        (self.folder / "extra").write_bytes(extra)
        with bloscpack.open(self.path) as reader:
            chunk = reader.header.chunk_size
            free = reader.nchunks * chunk - len(self.data)
        needed = -(-max(0, len(extra) - free) // chunk)
        before = self.path.read_bytes()
        if needed > self.slots_left:
            try:
                bloscpack.append(self.path, self.folder / "extra")
            except NotEnoughSpace:
                assert self.path.read_bytes() == before
                return
            raise AssertionError(f"appending {needed} chunks with {self.slots_left} slots left succeeded")
        assert bloscpack.append(self.path, self.folder / "extra") == needed
        self.data += extra
        self.slots_left -= needed

    @precondition(lambda self: bool(self.data))
    @rule(value=st.one_of(st.integers(), st.text(max_size=300), st.lists(st.integers(), max_size=40)))
    def rewrite_metadata(self, value) -> None:
        metadata = {"name": self.metadata["name"], "value": value}
        before = self.path.read_bytes()
        try:
            bloscpack.rewrite_metadata(self.path, metadata)
        except NoChangeInMetadata:
            assert metadata == self.metadata and self.path.read_bytes() == before
            return
        except MetadataSectionTooSmall:
            assert len(json.dumps(metadata, separators=(",", ":"))) > self.room
            assert self.path.read_bytes() == before
            return
        self.metadata = metadata

    @precondition(lambda self: bool(self.data))
    @rule()
    def reopen(self) -> None:
        data, metadata = bloscpack.unpack_bytes_from_file(self.path)
        assert data == self.data and metadata == self.metadata

    @precondition(lambda self: bool(self.data))
    @rule()
    def validate(self) -> None:
        assert arrayio.validate(self.path) == []

    @invariant()
    def header_counts_slots(self) -> None:
        if self.data:
            with bloscpack.open(self.path) as reader:
                assert reader.header.max_app_chunks == self.slots_left

    def teardown(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


KEYS = st.sampled_from(["a", "b", "c", "note"])
LEAVES = st.one_of(st.integers(-2**40, 2**40), st.text(max_size=20), st.booleans(),
                   st.floats(allow_nan=False), st.lists(st.integers(0, 9), max_size=4))
VALUES = st.recursive(LEAVES, lambda inner: st.dictionaries(KEYS, inner, max_size=3), max_leaves=6)
CHANGES = st.dictionaries(KEYS, st.one_of(st.none(), VALUES), min_size=1, max_size=3)


def merged(current: dict, changes: dict) -> dict:
    """The model of update_metadata's merge: None deletes, maps merge into maps, else replace."""
    result = dict(current)
    for key, value in changes.items():
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict):
            base = result.get(key)
            result[key] = merged(base if isinstance(base, dict) else {}, value)
        else:
            result[key] = value
    return result


class PycausetUpdates(RuleBasedStateMachine):
    """The user metadata of a pycauset container under update_metadata."""

    def __init__(self) -> None:
        super().__init__()
        self.folder = Path(tempfile.mkdtemp(prefix="arrayio-stateful-", dir=SCRATCH))
        self.path = self.folder / "s.pycauset"
        self.array = np.arange(12.0).reshape(3, 4)
        pycauset.save(self.array, self.path, properties={"start": 1})
        self.model = {"properties": {"start": 1}}
        self.generation = 1

    @rule(section=st.sampled_from(["properties", "extra"]), changes=CHANGES)
    def update(self, section: str, changes: dict) -> None:
        self.generation = pycauset.update_metadata(self.path, {section: changes})
        self.model = merged(self.model, {section: changes})

    @rule(section=st.sampled_from(["extra"]))
    def delete(self, section: str) -> None:
        self.generation = pycauset.update_metadata(self.path, {section: None})
        self.model.pop(section, None)

    @rule()
    def reopen(self) -> None:
        container = pycauset.load(self.path)
        user = {key: value for key, value in container.metadata.items() if key in ("properties", "extra")}
        assert user == self.model
        assert container.generation == self.generation
        assert np.array_equal(container.array, self.array)

    @rule()
    def validate(self) -> None:
        assert arrayio.validate(self.path) == []

    def teardown(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


TestBloscpackAppends = BloscpackAppends.TestCase
TestBloscpackAppends.settings = BOUNDED
TestPycausetUpdates = PycausetUpdates.TestCase
TestPycausetUpdates.settings = BOUNDED
