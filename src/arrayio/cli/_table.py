"""The one table of the ``arrayio`` command: every verb and group, its arguments, its one-line summary,
which shared flags it takes and what ``--json`` prints.

The help texts, the top-level listing of each group's verbs and the verbs table of docs/cli.md are all
made from these rows (``python -m arrayio.cli._table`` prints that table; a test checks docs/cli.md
against it), and the contract tests walk the same rows. Adding a verb is one row here plus its
function; adding a shared flag to a verb is one word in its row's ``flags``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import click

from ._common import force_option, json_option, storage_option

__all__ = ["GROUPS", "VERBS", "Group", "Verb", "command", "group_help", "markdown_table"]


@dataclass(frozen=True)
class Verb:
    """One verb: ``name`` is its words after ``arrayio`` (``"kdb stats"``)."""

    name: str
    arguments: str
    summary: str
    flags: tuple[str, ...] = ()      # shared flags, in the order --help lists them: json, storage, force
    json: str = "-"                  # what --json prints
    aliases: tuple[str, ...] = ()    # other names of the verb (bloscpack's reference one-letter names)

    @property
    def group(self) -> str:
        """The group the verb is in ("" for a top-level verb)."""
        return self.name.rpartition(" ")[0]

    @property
    def leaf(self) -> str:
        """The verb's own word."""
        return self.name.rpartition(" ")[2]


@dataclass(frozen=True)
class Group:
    """A group of verbs of one format, imported on first use."""

    name: str
    module: str
    title: str
    aliases: tuple[str, ...] = ()

    def summary(self) -> str:
        """The group's line in the top-level help: its title and every verb it has."""
        names = [verb.leaf for verb in VERBS if verb.group == self.name]
        alias = f" (alias: {', '.join(self.aliases)})" if self.aliases else ""
        return f"{self.title}{alias}: {', '.join(names)}"


GROUPS: tuple[Group, ...] = (
    Group("bloscpack", "arrayio.cli.bloscpack", "bloscpack tools", ("blpk",)),
    Group("kdb", "arrayio.cli.kdb", "kdb (KINO) tools"),
)

VERBS: tuple[Verb, ...] = (
    Verb("info", "FILE", "What FILE (a path or a URL) holds, as an indented tree; the format from its magic bytes.",
         ("json", "storage"), "the full `info()` dict"),
    Verb("ls", "FILE [-l [--bytes]]", "The entries (keys, arrays, episodes, chunks) of FILE; -l: a table with a "
         "header row, sizes human-readable (--bytes: exact).", ("json", "storage"), "list of entry rows"),
    Verb("validate", "FILE... [--dask [ADDRESS]]", "Check every FILE completely: one line per problem; exit 0 "
         "only when all are valid.", ("json", "storage"), '`{"valid", "files": [...]}`'),
    Verb("cat", "FILE KEY [--numbers]", "The values of entry KEY of FILE, one per line, streamed; UTF-8 bytes "
         "and JSON print as text (--numbers: as numbers).", ("storage",)),
    Verb("convert", "SOURCE TARGET [--to FORMAT] [--compression zstd|blosc]", "Convert SOURCE to TARGET chunk by "
         "chunk: the five formats, .npz, .npy and Zarr v3 stores, where the models meet.", ("storage",)),
    Verb("refs", "FILE [-o refs.json]", "Kerchunk references (version 1) for FILE's arrays, and what was left out.",
         ("storage",)),
    Verb("map", "FILE [--png OUT.png]", "Every byte of FILE as sections in file order: offset, length, kind, "
         "label; exit 1 when the file has problems.", ("json", "storage"), "the sections, totals and problems"),
    Verb("demo", "[FOLDER]", "Write, read back and validate a sample file of every format.", ("json",),
         '`{"folder", "formats": [...]}`'),
    Verb("bloscpack compress", "IN_FILE [OUT_FILE]", "Compress a file into a bloscpack file (the reference "
         "blpk's options and defaults).", ("force",), aliases=("c",)),
    Verb("bloscpack decompress", "IN_FILE [OUT_FILE]", "Decompress a bloscpack file.", ("force",), aliases=("d",)),
    Verb("bloscpack append", "ORIGINAL_FILE NEW_FILE", "Append the bytes of NEW_FILE to a bloscpack file.", (),
         aliases=("a",)),
    Verb("bloscpack info", "FILE", "The header, offsets, metadata and first chunk of a bloscpack file "
         "(blpk's transcript lines).", (), aliases=("i",)),
    Verb("kdb ingest-hdf5", "SOURCE TARGET", "Convert a robomimic-layout HDF5 file to a .kdb file.", ()),
    Verb("kdb ingest-lerobot", "SOURCE TARGET", "Convert a LeRobot dataset folder (v2.1 or v3.0, videos "
         "included) to a .kdb file.", ()),
    Verb("kdb export", "SOURCE TARGET", "Write every episode of a .kdb file into an .npz (images decoded).",
         ("storage",)),
    Verb("kdb export-lerobot", "SOURCE TARGET", "Write a .kdb file as a LeRobot v3.0 dataset folder "
         "(parquet + AV1 MP4).", ("storage",)),
    Verb("kdb merge", "SOURCES... -o TARGET", "Concatenate the episodes of SOURCES (files, URLs or globs) into "
         "one file.", ("storage",)),
    Verb("kdb filter", "SOURCE TARGET [--where EXPR]", "Copy the episodes of SOURCE that meet every condition "
         "into TARGET; exit 1 when none does.", ("storage",)),
    Verb("kdb stats", "SOURCES...", "Episodes, frames, tasks with success rates, cameras and bytes of SOURCES "
         "(files, URLs or globs).", ("json", "storage"), "the statistics"),
    Verb("kdb show", "FILE EPISODE [--png OUT.png]", "Describe one episode of FILE (and draw it with --png).",
         ("storage",)),
)

_VERBS = {verb.name: verb for verb in VERBS}
FLAG_OPTIONS: dict[str, Callable[[Callable], Callable]] = {
    "json": json_option, "storage": storage_option, "force": force_option}


def group_help(name: str) -> str:
    """The help text of group ``name``: its row's summary."""
    return next(group.summary() for group in GROUPS if group.name == name)


def command(group: click.Group, name: str, **settings: Any) -> Callable[[Callable], click.Command]:
    """Register ``function`` as verb ``name`` of ``group``: help and shared flags from the verb's row."""
    verb = _VERBS[name]

    def register(function: Callable) -> click.Command:
        for flag in reversed(verb.flags):
            function = FLAG_OPTIONS[flag](function)
        return group.command(verb.leaf, help=verb.summary, short_help=verb.summary, **settings)(function)

    return register


def markdown_table() -> str:
    """The verbs table of docs/cli.md."""
    lines = ["| verb | what it does | `--json` | `--storage-option` |", "| --- | --- | --- | --- |"]
    for group in GROUPS:
        lines.append(f"| `{group.name} ...` | {group.summary()} | | |")
    for verb in VERBS:
        names = " / ".join(f"`{name}`" for name in (verb.name, *(f"{verb.group} {alias}" for alias in verb.aliases)))
        arguments, summary = (text.replace("|", "\\|") for text in (verb.arguments, verb.summary))
        lines.append(f"| {names} `{arguments}` | {summary} | "
                     f"{verb.json if 'json' in verb.flags else '-'} | {'yes' if 'storage' in verb.flags else '-'} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":  # pragma: no cover - the maintainer's way to regenerate docs/cli.md's table
    print(markdown_table(), end="")
