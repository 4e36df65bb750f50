"""``arrayio bloscpack`` (alias ``arrayio blpk``): the bloscpack command line (compress, decompress,
append, info), with the reference ``blpk`` options, defaults, one-letter aliases and transcript
lines; errors go through the one ``arrayio:`` wrapper.

Exit codes: 0 success, 1 a file problem (missing input, existing output, malformed file),
2 usage errors (bad option values, no subcommand).
"""

from __future__ import annotations

import json
import os
import pprint
from typing import Any, Callable

import blosc
import click

from ..bloscpack import (
    CHECKSUM_NAMES,
    EXTENSION,
    BloscArgs,
    BloscpackArgs,
    MetadataArgs,
    NoChangeInMetadata,
    append,
    double_pretty_size,
    pack_file_to_file,
    rewrite_metadata,
    set_nthreads,
    unpack_file_from_file,
)
from ..bloscpack import open as open_file
from ..bloscpack._records import MAX_BUFFERSIZE, SUFFIXES, reverse_pretty
from ._common import check_target, progress
from ._common import fail as _fail
from ._table import VERBS, command, group_help

PROGRESS_THRESHOLD = 64 * 2**20
_VERBOSITY = {"level": 0}


def _say(level: int, message: str) -> None:
    """A verbose line, worded and prefixed as the reference ``blpk`` prints it."""
    if _VERBOSITY["level"] >= level:
        click.echo(f"blpk: {message}")


def _bar(total: int, label: str) -> Any:
    """The shared progress bar, for inputs over 64 MiB."""
    return progress(label, total, threshold=PROGRESS_THRESHOLD, unit="bytes")


def _check_files(in_file: str, out_file: str, force: bool) -> None:
    if not os.path.exists(in_file):
        _fail(f"input file '{in_file}' does not exist!")
    if os.path.lexists(out_file):
        if not force:
            _fail(f"output file '{out_file}' exists! (--force replaces it)")
        _say(1, f"overwriting existing file: '{out_file}'")
    check_target(out_file, force, in_file)
    _say(1, f"input file is: '{in_file}'")
    _say(1, f"output file is: '{out_file}'")


def _read_metadata_file(path: str | None) -> Any:
    if path is None:
        return None
    try:
        with open(path, encoding="utf-8") as handle:
            return json.loads(handle.read().strip())
    except OSError as error:
        _fail(f"metadata file '{path}': {error.strerror or error}")
    except ValueError as error:
        _fail(f"metadata file '{path}' is not valid JSON: {error}")


def _chunk_size(ctx: click.Context, param: click.Parameter, value: str) -> int:
    if value == "max":
        return MAX_BUFFERSIZE
    try:
        size = reverse_pretty(value) if value[-1:] in SUFFIXES else int(value)
    except ValueError as error:
        raise click.BadParameter(str(error)) from None
    if size <= 0:
        raise click.BadParameter("--chunk-size must be > 0")
    return size


def _nthreads(ctx: click.Context, param: click.Parameter, value: int | None) -> int | None:
    if value is not None and not 1 <= value <= blosc.MAX_THREADS:
        _fail(f"-n must be 1 <= n <= {blosc.MAX_THREADS}")
    return value


def _blosc_options(function: Callable) -> Callable:
    options = [
        click.option("-t", "--typesize", type=int, default=8, show_default=True, help="typesize for blosc"),
        click.option("-l", "--clevel", type=click.IntRange(0, 9), default=7, show_default=True,
                     help="compression level"),
        click.option("-s", "--no-shuffle", "shuffle", flag_value=False, default=True, help="deactivate shuffle"),
        click.option("-c", "--codec", "cname", type=click.Choice(blosc.compressor_list()), default="blosclz",
                     show_default=True, help="codec to be used by Blosc"),
    ]
    for option in reversed(options):
        function = option(function)
    return function


class _Group(click.Group):
    """Subcommands with the reference's one-letter aliases (c, d, a, i)."""

    ALIASES = {alias: verb.leaf for verb in VERBS if verb.group == "bloscpack" for alias in verb.aliases}

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        return super().get_command(ctx, self.ALIASES.get(name, name))

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        aliases = {command: alias for alias, command in self.ALIASES.items()}
        rows = [(f"{name}|{aliases[name]}" if name in aliases else name, command.get_short_help_str())
                for name, command in self.commands.items()]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(name="bloscpack", cls=_Group, invoke_without_command=True, help=group_help("bloscpack"),
             context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-v", "--verbose", is_flag=True, help="be verbose about actions")
@click.option("-d", "--debug", is_flag=True, help="print debugging output too")
@click.option("-f", "--force", is_flag=True, help="disable overwrite checks for existing files (use with caution)")
@click.option("-n", "--nthreads", type=int, default=None, callback=_nthreads, metavar="[1, 256]",
              help=f"set number of threads (default: {blosc.ncores} = ncores)")
@click.version_option(message=f"bloscpack: '3 (arrayio)' python-blosc: '{blosc.__version__}' "
                              f"blosc: '{blosc.VERSION_STRING}'", prog_name="blpk")
@click.pass_context
def bloscpack(ctx: click.Context, verbose: bool, debug: bool, force: bool, nthreads: int | None) -> None:
    """Command line de/compression with blosc, in bloscpack (.blp) files (help: the verb table)."""
    if verbose and debug:
        raise click.UsageError("-v/--verbose and -d/--debug are mutually exclusive")
    _VERBOSITY["level"] = 2 if debug else 1 if verbose else 0
    if nthreads is not None:
        set_nthreads(nthreads)
    ctx.obj = {"force": force}
    if ctx.invoked_subcommand is None:
        click.echo(ctx.get_usage(), err=True)
        _fail("too few arguments", 2)


@command(bloscpack, "bloscpack compress")
@_blosc_options
@click.option("-z", "--chunk-size", default="1M", callback=_chunk_size, show_default=True,
              help="set desired chunk size or 'max'")
@click.option("-k", "--checksum", type=click.Choice(CHECKSUM_NAMES), default="adler32", show_default=True,
              help="set desired checksum")
@click.option("-o", "--no-offsets", "offsets", flag_value=False, default=True, help="deactivate offsets")
@click.option("-m", "--metadata", type=str, default=None, help="file containing the metadata, must contain valid JSON")
@click.argument("in_file")
@click.argument("out_file", required=False)
@click.pass_context
def compress(ctx: click.Context, typesize: int, clevel: int, shuffle: bool, cname: str, chunk_size: int,
             checksum: str, offsets: bool, metadata: str | None, in_file: str, out_file: str | None,
             force: bool) -> None:
    """perform compression on file"""
    out_file = out_file or in_file + EXTENSION
    _check_files(in_file, out_file, ctx.obj["force"] or force)
    value = _read_metadata_file(metadata)
    blosc_args = BloscArgs(typesize=typesize, clevel=clevel, shuffle=shuffle, cname=cname)
    _say(2, f"blosc args: {dict(blosc_args)}; chunk size {chunk_size}; checksum {checksum}; offsets {offsets}")
    with _bar(os.path.getsize(in_file), "compress") as bar:
        pack_file_to_file(in_file, out_file, chunk_size=chunk_size, metadata=value, blosc_args=blosc_args,
                          bloscpack_args=BloscpackArgs(offsets=offsets, checksum=checksum),
                          metadata_args=MetadataArgs(), progress=bar.advance)
    _say(1, f"output file size: {double_pretty_size(os.path.getsize(out_file))}")
    _say(1, "done")


@command(bloscpack, "bloscpack decompress")
@click.option("-e", "--no-check-extension", is_flag=True,
              help="disable checking input file for extension (*.blp) (requires use of <out_file>)")
@click.argument("in_file")
@click.argument("out_file", required=False)
@click.pass_context
def decompress(ctx: click.Context, no_check_extension: bool, in_file: str, out_file: str | None,
               force: bool) -> None:
    """perform decompression on file"""
    if no_check_extension:
        if out_file is None:
            _fail("--no-check-extension requires use of <out_file>")
    elif not in_file.endswith(EXTENSION):
        _fail(f"input file '{in_file}' does not end with '{EXTENSION}'")
    out_file = out_file or in_file[:-len(EXTENSION)]
    _check_files(in_file, out_file, ctx.obj["force"] or force)
    with open_file(in_file) as reader:
        nbytes = reader.info()["nbytes"]
    with _bar(nbytes, "decompress") as bar:
        metadata = unpack_file_from_file(in_file, out_file, progress=bar.advance)
    if metadata:
        click.echo("blpk: Metadata:")
        click.echo(pprint.pformat(metadata, width=90))
    _say(1, "done")


@command(bloscpack, "bloscpack append")
@_blosc_options
@click.option("-e", "--no-check-extension", is_flag=True, help="disable checking original file for extension (*.blp)")
@click.option("-m", "--metadata", type=str, default=None, help="file containing the metadata, must contain valid JSON")
@click.argument("original_file")
@click.argument("new_file")
def append_command(typesize: int, clevel: int, shuffle: bool, cname: str, no_check_extension: bool,
                   metadata: str | None, original_file: str, new_file: str) -> None:
    """append data to a compressed file"""
    if not no_check_extension and not original_file.endswith(EXTENSION):
        _fail(f"original file '{original_file}' does not end with '{EXTENSION}'")
    if not os.path.exists(original_file):
        _fail(f"original file '{original_file}' does not exist!")
    if not os.path.exists(new_file):
        _fail(f"new file '{new_file}' does not exist!")
    value = _read_metadata_file(metadata)
    before = os.path.getsize(original_file)
    with _bar(os.path.getsize(new_file), "append") as bar:
        count = append(original_file, new_file, dict(typesize=typesize, clevel=clevel, shuffle=shuffle, cname=cname),
                       progress=bar.advance)
        if value is not None:
            try:
                rewrite_metadata(original_file, value)
            except NoChangeInMetadata:
                _say(1, "metadata unchanged, not rewritten")
    _say(1, f"orig file size before append: {double_pretty_size(before)}")
    _say(1, f"orig file size after append: {double_pretty_size(os.path.getsize(original_file))} "
            f"({count} new chunks)")
    _say(1, "done")


@command(bloscpack, "bloscpack info")
@click.argument("file_", metavar="FILE")
def info_command(file_: str) -> None:
    """print information about a compressed file"""
    if not os.path.exists(file_):
        _fail(f"file '{file_}' does not exist!")
    with open_file(file_) as reader:
        facts = reader.info()
    header = {"format_version": int(facts["version"]), **{key: facts[key] for key in (
        "offsets", "checksum", "typesize", "chunk_size", "last_chunk", "nchunks", "max_app_chunks")}}
    click.echo("blpk: BloscpackHeader:")
    for key, value in header.items():
        click.echo(f"blpk:     {key}: {value!r}")
    if facts["offsets"]:
        click.echo("blpk: 'offsets':")
        click.echo(f"blpk: [{','.join(map(str, facts['first_offsets']))},...]")
    if "metadata" in facts:
        click.echo("blpk: Metadata:")
        click.echo(pprint.pformat(facts["metadata"], width=90))
        click.echo("blpk: MetadataHeader:")
        for key, value in facts["metadata_header"].items():
            click.echo(f"blpk:     {key}: {value!r}")
    if "first_chunk" in facts:
        first = facts["first_chunk"]
        click.echo("blpk: First chunk blosc header:")
        header_fields = ("version", "versionlz", "flags", "typesize", "nbytes", "blocksize", "cbytes")
        flag_fields = ("byte_shuffle", "pure_memcpy", "bit_shuffle", "split_blocks", "codec")
        click.echo(f"blpk: { {key: first[key] for key in header_fields} }")
        click.echo("blpk: First chunk blosc flags: ")
        click.echo(f"blpk: { {key: first[key] for key in flag_fields} }")
    click.echo(f"blpk: {facts['summary']}")
