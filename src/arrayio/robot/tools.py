"""kinodb's dataset tools for .kdb files: merge, filter by metadata, statistics.

All three stream one episode at a time; merge and filter copy stored image
bytes as they are (no re-encoding) and write through :class:`Writer`, so the
output appears only when complete.

The ``--where`` language is a Python-like boolean expression over the
episode fields ``episode_id, frames, state_dim, action_dim, fps, success,
total_reward, embodiment, task``: ``and``, ``or``, ``not``, parentheses,
comparisons (``== != < <= > >= in not in``), numbers, quoted strings and
``true``/``false``/``unknown`` (success is one of them). A bare field is
true when it is truthy (``success`` means success == true). Comparing an
unknown value (``total_reward`` of an episode without one) is false.
"""

from __future__ import annotations

import ast
import itertools
import os
import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from .._sources import target_list
from ..errors import FormatError
from ..kdb import HEADER_SIZE, INDEX_ENTRY, JPEG_MAGIC, EncodedImage, EpisodeMeta, KdbFile, Writer
from ..kdb import open as open_file
from ._arguments import whole_number
from ._shards import open_shard, resolve_sources

Progress = Callable[[int, int], None]
PNG_MAGIC = b"\x89PNG"
SUCCESS_VALUES = {"true": True, "false": False, "unknown": None}
# Deeper expressions are refused before evaluation, which recurses once per level.
MAX_WHERE_DEPTH = 100
META_BLOCK = 4096  # episodes whose metadata stats and filter read together (one several-range GET is 64)
COPY_BLOCK_BYTES = 8 << 20  # sections merge and filter fetch ahead at once (a remote file's cache holds 32 MiB)
WHERE_FIELDS = ("episode_id", "frames", "state_dim", "action_dim", "fps", "success", "total_reward", "embodiment",
                "task")


def _no_progress(done: int, total: int) -> None:
    """Default progress callback: nothing."""


def copy_episode(writer: Writer, kdb: KdbFile, position: int, *, episode_id: int | None = None) -> None:
    """Append episode ``position`` of ``kdb`` to ``writer`` frame by frame, image bytes unchanged."""
    meta = kdb.read_meta(position)
    steps = kdb.steps(position)
    writer.begin_episode(state_dim=meta.state_dim, action_dim=meta.action_dim, embodiment=meta.embodiment,
                         task=meta.task, fps=meta.fps, success=meta.success, total_reward=meta.total_reward,
                         episode_id=episode_id)
    for frame in range(meta.num_frames):
        images: dict[str, Any] = {}
        for record in kdb.image_records(position, frame):
            where = f"episode {position} frame {frame} camera {record.camera!r}"
            data = kdb.image_bytes([record.offset], [record.length])[0]
            if record.compressed:
                head = bytes(data[:4])
                encoding = "jpeg" if head.startswith(JPEG_MAGIC) else "png" if head == PNG_MAGIC else None
                if encoding is None:
                    raise FormatError(f"kdb: {where} is marked compressed but is neither JPEG nor PNG",
                                      format="kdb").naming(kdb.file_name)
                images[record.camera] = EncodedImage(bytes(data), encoding, record.width, record.height,
                                                     record.channels)
            else:
                images[record.camera] = kdb.decode_image(record)
        step = steps[frame]
        writer.add_frame(step["state"], step["action"], reward=float(step["reward"]),
                         terminal=bool(step["is_terminal"]), images=images)
    writer.end_episode()


def merge(sources: Sequence[Any], target: Any, *, keep_ids: bool = False, progress: Progress = _no_progress,
          storage_options: dict | None = None) -> int:
    """Concatenate the episodes of ``sources`` (paths, URLs or globs) into ``target``; returns the episode count.

    Episode ids are renumbered 0, 1, ... unless ``keep_ids``, which needs them unique across the inputs.
    ``storage_options`` go to the remote sources (their listing and reading).
    """
    paths = resolve_sources(target_list(sources), storage_options)
    total, owners = 0, dict[int, str]()
    for path in paths:
        with open_shard(path, storage_options) as kdb:
            total += len(kdb)
            if keep_ids:
                for episode_id in kdb.index["episode_id"].tolist():
                    if episode_id in owners:
                        raise ValueError(f"kdb: --keep-ids: episode id {episode_id} is in both {owners[episode_id]} "
                                         f"and {os.fsdecode(path)}")
                    owners[episode_id] = os.fsdecode(path)
    done = 0
    with Writer(target) as writer:
        for path in paths:
            with open_shard(path, storage_options) as kdb:
                for position in _fetched_ahead(kdb, range(len(kdb))):
                    episode_id = int(kdb.index["episode_id"][position]) if keep_ids else None
                    copy_episode(writer, kdb, position, episode_id=episode_id)
                    done += 1
                    progress(done, total)
    return total


def episode_filter(*, task: str | None = None, embodiment: str | None = None, success: str | None = None,
                   min_frames: int | None = None, where: str | None = None) -> Callable[[EpisodeMeta], bool]:
    """A predicate over episode metadata combining every condition given (all must hold)."""
    checks: list[Callable[[EpisodeMeta], bool]] = []
    if task is not None:
        try:
            pattern = re.compile(task)
        except re.error as error:
            raise ValueError(f"kdb: --task {task!r} is not a regular expression: {error}") from None
        checks.append(lambda meta: pattern.search(meta.task) is not None)
    if embodiment is not None:
        checks.append(lambda meta: meta.embodiment == embodiment)
    if success is not None:
        if success not in SUCCESS_VALUES:
            raise ValueError(f"kdb: --success must be one of {sorted(SUCCESS_VALUES)}, got {success!r}")
        wanted = SUCCESS_VALUES[success]
        checks.append(lambda meta: meta.success is wanted)
    if min_frames is not None:
        least = whole_number("--min-frames", min_frames, 0)
        checks.append(lambda meta: meta.num_frames >= least)
    if where is not None:
        checks.append(_compile_where(where))
    return lambda meta: all(check(meta) for check in checks)


def filter_file(source: Any, target: Any, predicate: Callable[[EpisodeMeta], bool], *,
                progress: Progress = _no_progress, keep_empty: bool = True) -> tuple[int, int]:
    """Copy the episodes of ``source`` whose metadata passes ``predicate`` (ids kept); returns (kept, total).

    With ``keep_empty=False`` a filter that keeps nothing writes nothing (an existing target stays as it was).
    """
    kept = 0
    with open_file(source) as kdb, Writer(target) as writer:
        for block in _meta_blocks(kdb):
            metas = dict(block)
            for position in _fetched_ahead(kdb, [position for position, meta in block if predicate(meta)]):
                copy_episode(writer, kdb, position, episode_id=metas[position].episode_id)
                kept += 1
                progress(position + 1, len(kdb))
            progress(block[-1][0] + 1, len(kdb))
        if not kept and not keep_empty:
            writer.abort()
        return kept, len(kdb)


_COMPARE = {ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b, ast.Lt: lambda a, b: a < b,
            ast.LtE: lambda a, b: a <= b, ast.Gt: lambda a, b: a > b, ast.GtE: lambda a, b: a >= b,
            ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b}


def _compile_where(text: str) -> Callable[[EpisodeMeta], bool]:
    """Parse a --where expression once; evaluating it touches only the whitelisted nodes."""
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as error:
        raise ValueError(f"kdb: --where {text!r}: {error.msg} at column {error.offset}") from None
    except (MemoryError, RecursionError):  # CPython's parser gives up on deep nesting with these
        tree = None
    if tree is None or _depth(tree.body) > MAX_WHERE_DEPTH:
        raise ValueError(f"kdb: --where {text[:40]!r}...: nested more than {MAX_WHERE_DEPTH} levels deep")
    _check_node(tree.body, text)
    return lambda meta: bool(_evaluate(tree.body, _fields(meta)))


def _depth(root: ast.AST) -> int:
    """How deeply ``root`` nests (without recursion: the tree may be thousands of levels deep)."""
    deepest, stack = 0, [(root, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return deepest


def _check_node(node: ast.AST, text: str) -> None:
    allowed = (ast.BoolOp, ast.And, ast.Or, ast.UnaryOp, ast.Not, ast.USub, ast.Compare, ast.Name, ast.Load,
               ast.Constant, ast.Tuple, ast.List, *_COMPARE)
    for child in ast.walk(node):
        if not isinstance(child, allowed):
            raise ValueError(f"kdb: --where {text!r}: {type(child).__name__} is not part of the filter language "
                             f"(use and/or/not, comparisons, numbers, strings and {', '.join(WHERE_FIELDS)})")
        if isinstance(child, ast.Name) and child.id not in WHERE_FIELDS and child.id not in SUCCESS_VALUES:
            raise ValueError(f"kdb: --where {text!r}: unknown name {child.id!r} (fields: {', '.join(WHERE_FIELDS)}; "
                             "values: true, false, unknown)")


def _fields(meta: EpisodeMeta) -> dict[str, Any]:
    return {"episode_id": meta.episode_id, "frames": meta.num_frames, "state_dim": meta.state_dim,
            "action_dim": meta.action_dim, "fps": meta.fps, "success": meta.success,
            "total_reward": meta.total_reward, "embodiment": meta.embodiment, "task": meta.task, **SUCCESS_VALUES}


def _evaluate(node: ast.AST, fields: dict[str, Any]) -> Any:
    if isinstance(node, ast.BoolOp):
        values = (_evaluate(value, fields) for value in node.values)
        return all(values) if isinstance(node.op, ast.And) else any(values)
    if isinstance(node, ast.UnaryOp):
        value = _evaluate(node.operand, fields)
        if isinstance(node.op, ast.Not):
            return not value
        if value is None:  # the negation of an unknown total_reward is unknown too
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"kdb: --where cannot negate {value!r}: only numbers have a sign")
        return -value
    if isinstance(node, ast.Compare):
        left = _evaluate(node.left, fields)
        for op, comparator in zip(node.ops, node.comparators):
            right = _evaluate(comparator, fields)
            if isinstance(op, (ast.Eq, ast.NotEq)):
                if not _COMPARE[type(op)](left, right):
                    return False
            elif left is None or right is None:
                return False
            else:
                try:
                    if not _COMPARE[type(op)](left, right):
                        return False
                except TypeError:
                    raise ValueError(f"kdb: --where cannot compare {left!r} with {right!r}") from None
            left = right
        return True
    if isinstance(node, ast.Name):
        return fields[node.id]
    if isinstance(node, ast.Constant):
        return node.value
    assert isinstance(node, (ast.Tuple, ast.List))  # the only node types left after the parse check
    return tuple(_evaluate(element, fields) for element in node.elts)


def stats(sources: Sequence[Any], *, progress: Progress = _no_progress, storage_options: dict | None = None) -> dict:
    """Episodes, frames, per-task counts and success rates, cameras and image sizes, bytes per part."""
    paths = resolve_sources(target_list(sources), storage_options)
    tasks: dict[str, dict[str, Any]] = {}
    cameras: dict[str, dict[str, Any]] = {}
    files, dims, fps, embodiments = [], set(), set(), dict[str, int]()
    episodes = frames = 0
    counts = {"success": 0, "failure": 0, "unknown": 0}
    total = 0
    for path in paths:
        with open_shard(path, storage_options) as kdb:
            total += len(kdb)
    done = 0
    for path in paths:
        with open_shard(path, storage_options) as kdb:
            index = kdb.index
            parts = {"header": HEADER_SIZE, "meta": int(index["meta_length"].sum()),
                     "state_action": int(index["actions_length"].sum()),
                     "images": int(index["images_length"].sum()), "index": len(index) * INDEX_ENTRY.size}
            parts["other"] = kdb.file_size - sum(parts.values())
            files.append({"path": os.fsdecode(path) if isinstance(path, (str, os.PathLike)) else str(path),
                          "episodes": len(kdb), "frames": kdb.num_frames, "bytes": kdb.file_size, "parts": parts})
            for position, meta in itertools.chain.from_iterable(_meta_blocks(kdb, first_frames=True)):
                episodes += 1
                frames += meta.num_frames
                dims.add((meta.state_dim, meta.action_dim))
                fps.add(meta.fps)
                embodiments[meta.embodiment] = embodiments.get(meta.embodiment, 0) + 1
                outcome = {True: "success", False: "failure", None: "unknown"}[meta.success]
                counts[outcome] += 1
                row = tasks.setdefault(meta.task, {"episodes": 0, "frames": 0, "success": 0, "failure": 0,
                                                   "unknown": 0})
                row["episodes"] += 1
                row["frames"] += meta.num_frames
                row[outcome] += 1
                if meta.num_frames:
                    _count_cameras(kdb, position, cameras)
                done += 1
                progress(done, total)
    for row in tasks.values():
        row["success_rate"] = _rate(row)
    return {"files": files, "episodes": episodes, "frames": frames,
            "bytes": sum(file["bytes"] for file in files),
            "parts": {part: sum(file["parts"][part] for file in files) for part in files[0]["parts"]},
            "state_action_dims": [list(pair) for pair in sorted(dims)],
            "fps": sorted(value for value in fps if not np.isnan(value)),
            "embodiments": dict(sorted(embodiments.items())),
            "success": counts, "success_rate": _rate(counts),
            "tasks": dict(sorted(tasks.items())), "cameras": cameras}


def _meta_blocks(kdb: KdbFile, *, first_frames: bool = False) -> Iterator[list[tuple[int, EpisodeMeta]]]:
    """[(position, metadata)] of every episode, META_BLOCK episodes a block: a remote file's blobs (and with
    ``first_frames`` the start of each image section, where the cameras are counted from) read together, not
    one request each, in bounded memory."""
    for first in range(0, len(kdb), META_BLOCK):
        positions = range(first, min(first + META_BLOCK, len(kdb)))
        metas = kdb.read_metas(positions)
        if first_frames:
            kdb.prefetch_first_frames(positions)
        yield list(zip(positions, metas))


def _fetched_ahead(kdb: KdbFile, positions: Sequence[int]) -> Iterator[int]:
    """``positions`` in order, each run of COPY_BLOCK_BYTES of their sections fetched ahead at once: from a
    remote file, neighbouring episodes in one request, not each episode's sections one after another."""
    block: list[int] = []
    held = 0
    for position in positions:
        entry = kdb.entry(position)
        block.append(position)
        held += entry.actions_length + entry.images_length
        if held >= COPY_BLOCK_BYTES or position == positions[-1]:
            kdb.prefetch_episodes(block)
            yield from block
            block, held = [], 0


def _rate(counts: dict[str, Any]) -> float | None:
    known = counts["success"] + counts["failure"]
    return counts["success"] / known if known else None


def _count_cameras(kdb: KdbFile, position: int, cameras: dict[str, dict[str, Any]]) -> None:
    """Per camera: image sizes and encodings, from each episode's first frame."""
    for record in kdb.image_records(position, 0):
        camera = cameras.setdefault(record.camera, {"episodes": 0, "sizes": {}, "encodings": {}})
        camera["episodes"] += 1
        size = f"{record.width}x{record.height}x{record.channels}"
        camera["sizes"][size] = camera["sizes"].get(size, 0) + 1
        head = bytes(kdb.image_bytes([record.offset], [min(4, record.length)])[0])
        encoding = ("raw" if not record.compressed else "jpeg" if head.startswith(JPEG_MAGIC)
                    else "png" if head == PNG_MAGIC else "unknown")
        camera["encodings"][encoding] = camera["encodings"].get(encoding, 0) + 1


def stats_lines(facts: dict) -> list[str]:
    """The human-readable form of :func:`stats`."""
    rate = facts["success_rate"]
    outcomes = facts["success"]
    lines = [(f"{facts['episodes']} episodes, {facts['frames']} frames in {len(facts['files'])} file(s), "
              f"{facts['bytes']:,} bytes"),
             (f"success: {outcomes['success']} true, {outcomes['failure']} false, {outcomes['unknown']} unknown "
              f"(rate {'-' if rate is None else f'{rate:.1%}'})"),
             "state/action dims: " + ", ".join(f"{s}/{a}" for s, a in facts["state_action_dims"]),
             "fps: " + ", ".join(f"{value:g}" for value in facts["fps"]),
             "embodiments: " + ", ".join(f"{name or '-'} ({count})" for name, count in facts["embodiments"].items()),
             "bytes per part: " + ", ".join(f"{part} {count:,}" for part, count in facts["parts"].items()),
             "tasks:"]
    for task, row in facts["tasks"].items():
        task_rate = row["success_rate"]
        lines.append(f"  {task!r}: {row['episodes']} episodes, {row['frames']} frames, success rate "
                     f"{'-' if task_rate is None else f'{task_rate:.1%}'}")
    lines.append("cameras:" if facts["cameras"] else "cameras: none")
    for camera, row in facts["cameras"].items():
        lines.append(f"  {camera}: " + ", ".join(f"{size} ({count})" for size, count in row["sizes"].items())
                     + "; " + ", ".join(f"{kind} ({count})" for kind, count in row["encodings"].items()))
    return lines
