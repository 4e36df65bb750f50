"""The kdb reader's batched calls for training loaders: every image record of an episode as one table,
and the stored bytes of many image records at once, fetched from a remote file in few requests.

They are methods of :class:`arrayio.kdb.KdbFile` (a mixin): the toolkit (datasets, loaders) reads the
file through them and never through its ``source``.
"""

from __future__ import annotations

import bisect
import struct
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import FormatError
from ._codec import decode_utf8
from ._records import IMAGE_HEADER, STRING_LENGTH

IMAGE_TABLE_DTYPE = np.dtype([("offset", np.int64), ("length", np.int64), ("height", np.int64),
                              ("width", np.int64), ("channels", np.int64), ("format", np.int64)])
NO_IMAGE = np.array((0, -1, 0, 0, 0, 0), IMAGE_TABLE_DTYPE)
# Sections of neighbouring episodes this close (a metadata blob between them) are fetched in one request.
EPISODE_GAP = 4096
# Episodes lying between two that a prefetch fetches, holding at most this many bytes, are fetched with them
# (at most as many bytes as the asked-for episodes, smallest gaps first): a request costs an object store
# more than such a gap (object_store joins ranges up to 1 MiB apart, OBJECT_STORE_COALESCE_DEFAULT, for the
# same reason), and with random frames the next batches want those episodes too. A cold 2-worker epoch then
# sends a third fewer requests; with each GET answered 20 ms late it reads 13-30 % more frames/s.
FILL_BYTES = 1 << 20
FILL_EPISODES = 64  # at most this many episodes in one such gap (each entry is checked before it is fetched)
# A remote episode's image section up to this size is walked for its table as one buffer (the prefetch
# that precedes it fetched it whole); a larger one is walked frame by frame, fetched as the walk goes.
WHOLE_SECTION_BYTES = 8 << 20
_READ_U16 = STRING_LENGTH.field_unpacker("length")
_READ_IMAGE_HEADER = IMAGE_HEADER.unpack_plain


class BatchReads:
    """Batched reads over a KdbFile's episodes (mixed into KdbFile)."""

    _sorted_sections: list[int] | None = None  # each episode's image section start, sorted (image_bytes)
    _camera_names: dict[bytes, str]  # a camera name's bytes -> the name, decoded once per file

    # ``self`` is a KdbFile: its entry(), image_records() and source.
    @property
    def remote_version(self: Any) -> tuple[int, str | None, str] | None:
        """(size, ETag, client) of a remote file as it was opened (what another process may open it with);
        None for a local one."""
        return getattr(self.source, "version", None)  # a RemoteSource's; local sources have none

    @property
    def file_size(self: Any) -> int:
        """The file's size in bytes (what ``arrayio kdb stats`` splits into sections)."""
        return int(self.source.size)

    def image_table(self: Any, position: int) -> dict[str, np.ndarray]:
        """Every image record of the episode at ``position``: {camera: (frames,) IMAGE_TABLE_DTYPE array}
        (offset, length, height, width, channels, format byte; length -1 where a frame has no image
        of that camera; a camera named twice in a frame counts once, the first time)."""
        entry = self.entry(position)
        frames = int(entry.num_frames)
        # A remote file: the section in one request, not one per frame walked.
        self.source.prefetch([(entry.images_offset, entry.images_length)])
        found = None
        if self.source.buffer is not None or entry.images_length <= WHOLE_SECTION_BYTES:
            section = self.source.view(int(entry.images_offset), int(entry.images_length),
                                       f"episode {position} image section")
            found = _section_records(section, frames, int(entry.images_offset), self._camera_names)
        if found is None:  # a record the quick walk cannot take at face value: the reader's parser says why
            found = {}
            for frame in range(frames):
                for record in self.image_records(position, frame):
                    _add_row(found, record.camera, frame, (record.offset, record.length, record.height,
                                                           record.width, record.channels, record.format))
        table: dict[str, np.ndarray] = {}
        for camera, (numbers, rows) in found.items():  # one array per camera, filled at once
            column = table[camera] = np.full(frames, NO_IMAGE)
            column[numbers] = np.array(rows, np.int64).view(IMAGE_TABLE_DTYPE).reshape(-1)  # its fields: 6 int64
        return table

    def read_metas(self: Any, positions: Sequence[int] | None = None) -> list[Any]:
        """The metadata of the episodes at ``positions`` (every one by default), their blobs in a remote file
        fetched at once (GETs of several ranges where the server answers those, else concurrently), not one
        round trip after another."""
        entries = self._checked_entries(positions)
        self.source.prefetch([(entry.meta_offset, entry.meta_length) for entry in entries.values()], together=True)
        return [self.read_meta(position) for position in entries]

    def prefetch_first_frames(self: Any, positions: Sequence[int] | None = None) -> None:
        """Fetch the start of the image section of the episodes at ``positions`` (every one by default) from a
        remote file, together: a frame's even share of it, what the frame walk reads first to find the first
        frame's records. Finding each episode's cameras then costs no request of its own, nor its whole
        section (a no-op for a mapped file)."""
        entries = self._checked_entries(positions).values()
        self.source.prefetch([(entry.images_offset, even_frame_end(entry, 0)) for entry in entries if entry.num_frames],
                             together=True)

    def _checked_entries(self: Any, positions: Sequence[int] | None) -> dict[int, Any]:
        """{position: checked entry} of ``positions`` (every episode by default, the index read whole first:
        one request, not one per block of 8 entries)."""
        if positions is None:
            len(self.index)
            positions = range(len(self))
        return {int(position): self.entry(int(position)) for position in positions}

    def prefetch_episodes(self: Any, positions: Sequence[int], *, images: bool = True, meta: bool = False) -> None:
        """Fetch the state/action sections (and image sections, and metadata: what ``read_episode`` reads) of
        the episodes at ``positions`` from a remote file ahead of reading them: sections that lie back to back
        go in one request, with the episodes in small gaps between them (FILL_BYTES) fetched too (a no-op for
        a mapped file)."""
        source = self.source  # a closed reader fails here, whatever ``positions`` is
        entries = [self.entry(int(position)) for position in positions]
        if source.buffer is None and len(entries) > 1:
            entries += self._between([int(position) % len(self) for position in positions], entries, images)
        ranges = []
        for entry in entries:
            if meta:
                ranges.append((entry.meta_offset, entry.meta_length))
            ranges.append((entry.actions_offset, entry.actions_length))
            if images:
                ranges.append((entry.images_offset, entry.images_length))
        source.prefetch(ranges, gap=EPISODE_GAP)

    def _between(self: Any, positions: list[int], entries: list[Any], images: bool) -> list[Any]:
        """The checked entries of the episodes between two of ``positions`` (``entries``) where their
        sections fill a gap of at most FILL_BYTES between those two's (gaps taken smallest first, up to as
        many bytes as the asked episodes hold); a gap whose entries fail their checks, or lie elsewhere in
        the file, is left as it is."""
        def span(entry: Any) -> tuple[int, int]:
            if not images:
                return entry.actions_offset, entry.actions_offset + entry.actions_length
            return (min(entry.actions_offset, entry.images_offset),
                    max(entry.actions_offset + entry.actions_length, entry.images_offset + entry.images_length))

        asked = sorted((position, *span(entry)) for position, entry in zip(positions, entries))
        budget = sum(stop - start for _, start, stop in asked)
        gaps = sorted((after[1] - before[2], before[0], after[0], before[2], after[1])
                      for before, after in zip(asked, asked[1:])
                      if 1 < after[0] - before[0] <= FILL_EPISODES and 0 <= after[1] - before[2] <= FILL_BYTES)
        found: list[Any] = []
        for size, first, last, gap_start, gap_stop in gaps:
            if size > budget:
                break
            try:
                inside = [self.entry(position) for position in range(first + 1, last)]
            except FormatError:
                continue
            if all(gap_start <= span(entry)[0] and span(entry)[1] <= gap_stop for entry in inside):
                found += inside
                budget -= size
        return found

    def image_bytes(self: Any, offsets: Sequence[int] | np.ndarray, lengths: Sequence[int] | np.ndarray) -> list[Any]:
        """The stored bytes of the image records at ``offsets`` (``lengths`` each), as buffers: slices of
        the map for a local file; for a remote one, of one request per episode they lie in (the span
        from the first to the last of them, the spans fetched concurrently; nothing when the file's
        cache holds it)."""
        starts = np.asarray(offsets, np.int64).reshape(-1).tolist()
        sizes = np.asarray(lengths, np.int64).reshape(-1).tolist()
        buffer = self.source.buffer
        if buffer is not None:
            for start, size in zip(starts, sizes):
                self.source.check(start, size, "image")
            return [buffer[start:start + size] for start, size in zip(starts, sizes)]
        if min(starts, default=0) < 0 or min(sizes, default=0) < 0:  # the checks of view() say which
            return self.source.views(zip(starts, sizes), "image")
        if self._sorted_sections is None:
            self._sorted_sections = sorted(self.index["images_offset"].tolist())
        # One span per episode image section, from its first record to the end of its last (a section
        # fetched whole by image_table covers it), looked up once; each record sliced from its span's view.
        # A loop, not array operations: a call has the few records of one shard and camera in a batch, where
        # numpy's cost per call made it 175 us against 19 us over a mapped file (the loop: 79 us).
        sections = self._sorted_sections
        firsts: dict[int, int] = {}
        ends: dict[int, int] = {}
        section_of = []
        for start, size in zip(starts, sizes):
            section = bisect.bisect_right(sections, start)
            section_of.append(section)
            first = firsts.get(section)
            if first is None:
                firsts[section], ends[section] = start, start + size
            else:
                firsts[section] = min(first, start)
                ends[section] = max(ends[section], start + size)
        views = dict(zip(firsts, self.source.views([(first, ends[section] - first)
                                                    for section, first in firsts.items()], "image")))
        return [views[section][start - firsts[section]:start - firsts[section] + size]
                for section, start, size in zip(section_of, starts, sizes)]


def even_frame_end(entry: Any, frame: int) -> int:
    """Where ``frame`` ends inside its episode's image section if every frame takes the same bytes."""
    if not 0 <= frame < entry.num_frames:
        return int(entry.images_length)
    return min(entry.images_length, -(-(frame + 1) * entry.images_length // entry.num_frames))


Rows = dict[str, tuple[list[int], list[tuple]]]


def _add_row(found: Rows, camera: str, frame: int, row: tuple) -> None:
    """Add ``camera``'s record at ``frame`` (frames in order) unless it has one there: the first one counts."""
    numbers, rows = found.setdefault(camera, ([], []))
    if not numbers or numbers[-1] != frame:
        numbers.append(frame)
        rows.append(row)


def _section_records(section: memoryview, frames: int, base: int, names: dict[bytes, str]) -> Rows | None:
    """{camera: ([frame, ...], [(offset, length, height, width, channels, format) of its first record at
    each], ...)} of an episode's whole image ``section`` (at ``base`` in the file), walked in one loop;
    None where a record runs past the section or a name is not UTF-8, for the reader's parser to say
    what is wrong. Known names are decoded once per file (``names``)."""
    found: Rows = {}
    size = len(section)
    header_size = IMAGE_HEADER.size
    offset = 0
    try:
        for frame in range(frames):
            (count,) = _READ_U16(section, offset)
            offset += 2
            for _camera in range(count):
                (name_length,) = _READ_U16(section, offset)
                name_at = offset + 2
                header_at = name_at + name_length
                width, height, channels, kind, length = _READ_IMAGE_HEADER(section, header_at)
                data_at = header_at + header_size
                offset = data_at + length
                if offset > size:
                    return None
                raw = bytes(section[name_at:header_at])
                name = names.get(raw)
                if name is None:
                    name = names[raw] = decode_utf8(memoryview(raw), "camera name", base + name_at)
                column = found.get(name)  # _add_row inline: a call per record would cost a fifth of the walk
                if column is None:
                    column = found[name] = ([], [])
                if not column[0] or column[0][-1] != frame:  # the first record of a camera in a frame counts
                    column[0].append(frame)
                    column[1].append((base + data_at, length, height, width, channels, kind))
    except (struct.error, FormatError):
        return None
    return found
