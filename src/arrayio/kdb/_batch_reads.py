"""The kdb reader's batched calls for training loaders: every image record of an episode as one table,
and the stored bytes of many image records at once, fetched from a remote file in few requests.

They are methods of :class:`arrayio.kdb.KdbFile` (a mixin): the toolkit (datasets, loaders) reads the
file through them and never through its ``source``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

IMAGE_TABLE_DTYPE = np.dtype([("offset", np.int64), ("length", np.int64), ("height", np.int64),
                              ("width", np.int64), ("channels", np.int64), ("format", np.int64)])
NO_IMAGE = np.array((0, -1, 0, 0, 0, 0), IMAGE_TABLE_DTYPE)
# Byte ranges of one batch at most this far apart are fetched in one request: a request costs about
# as much as this many bytes of transfer on an object store, so reading the gap is cheaper.
COALESCE_GAP = 256 << 10


class BatchReads:
    """Batched reads over a KdbFile's episodes (mixed into KdbFile)."""

    # ``self`` is a KdbFile: its entry(), image_records() and source.
    def image_table(self: Any, position: int) -> dict[str, np.ndarray]:
        """Every image record of the episode at ``position``: {camera: (frames,) IMAGE_TABLE_DTYPE array}
        (offset, length, height, width, channels, format byte; length -1 where a frame has no image
        of that camera; a camera named twice in a frame counts once, the first time)."""
        entry = self.entry(position)
        frames = int(entry.num_frames)
        # A remote file: the section in one request, not one per frame walked.
        self.source.prefetch([(entry.images_offset, entry.images_length)])
        table: dict[str, np.ndarray] = {}
        for frame in range(frames):
            for record in self.image_records(position, frame):
                column = table.get(record.camera)
                if column is None:
                    column = table[record.camera] = np.zeros(frames, IMAGE_TABLE_DTYPE)
                    column["length"] = -1
                if column["length"][frame] < 0:
                    column[frame] = (record.offset, record.length, record.height, record.width, record.channels,
                                     record.format)
        return table

    def image_bytes(self: Any, offsets: Sequence[int] | np.ndarray, lengths: Sequence[int] | np.ndarray) -> list[Any]:
        """The stored bytes of the image records at ``offsets`` (``lengths`` each), as buffers: slices of
        the map for a local file; for a remote one, fetched first in as few requests as ranges
        ``COALESCE_GAP`` apart allow (the ranges of one episode are usually one request)."""
        starts = np.asarray(offsets, np.int64).reshape(-1)
        sizes = np.asarray(lengths, np.int64).reshape(-1)
        buffer = self.source.buffer
        if buffer is not None:
            for start, size in zip(starts.tolist(), sizes.tolist()):
                self.source.check(start, size, "image")
            return [buffer[start:start + size] for start, size in zip(starts.tolist(), sizes.tolist())]
        self.source.prefetch(coalesce(starts, sizes, COALESCE_GAP))
        return [self.source.view(start, size, "image") for start, size in zip(starts.tolist(), sizes.tolist())]


def coalesce(starts: np.ndarray, sizes: np.ndarray, gap: int) -> list[tuple[int, int]]:
    """(offset, length) spans covering every range, ranges at most ``gap`` bytes apart joined."""
    if not len(starts):
        return []
    order = np.argsort(starts, kind="stable")
    spans: list[list[int]] = []
    for start, stop in zip(starts[order].tolist(), (starts + sizes)[order].tolist()):
        if spans and start <= spans[-1][1] + gap:
            spans[-1][1] = max(spans[-1][1], stop)
        else:
            spans.append([start, stop])
    return [(start, stop - start) for start, stop in spans]
