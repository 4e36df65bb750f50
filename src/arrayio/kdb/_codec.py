"""The small variable-length codecs of kdb: the episode metadata blob, UTF-8 strings, step records."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._errors import ERRORS, InvalidUtf8
from ._records import (
    FORMAT_NAME,
    META_TAIL,
    STEP_FIXED_BYTES,
    STRING_LENGTH,
    SUCCESS_FALSE,
    SUCCESS_TRUE,
    SUCCESS_UNKNOWN,
    TOTAL_REWARD,
    U16_MAX,
)


@functools.lru_cache(maxsize=256)
def step_dtype(state_dim: int, action_dim: int) -> np.dtype:
    """The packed per-frame record: state, action, reward, is_terminal (no padding)."""
    return np.dtype([
        ("state", "<f4", (state_dim,)),
        ("action", "<f4", (action_dim,)),
        ("reward", "<f4"),
        ("is_terminal", "u1"),
    ])


def step_size(state_dim: int, action_dim: int) -> int:
    """Bytes per frame of the state/action section."""
    return 4 * (state_dim + action_dim) + STEP_FIXED_BYTES


@dataclass(frozen=True)
class EpisodeMeta:
    """One episode's metadata blob plus the counts its index entry holds."""

    episode_id: int
    num_frames: int
    state_dim: int
    action_dim: int
    embodiment: str
    task: str
    fps: float
    success: bool | None
    total_reward: float | None

    def as_dict(self) -> dict[str, Any]:
        """The fields as a plain dict (the reference binding's ``read_meta`` shape, plus state_dim)."""
        return dict(self.__dict__)


def decode_meta(blob: memoryview, base: int, where: str) -> tuple[str, str, float, bool | None, float | None]:
    """Parse a metadata blob that starts at absolute offset ``base`` (``where`` names the episode)."""
    position = 0
    texts = []
    for name in ("embodiment", "task"):
        if position + STRING_LENGTH.size > len(blob):
            raise ERRORS.truncated_at(f"{where} metadata.{name}_len", base + position, STRING_LENGTH.size,
                                      base + len(blob))
        (length,) = STRING_LENGTH.unpack(blob, position)
        position += STRING_LENGTH.size
        if position + length > len(blob):
            raise ERRORS.truncated_at(f"{where} metadata.{name}", base + position, length, base + len(blob))
        texts.append(decode_utf8(blob[position:position + length], f"{where} metadata.{name}", base + position))
        position += length
    if position + META_TAIL.size > len(blob):
        raise ERRORS.truncated_at(f"{where} metadata.fps/success/reward_present", base + position, META_TAIL.size,
                                  base + len(blob))
    tail = META_TAIL.unpack(blob, position)
    position += META_TAIL.size
    success = {SUCCESS_FALSE: False, SUCCESS_TRUE: True}.get(tail.success)
    total_reward = None
    if tail.reward_present == 1:
        if position + TOTAL_REWARD.size > len(blob):
            raise ERRORS.truncated_at(f"{where} metadata.total_reward", base + position, TOTAL_REWARD.size,
                                      base + len(blob))
        total_reward = float(TOTAL_REWARD.unpack(blob, position).total_reward)
    return texts[0], texts[1], float(tail.fps), success, total_reward


def encode_meta(embodiment: str, task: str, fps: float, success: bool | None, total_reward: float | None) -> bytes:
    """The metadata blob; raises ValueError for names longer than their u16 length field."""
    parts = []
    for name, text in (("embodiment", embodiment), ("task", task)):
        raw = encode_utf8(text, name, U16_MAX)
        parts.append(STRING_LENGTH.pack(length=len(raw)) + raw)
    code = SUCCESS_UNKNOWN if success is None else (SUCCESS_TRUE if success else SUCCESS_FALSE)
    parts.append(META_TAIL.pack(fps=float(fps), success=code, reward_present=int(total_reward is not None)))
    if total_reward is not None:
        parts.append(TOTAL_REWARD.pack(total_reward=float(total_reward)))
    return b"".join(parts)


def decode_utf8(raw: memoryview, field: str, offset: int) -> str:
    """UTF-8 text of a stored name; invalid bytes raise InvalidUtf8 naming the field."""
    try:
        return str(raw, "utf-8")
    except UnicodeDecodeError as error:
        raise InvalidUtf8(format=FORMAT_NAME, field=field, offset=offset + error.start,
                          expected="UTF-8 text", found=bytes(raw[error.start:error.start + 4])) from None


def encode_utf8(text: str, field: str, limit: int) -> bytes:
    """UTF-8 bytes of ``text``, at most ``limit`` long (the width of its length field)."""
    if not isinstance(text, str):
        raise TypeError(f"kdb: {field} must be a str, got {type(text).__name__}")
    raw = text.encode("utf-8")
    if len(raw) > limit:
        raise ValueError(f"kdb: {field} is {len(raw)} UTF-8 bytes; its length field holds at most {limit}")
    return raw


def check_f32(value: float, field: str) -> float:
    """``value`` as a float that fits an f32 (inf/nan pass through, finite overflow raises)."""
    number = float(value)
    if math.isfinite(number) and abs(number) > float(np.finfo(np.float32).max):
        raise ValueError(f"kdb: {field} = {number} does not fit a 32-bit float")
    return number
