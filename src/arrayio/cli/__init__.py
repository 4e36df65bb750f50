"""The ``arrayio`` command: generic verbs for every format plus one group per format with extra verbs.

Exit codes: 0 success, 1 a file problem (invalid file, format error), 2 usage, 130 interrupted,
141 closed stdout. Every verb and group runs through one error wrapper (:func:`._common.run`); their
help texts and shared flags come from the one table in :mod:`._table`.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from .. import __version__
from .. import foreign as foreign_files
from .. import info as file_info
from .. import validate as file_problems
from .._edge import open_output
from .._optional import require
from .._registry import FORMATS, VIEWS, available_formats, module_for, module_of_file, spec_of_file, view_of
from ..errors import ArrayIOError, FormatError, Problem
from ._common import (
    check_target,
    clear_leftovers_of,
    emit_json,
    fail,
    problem_object,
    progress,
    run,
    storage_options_of,
    table_lines,
    target_of,
    tree_lines,
    write_lines,
)
from ._table import GROUPS, command

# Per-format command groups, imported only when their verb is used.
FORMAT_GROUPS = {group.name: group for group in GROUPS}
GROUP_ALIASES = {alias: group.name for group in GROUPS for alias in group.aliases}


class _Group(click.Group):
    """The top-level group: generic verbs, plus the format groups loaded on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *FORMAT_GROUPS})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        name = GROUP_ALIASES.get(name, name)
        if name in FORMAT_GROUPS:
            return getattr(importlib.import_module(FORMAT_GROUPS[name].module), name)
        return super().get_command(ctx, name)

    def main(self, args: Any = None, prog_name: str | None = None, **extra: Any) -> Any:  # type: ignore[override]  # no standalone_mode: it always exits
        """Run as the console script does: through the one error wrapper of every verb and group."""
        return run(self, None if args is None else list(args))

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        limit = formatter.width - 6 - max(map(len, self.list_commands(ctx)))
        rows = [(name, FORMAT_GROUPS[name].summary() if name in FORMAT_GROUPS
                 else self.commands[name].get_short_help_str(limit)) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="arrayio")
@click.option("--debug", is_flag=True, help="Show the traceback of an unexpected error.")
def main(debug: bool) -> None:
    """Read, write, inspect and validate kastore, kast, bloscpack, kdb and pycauset files."""


@command(main, "info")
@click.argument("file")
def info(file: str, as_json: bool, storage_options: tuple[str, ...]) -> None:
    """Show what FILE (a path or a URL) holds (format detected from its magic bytes)."""
    target = target_of(file, storage_options)
    facts = foreign_files.info(target) if foreign_files.kind_of(target) else file_info(target)
    if as_json:
        emit_json(facts)
    else:
        write_lines(tree_lines(facts))


def _file_report(file: str, pairs: tuple[str, ...]) -> dict[str, Any]:
    """Problems of one file; an unreadable or unknown file is one problem, never an exception."""
    name = None
    try:
        target = target_of(file, pairs)
        name = module_of_file(target).FORMAT_NAME
        problems = file_problems(target)
    except OSError as error:  # the line names the file already: the reason is enough
        problems = [Problem(error.strerror or str(error))]
    except ArrayIOError as error:
        problems = [Problem.from_error(error) if isinstance(error, FormatError) else Problem(str(error))]
    return {"file": file, "format": name, "problems": problems}


def _reports_on_dask(files: tuple[str, ...], address: str, pairs: tuple[str, ...]) -> list[dict[str, Any]]:
    """The reports of ``files``, validated in parallel on a dask.distributed scheduler."""
    from .. import dask as arrayio_dask

    options = storage_options_of(pairs) or None
    if address == "local":
        results = arrayio_dask.validate_checked(list(files), storage_options=options)
    else:
        distributed = require("distributed", "validate --dask")
        with distributed.Client(address) as client:
            results = arrayio_dask.validate_checked(list(files), client, storage_options=options)
    return [{"file": file, "format": results[file][0], "problems": results[file][1]} for file in files]


@command(main, "validate")
@click.argument("files", metavar="FILE...", nargs=-1, required=True)
@click.option("--dask", "dask_address", is_flag=False, flag_value="local", default=None, metavar="[ADDRESS]",
              help="Validate the files in parallel on a dask.distributed scheduler at ADDRESS "
                   "(a local cluster when no address is given: put --dask last or use --dask=ADDRESS).")
@click.pass_context
def validate(ctx: click.Context, files: tuple[str, ...], as_json: bool, dask_address: str | None,
             storage_options: tuple[str, ...]) -> None:
    """Check every FILE (paths or URLs) completely; exit 0 only when all are valid."""
    if dask_address is not None:
        reports = _reports_on_dask(files, dask_address, storage_options)
    else:
        reports = [_file_report(file, storage_options) for file in files]
    valid = not any(report["problems"] for report in reports)
    if as_json:
        emit_json({"valid": valid, "files": [
            {"file": report["file"], "format": report["format"], "valid": not report["problems"],
             "problems": [problem_object(problem) for problem in report["problems"]]}
            for report in reports]})
    else:
        for report in reports:
            for problem in report["problems"]:
                click.echo(f"{report['file']}: {problem}")
            if not report["problems"]:
                click.echo(f"{report['file']}: valid {report['format']} file")
    ctx.exit(0 if valid else 1)


@command(main, "ls")
@click.argument("file")
@click.option("-l", "--long", "long_", is_flag=True, help="A table of every entry's type, shape and size.")
@click.option("--bytes", "exact", is_flag=True, help="Exact byte counts instead of human-readable sizes.")
def ls_command(file: str, long_: bool, exact: bool, as_json: bool, storage_options: tuple[str, ...]) -> None:
    """List the entries (keys, arrays, episodes, chunks) of FILE (a path or a URL)."""
    target = target_of(file, storage_options)
    rows = _module_of(target).entries(target)
    if as_json:
        emit_json(rows)
    elif long_ and rows:
        write_lines(table_lines(rows, exact=exact))
    else:
        write_lines(str(row["name"]) for row in rows)


@command(main, "cat")
@click.argument("file")
@click.argument("key")
@click.option("--numbers", is_flag=True, help="Print uint8/int8 text and JSON as numbers too.")
def cat(file: str, key: str, numbers: bool, storage_options: tuple[str, ...]) -> None:
    """Print the values of entry KEY of FILE (a path or a URL), one per line, streamed."""
    target = target_of(file, storage_options)
    module = _module_of(target)
    try:
        write_lines(module.cat(target, key, numbers=numbers))
    except KeyError as error:
        if error.args == (key,):
            names = [str(row["name"]) for row in module.entries(target)]
            shown = ", ".join(names[:10]) + (f" and {len(names) - 10} more" if len(names) > 10 else "")
            fail(f"{file}: no such entry: {key!r}; its entries: {shown or 'none'} (`arrayio ls {file}` lists them)")
        raise


def _module_of(target: Any) -> Any:
    """What lists and prints ``target``: its arrayio reader, or the reader of the numpy/zarr files convert writes."""
    if foreign_files.kind_of(target):
        return foreign_files
    view = view_of(target)  # a community's layout over a format (tskit's .trees) shows what its users know
    return importlib.import_module(VIEWS[view].module) if view is not None else _ARRAYIO_FILES


class _ArrayioFiles:
    """``ls`` and ``cat`` of an arrayio file: its reader's ``entries()`` and ``cat()``, the reader open meanwhile."""

    @staticmethod
    def entries(target: Any) -> list[dict[str, Any]]:
        """The reader's entries."""
        with spec_of_file(target).open(target) as reader:
            return reader.entries()

    @staticmethod
    def cat(target: Any, key: str, numbers: bool = False) -> Iterator[str]:
        """The reader's lines of entry ``key``, streamed while it is open."""
        with spec_of_file(target).open(target) as reader:
            yield from reader.cat(key, numbers)


_ARRAYIO_FILES = _ArrayioFiles()


@command(main, "convert")
@click.argument("source")
@click.argument("target")
@click.option("--to", "to", help="Target format (kastore, kast, bloscpack, pycauset, zarr, npz, npy); "
              "default: TARGET's extension.")
@click.option("--compression", type=click.Choice(["zstd", "blosc"]), default="zstd", show_default=True,
              help="Compression of zarr targets.")
def convert(source: str, target: str, to: str | None, compression: str, storage_options: tuple[str, ...],
            force: bool) -> None:
    """Convert SOURCE to TARGET chunk by chunk (paths or URLs; arrayio's five formats, .zarr, .npz, .npy)."""
    from ..convert import convert as convert_file
    from ..convert import source_format, target_format, targets_of, tool_conversion, total_bytes

    options = storage_options_of(storage_options) or None
    clear_leftovers_of(target)
    if tool_conversion(source, target) is not None:  # .trees <-> .tsz, .blp <-> .b2nd/.b2frame
        with progress(os.path.basename(source), None, unit="bytes") as bar:
            target_name = convert_file(source, target, storage_options=options, progress=bar.advance, force=force)
        click.echo(f"{source} -> {target} ({target_name})")
        return
    source_name, target_name = source_format(source, options), target_format(target, to)
    if target_name not in targets_of(source_name):
        fail(f"convert: {source_name} -> {target_name} is not a conversion the models allow; {source_name} "
             f"converts to {', '.join(targets_of(source_name))}", 2)
    with progress(os.path.basename(source), total_bytes(source, options) or None, unit="bytes") as bar:
        convert_file(source, target, to=to, compression=compression, storage_options=options,
                     progress=bar.advance, force=force)
    click.echo(f"{source} ({source_name}) -> {target} ({target_name})")


@command(main, "refs")
@click.argument("file")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write the references here (default: stdout).")
def refs(file: str, output: str | None, storage_options: tuple[str, ...], force: bool) -> None:
    """Write kerchunk references (version 1) for FILE's arrays, and what was left out."""
    from ..kerchunk import references

    if output is not None:
        check_target(output, force, file)
    result = references(file, storage_options_of(storage_options) or None)
    text = json.dumps(result, indent=1, ensure_ascii=False)
    if output is None:
        click.echo(text)
        return
    with open_output(output) as stream:
        stream.write((text + "\n").encode("utf-8"))
    for item in result["left_out"]:
        click.echo(f"left out {item['path']}: {item['reason']}", err=True)
    click.echo(f"{file} -> {output} ({sum(1 for value in result['refs'].values() if isinstance(value, list))} "
               "byte ranges)")


def _demo_one(name: str, folder: Path) -> dict[str, Any]:
    module = module_for(name)
    try:
        path = module.demo(folder)
        problems = [str(problem) for problem in file_problems(path)]
        summary = file_info(path).get("summary", "")
        size = os.path.getsize(path)
    except Exception as error:  # a demo failure is reported per format, not as a crash
        path, problems, summary, size = "-", [f"{type(error).__name__}: {error}"], "", 0
    return {"format": name, "file": str(path), "bytes": size, "valid": not problems, "summary": summary,
            "problems": problems}


@command(main, "demo")
@click.argument("folder", required=False, type=click.Path(file_okay=False))
@click.pass_context
def demo(ctx: click.Context, folder: str | None, as_json: bool, force: bool) -> None:
    """Write, read back and validate a sample file of every format."""
    if folder is None:
        folder = tempfile.mkdtemp(prefix="arrayio-demo-")
    for name in available_formats():
        for extension in FORMATS[name].extensions:
            check_target(os.path.join(folder, f"demo{extension}"), force)
    Path(folder).mkdir(parents=True, exist_ok=True)
    results = [_demo_one(name, Path(folder)) for name in available_formats()]
    if as_json:
        emit_json({"folder": folder, "formats": results})
    else:
        click.echo(f"arrayio demo: files in {folder}")
        write_lines(table_lines([{"format": r["format"], "bytes": r["bytes"],
                                  "valid": "yes" if r["valid"] else "NO: " + "; ".join(map(str, r["problems"])),
                                  "summary": r["summary"], "name": os.path.basename(r["file"])} for r in results]))
    ctx.exit(0 if all(result["valid"] for result in results) else 1)


from . import _map  # noqa: E402,F401 - a verb in its own module, registered on main by importing it

if __name__ == "__main__":  # pragma: no cover
    main()
