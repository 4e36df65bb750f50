"""What ``arrayio cat`` prints of a kdb entry (an episode id): the reader's ``cat``, kept beside the reader."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ._errors import EpisodeIdNotFound


class EntryLines:
    """``cat(name)`` of the kdb reader (a mixin: the reader module stays within its size)."""

    def cat(self: Any, name: str) -> Iterator[str]:
        """The frames of episode id ``name`` as tab-separated lines: frame, reward, terminal, state, action,
        images."""
        try:
            episode_id = int(name)
        except ValueError:
            raise EpisodeIdNotFound(f"kdb: {name!r} is not an episode id (ids are integers; see `arrayio ls`)") \
                from None
        kdb = self
        position = kdb.position_of(episode_id)
        episode = kdb.read_episode(position)
        meta = episode.meta
        yield (f"# episode {meta.episode_id} (position {position}): {meta.num_frames} frames, "
               f"embodiment {meta.embodiment!r}, task {meta.task!r}, fps {meta.fps:g}, success {meta.success}, "
               f"total_reward {meta.total_reward}")
        yield "frame\treward\tterminal\tstate\taction\timages"
        for frame in range(len(episode)):
            images = ", ".join(f"{record.camera}:{record.width}x{record.height}x{record.channels}"
                               f"{' compressed' if record.compressed else ' raw'} {record.length}B"
                               for record in kdb.image_records(position, frame))
            yield "\t".join([str(frame), f"{float(episode.rewards[frame]):g}", str(int(episode.terminals[frame])),
                             " ".join(f"{value:g}" for value in episode.states[frame].tolist()),
                             " ".join(f"{value:g}" for value in episode.actions[frame].tolist()),
                             images or "-"])
