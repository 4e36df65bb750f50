"""The ``arrayio`` command: generic verbs for every format plus one group per format with extra verbs.

Exit codes: 0 success, 1 a file problem (invalid file, format error), 2 usage, 141 closed stdout.
Every verb and group runs through one error wrapper (:func:`._common.run`).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import click

from .. import __version__
from .. import info as file_info
from .. import validate as file_problems
from .._registry import available_formats, module_for, spec_of_file
from ..errors import ArrayIOError, FormatError, Problem
from ._common import (
    emit_json,
    fail,
    json_option,
    problem_object,
    progress,
    run,
    storage_option,
    storage_options_of,
    table_lines,
    target_of,
    tree_lines,
    write_lines,
)

# Per-format command groups, imported only when their verb is used: name -> (module, attribute, help).
FORMAT_GROUPS = {
    "bloscpack": ("arrayio.cli.bloscpack", "bloscpack",
                  "bloscpack tools (alias: blpk): compress, decompress, append, info"),
    "kdb": ("arrayio.cli.kdb", "kdb", "kdb (KINO) tools: ingest, export, show"),
}
GROUP_ALIASES = {"blpk": "bloscpack"}


class _Group(click.Group):
    """The top-level group: generic verbs, plus the format groups loaded on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *FORMAT_GROUPS})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        name = GROUP_ALIASES.get(name, name)
        if name in FORMAT_GROUPS:
            module_name, attribute, _help = FORMAT_GROUPS[name]
            return getattr(importlib.import_module(module_name), attribute)
        return super().get_command(ctx, name)

    def main(self, args: Any = None, prog_name: str | None = None, **extra: Any) -> Any:  # type: ignore[override]  # no standalone_mode: it always exits
        """Run as the console script does: through the one error wrapper of every verb and group."""
        return run(self, None if args is None else list(args))

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        limit = formatter.width - 6 - max(map(len, self.list_commands(ctx)))
        rows = [(name, FORMAT_GROUPS[name][2] if name in FORMAT_GROUPS
                 else self.commands[name].get_short_help_str(limit)) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="arrayio")
def main() -> None:
    """Read, write, inspect and validate kastore, kast, bloscpack, kdb and pycauset files."""


@main.command()
@click.argument("file", type=click.Path(dir_okay=False))
@json_option
@storage_option
def info(file: str, as_json: bool, storage_options: tuple[str, ...]) -> None:
    """Show what FILE (a path or a URL) holds (format detected from its magic bytes)."""
    facts = file_info(target_of(file, storage_options))
    if as_json:
        emit_json(facts)
    else:
        write_lines(tree_lines(facts))


def _file_report(file: str, pairs: tuple[str, ...]) -> dict[str, Any]:
    """Problems of one file; an unreadable or unknown file is one problem, never an exception."""
    name = None
    try:
        target = target_of(file, pairs)
        name = spec_of_file(target).name
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
        from distributed import Client

        with Client(address) as client:
            results = arrayio_dask.validate_checked(list(files), client, storage_options=options)
    return [{"file": file, "format": results[file][0], "problems": results[file][1]} for file in files]


@main.command()
@click.argument("files", metavar="FILE...", nargs=-1, required=True, type=click.Path())
@json_option
@click.option("--dask", "dask_address", is_flag=False, flag_value="local", default=None, metavar="[ADDRESS]",
              help="Validate the files in parallel on a dask.distributed scheduler at ADDRESS "
                   "(a local cluster when no address is given: put --dask last or use --dask=ADDRESS).")
@storage_option
@click.pass_context
def validate(ctx: click.Context, files: tuple[str, ...], as_json: bool, dask_address: str | None,
             storage_options: tuple[str, ...]) -> None:
    """Check every FILE (paths or URLs) completely; exit 0 only when all are valid.

    One line per problem, each starting with its file; exit 1 when any file has a problem.
    """
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


@main.command(name="ls")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("-l", "--long", "long_", is_flag=True, help="A table of every entry's type, shape and size.")
@click.option("--bytes", "exact", is_flag=True, help="Exact byte counts instead of human-readable sizes.")
@json_option
@storage_option
def ls_command(file: str, long_: bool, exact: bool, as_json: bool, storage_options: tuple[str, ...]) -> None:
    """List the entries (keys, arrays, episodes, chunks) of FILE (a path or a URL)."""
    target = target_of(file, storage_options)
    with spec_of_file(target).open(target) as reader:
        rows = reader.entries()
    if as_json:
        emit_json(rows)
    elif long_ and rows:
        write_lines(table_lines(rows, exact=exact))
    else:
        write_lines(str(row["name"]) for row in rows)


@main.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.argument("key")
@storage_option
def cat(file: str, key: str, storage_options: tuple[str, ...]) -> None:
    """Print the values of entry KEY of FILE (a path or a URL), one per line.

    Values are streamed as they are read: the first line appears at once, whatever the size.
    """
    target = target_of(file, storage_options)
    try:
        with spec_of_file(target).open(target) as reader:
            write_lines(reader.cat(key))
    except KeyError as error:
        if error.args == (key,):
            fail(f"no such entry: {key!r}")
        raise


@main.command()
@click.argument("source")
@click.argument("target")
@click.option("--to", "to", help="Target format (kastore, kast, bloscpack, pycauset, zarr, npz, npy); "
              "default: TARGET's extension.")
@click.option("--compression", type=click.Choice(["zstd", "blosc"]), default="zstd", show_default=True,
              help="Compression of zarr targets.")
@storage_option
def convert(source: str, target: str, to: str | None, compression: str, storage_options: tuple[str, ...]) -> None:
    """Convert SOURCE to TARGET chunk by chunk (paths or URLs; arrayio's five formats, .zarr, .npz, .npy)."""
    from ..convert import convert as convert_file
    from ..convert import source_format, target_format, targets_of, total_bytes

    options = storage_options_of(storage_options) or None
    source_name, target_name = source_format(source, options), target_format(target, to)
    if target_name not in targets_of(source_name):
        fail(f"convert: {source_name} -> {target_name} is not a conversion the models allow; {source_name} "
             f"converts to {', '.join(targets_of(source_name))}", 2)
    with progress(os.path.basename(source), total_bytes(source, options) or None, unit="bytes") as bar:
        convert_file(source, target, to=to, compression=compression, storage_options=options,
                     progress=bar.advance)
    click.echo(f"{source} ({source_name}) -> {target} ({target_name})")


@main.command()
@click.argument("file")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write the references here (default: stdout).")
@storage_option
def refs(file: str, output: str | None, storage_options: tuple[str, ...]) -> None:
    """Write kerchunk references (version 1) for FILE's arrays, and what was left out."""
    from ..kerchunk import references

    result = references(file, storage_options_of(storage_options) or None)
    text = json.dumps(result, indent=1, ensure_ascii=False)
    if output is None:
        click.echo(text)
        return
    Path(output).write_text(text + "\n", encoding="utf-8")
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


@main.command()
@click.argument("folder", required=False, type=click.Path(file_okay=False))
@json_option
@click.pass_context
def demo(ctx: click.Context, folder: str | None, as_json: bool) -> None:
    """Write, read back and validate a sample file of every format."""
    if folder is None:
        folder = tempfile.mkdtemp(prefix="arrayio-demo-")
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


from ._map import map_command  # noqa: E402 - a verb in its own module, registered once main exists

main.add_command(map_command)

if __name__ == "__main__":  # pragma: no cover
    main()
