"""What ``arrayio ls`` and ``cat`` show of a kdb file (episodes): the reader's ``entries`` and ``cat``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ._errors import EpisodeIdNotFound


class EntryLines:
    """``entries()`` and ``cat(name)`` of the kdb reader: what ``arrayio ls`` and ``cat`` show (a mixin, so
    the reader module stays within its size)."""

    def entries(self: Any) -> list[dict[str, Any]]:
        """One row per episode: id, frames, dims, fps, success, total reward, embodiment, task."""
        self.index  # noqa: B018 - one request for every entry instead of one per block
        rows = []
        for position in range(len(self)):
            meta = self.read_meta(position)
            rows.append({"name": str(meta.episode_id), "num_frames": meta.num_frames, "state_dim": meta.state_dim,
                         "action_dim": meta.action_dim, "fps": meta.fps, "success": meta.success,
                         "total_reward": meta.total_reward, "embodiment": meta.embodiment, "task": meta.task})
        return rows

    def cat(self: Any, name: str, numbers: bool = False) -> Iterator[str]:
        """The frames of episode id ``name`` as tab-separated lines: frame, reward, terminal, state, action,
        images (numbers already: ``numbers`` changes nothing here)."""
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
