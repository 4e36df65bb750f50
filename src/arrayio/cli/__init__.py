"""The ``arrayio`` command: generic verbs for every format plus per-format groups.

Exit codes: 0 success, 1 a file problem (invalid file, format error), 2 usage.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterable

import click

from .. import __version__
from .._registry import available_formats, module_for, module_of_file
from ..errors import ArrayIOError

# Per-format command groups, imported only when their verb is used.
FORMAT_GROUPS = {
    "blpk": ("arrayio.cli.bloscpack", "blpk", "bloscpack tools: compress, decompress, append, info"),
    "kdb": ("arrayio.cli.kdb", "kdb", "kdb (KINO) tools: ingest, export, show"),
}


class _Group(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        names = set(super().list_commands(ctx))
        for name, (module_name, _attr, _help) in FORMAT_GROUPS.items():
            if importlib.util.find_spec(module_name.rsplit(".", 1)[0]) is not None:
                names.add(name)
        return sorted(names)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in FORMAT_GROUPS:
            module_name, attribute, _help = FORMAT_GROUPS[name]
            try:
                return getattr(importlib.import_module(module_name), attribute)
            except ImportError:
                return None
        return super().get_command(ctx, name)


def _fail(message: str, code: int = 1) -> None:
    click.echo(f"arrayio: {message}", err=True)
    sys.exit(code)


def os_error_text(error: OSError) -> str:
    """One line for an OS error: "path: reason" (the reason alone when no path is known)."""
    return f"{getattr(error, 'filename', '') or ''}: {error.strerror or error}".lstrip(": ")


def _emit_json(value: Any) -> None:
    click.echo(json.dumps(value, indent=2, default=str, ensure_ascii=False))


def _table(title: str, columns: list[str], rows: Iterable[Iterable[Any]]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title, show_lines=False)
    for column in columns:
        table.add_column(column)
    for row in rows:
        table.add_row(*[str(cell) for cell in row])
    Console(soft_wrap=True).print(table)


def _module(path: str) -> Any:
    try:
        return module_of_file(path)
    except ArrayIOError as error:
        _fail(str(error))
    except OSError as error:
        _fail(f"{path}: {error.strerror or error}")


def _guard(action: Any) -> Any:
    """Run ``action``; a format or OS error becomes one line on stderr and exit 1."""
    try:
        return action()
    except ArrayIOError as error:
        _fail(str(error))
    except OSError as error:
        _fail(os_error_text(error))
    except KeyError as error:
        _fail(f"no such entry: {error.args[0]!r}")


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="arrayio")
def main() -> None:
    """Read, write, inspect and validate kastore, kast, bloscpack, kdb and pycauset files."""


@main.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
def info(file: str, as_json: bool) -> None:
    """Show what FILE holds (the format is detected from its magic bytes)."""
    module = _module(file)
    facts = _guard(lambda: module.info(file))
    facts = {"format": module.FORMAT_NAME, **facts}
    if as_json:
        _emit_json(facts)
        return
    for key, value in facts.items():
        if isinstance(value, (dict, list)):
            value = json.dumps(value, default=str, ensure_ascii=False)
        click.echo(f"{key}: {value}")


@main.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
def validate(file: str, as_json: bool) -> None:
    """Check FILE completely; exit 0 when valid, 1 with one line per problem."""
    try:
        module = module_of_file(file)
        problems = module.validate(file)
        name = module.FORMAT_NAME
    except ArrayIOError as error:
        name, problems = None, [str(error)]
    except OSError as error:
        _fail(f"{file}: {error.strerror or error}")
    if as_json:
        _emit_json({"file": file, "format": name, "valid": not problems, "problems": problems})
    else:
        for problem in problems:
            click.echo(problem)
        if not problems:
            click.echo(f"{file}: valid {name} file")
    sys.exit(1 if problems else 0)


@main.command(name="ls")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("-l", "--long", "long_", is_flag=True, help="Show type, shape and size of each entry.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
def ls_command(file: str, long_: bool, as_json: bool) -> None:
    """List the entries (keys, arrays, episodes) of FILE."""
    module = _module(file)
    rows = _guard(lambda: module.entries(file))
    if as_json:
        _emit_json(rows)
        return
    for row in rows:
        if long_:
            details = "\t".join(f"{value}" for key, value in row.items() if key != "name")
            click.echo(f"{details}\t{row['name']}" if details else str(row["name"]))
        else:
            click.echo(row["name"])


@main.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.argument("key")
def cat(file: str, key: str) -> None:
    """Print the values of entry KEY of FILE, one per line."""
    module = _module(file)

    def run() -> None:
        for line in module.cat(file, key):
            click.echo(line)

    _guard(run)


@main.command()
@click.argument("source")
@click.argument("target")
@click.option("--to", "to", help="Target format (kastore, kast, bloscpack, pycauset, zarr, npz, npy); "
              "default: TARGET's extension.")
@click.option("--compression", type=click.Choice(["zstd", "blosc"]), default="zstd", show_default=True,
              help="Compression of zarr targets.")
def convert(source: str, target: str, to: str | None, compression: str) -> None:
    """Convert SOURCE to TARGET chunk by chunk (formats: arrayio's five, .zarr, .npz, .npy)."""
    from ..convert import TARGETS, source_format, target_format, total_bytes
    from ..convert import convert as convert_file

    source_name = _guard(lambda: source_format(source))
    target_name = _guard(lambda: target_format(target, to))
    if target_name not in TARGETS.get(source_name, ()):
        _fail(f"convert: {source_name} -> {target_name} is not a conversion the models allow; {source_name} "
              f"converts to {', '.join(TARGETS.get(source_name, ()))}", 2)

    def run() -> str:
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            Progress,
            TimeRemainingColumn,
        )

        with Progress("{task.description}", BarColumn(), DownloadColumn(), TimeRemainingColumn(),
                      transient=True, disable=not sys.stderr.isatty()) as bar:
            task = bar.add_task(os.path.basename(source), total=total_bytes(source) or None)
            return convert_file(source, target, to=to, compression=compression,
                                progress=lambda nbytes: bar.advance(task, nbytes))

    _guard(run)
    click.echo(f"{source} ({source_name}) -> {target} ({target_name})")


@main.command()
@click.argument("file")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write the references here (default: stdout).")
def refs(file: str, output: str | None) -> None:
    """Write kerchunk references (version 1) for FILE's arrays, and what was left out."""
    from ..kerchunk import references

    result = _guard(lambda: references(file))
    text = json.dumps(result, indent=1, ensure_ascii=False)
    if output is None:
        click.echo(text)
        return
    Path(output).write_text(text + "\n", encoding="utf-8")
    for item in result["left_out"]:
        click.echo(f"left out {item['path']}: {item['reason']}", err=True)
    click.echo(f"{file} -> {output} ({sum(1 for value in result['refs'].values() if isinstance(value, list))} "
               "byte ranges)")


@main.command()
@click.argument("folder", required=False, type=click.Path(file_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def demo(folder: str | None, as_json: bool) -> None:
    """Write a small sample file of every format, read each back, validate it and report."""
    if folder is None:
        folder = tempfile.mkdtemp(prefix="arrayio-demo-")
    Path(folder).mkdir(parents=True, exist_ok=True)
    results = []
    failed = False
    for name in available_formats():
        module = module_for(name)
        try:
            path = module.demo(Path(folder))
            problems = module.validate(path)
            summary = module.info(path).get("summary", "")
            size = os.path.getsize(path)
        except Exception as error:  # a demo failure is reported per format, not as a crash
            path, problems, summary, size = "-", [f"{type(error).__name__}: {error}"], "", 0
        failed = failed or bool(problems)
        results.append({"format": name, "file": str(path), "bytes": size, "valid": not problems,
                        "summary": summary, "problems": problems})
    if as_json:
        _emit_json({"folder": folder, "formats": results})
    else:
        _table(f"arrayio demo — files in {folder}", ["format", "file", "bytes", "read back + valid", "holds"],
               [(r["format"], os.path.basename(r["file"]), r["bytes"],
                 "yes" if r["valid"] else "NO: " + "; ".join(map(str, r["problems"])), r["summary"]) for r in results])
    sys.exit(1 if failed else 0)


from .map import map_command  # noqa: E402 - a verb in its own module, registered once main exists

main.add_command(map_command)

if __name__ == "__main__":  # pragma: no cover
    main()
