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

from . import __version__
from ._registry import FORMATS, available_formats, format_for_extension, module_for, module_of_file
from ._sources import RemoteFile, is_url, resolve
from .errors import ArrayIOError

# Per-format command groups, imported only when their verb is used.
FORMAT_GROUPS = {
    "blpk": ("arrayio.bloscpack.cli", "blpk", "bloscpack tools: compress, decompress, append, info"),
    "kdb": ("arrayio.kdb.cli", "kdb", "kdb (KINO) tools: ingest, export, show"),
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


def _module(path: Any) -> Any:
    try:
        return module_of_file(path)
    except ArrayIOError as error:
        _fail(str(error))
    except OSError as error:
        _fail(_os_error_of(path, error))


def _os_error_of(path: Any, error: OSError) -> str:
    """One line for an OS error while reading ``path`` (remote errors already name their URL)."""
    shown = path.name if isinstance(path, RemoteFile) else str(path)
    text = str(error) if isinstance(error, ArrayIOError) else (error.strerror or str(error))
    return text if shown in text else f"{shown}: {text}"


def storage_options_of(pairs: Iterable[str]) -> dict:
    """``KEY=VALUE`` pairs as fsspec storage options: dotted keys nest (``client_kwargs.endpoint_url=...``),
    values are JSON when they parse (``anon=true``) and strings otherwise."""
    options: dict = {}
    for pair in pairs:
        key, equals, text = pair.partition("=")
        if not equals or not key:
            raise click.BadParameter(f"expected KEY=VALUE, got {pair!r}", param_hint="--storage-option")
        try:
            value = json.loads(text)
        except ValueError:
            value = text
        *parents, leaf = key.split(".")
        node = options
        for parent in parents:
            node = node.setdefault(parent, {})
        node[leaf] = value
    return options


def _target(file: str, pairs: Iterable[str]) -> Any:
    """The path, or a RemoteFile for a URL (opened once and shared by detection and the reader)."""
    options = storage_options_of(pairs)
    if options and not is_url(file):
        _fail(f"{file}: --storage-option applies to URLs only", 2)
    return resolve(file, options) if is_url(file) else file


_STORAGE_OPTION = click.option("--storage-option", "storage_options", multiple=True, metavar="KEY=VALUE",
                               help="An fsspec storage option for URLs (repeatable; dotted keys nest).")


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
@_STORAGE_OPTION
def info(file: str, as_json: bool, storage_options: tuple[str, ...]) -> None:
    """Show what FILE (a path or a URL) holds (the format is detected from its magic bytes)."""
    target = _target(file, storage_options)
    module = _module(target)
    facts = _guard(lambda: module.info(target))
    facts = {"format": module.FORMAT_NAME, **facts}
    if as_json:
        _emit_json(facts)
        return
    for key, value in facts.items():
        if isinstance(value, (dict, list)):
            value = json.dumps(value, default=str, ensure_ascii=False)
        click.echo(f"{key}: {value}")


def _validate_here(file: str, pairs: Iterable[str], alone: bool) -> tuple[str | None, list[str]]:
    """(format, problems) of one file; an unreadable file fails the command when it is the only one."""
    target = _target(file, pairs)
    try:
        module = module_of_file(target)
        return module.FORMAT_NAME, module.validate(target)
    except ArrayIOError as error:
        return None, [str(error)]
    except OSError as error:
        if alone:
            _fail(_os_error_of(target, error))
        return None, [_os_error_of(target, error)]


def _validate_on_dask(files: tuple[str, ...], address: str, pairs: Iterable[str]) -> list[tuple[str | None, list]]:
    from . import dask as arrayio_dask

    options = storage_options_of(pairs) or None
    if address == "local":
        results = arrayio_dask.validate_checked(list(files), storage_options=options)
    else:
        from distributed import Client

        with Client(address) as client:
            results = arrayio_dask.validate_checked(list(files), client, storage_options=options)
    return [results[file] for file in files]


@main.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
@click.option("--dask", "dask_address", is_flag=False, flag_value="local", default=None, metavar="[ADDRESS]",
              help="Validate the files in parallel on a dask.distributed scheduler at ADDRESS "
                   "(a local cluster when no address is given: put --dask last or use --dask=ADDRESS).")
@_STORAGE_OPTION
def validate(files: tuple[str, ...], as_json: bool, dask_address: str | None, storage_options: tuple[str, ...]) -> None:
    """Check FILES (paths or URLs) completely; exit 0 when all are valid, 1 with one line per problem."""
    if dask_address is not None:
        results = _guard(lambda: _validate_on_dask(files, dask_address, storage_options))
    else:
        results = [_validate_here(file, storage_options, len(files) == 1) for file in files]
    reports = [{"file": file, "format": name, "valid": not problems, "problems": problems}
               for file, (name, problems) in zip(files, results)]
    if as_json:
        _emit_json(reports[0] if len(reports) == 1 else reports)
    else:
        for report in reports:
            for problem in report["problems"]:
                click.echo(problem)
            if report["valid"]:
                kind = f" {report['format']}" if report["format"] else ""
                click.echo(f"{report['file']}: valid{kind} file")
    sys.exit(1 if any(not report["valid"] for report in reports) else 0)


@main.command(name="ls")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("-l", "--long", "long_", is_flag=True, help="Show type, shape and size of each entry.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
@_STORAGE_OPTION
def ls_command(file: str, long_: bool, as_json: bool, storage_options: tuple[str, ...]) -> None:
    """List the entries (keys, arrays, episodes) of FILE (a path or a URL)."""
    target = _target(file, storage_options)
    module = _module(target)
    rows = _guard(lambda: module.entries(target))
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
@_STORAGE_OPTION
def cat(file: str, key: str, storage_options: tuple[str, ...]) -> None:
    """Print the values of entry KEY of FILE (a path or a URL), one per line."""
    target = _target(file, storage_options)
    module = _module(target)

    def run() -> None:
        for line in module.cat(target, key):
            click.echo(line)

    _guard(run)


@main.command()
@click.argument("source", type=click.Path(dir_okay=False))
@click.argument("target", type=click.Path(dir_okay=False))
@_STORAGE_OPTION
def convert(source: str, target: str, storage_options: tuple[str, ...]) -> None:
    """Convert SOURCE to TARGET (paths or URLs), the target format chosen by TARGET's extension."""
    if not is_url(source) and not os.path.isfile(source):
        _fail(f"{source}: no such file", 2)
    shown_source, shown_target = source, target
    options = storage_options_of(storage_options)
    source = resolve(source, options) if is_url(source) else source
    target = RemoteFile(target, options) if is_url(target) and options else target
    source_module = _module(source)
    target_name = _guard(lambda: format_for_extension(shown_target))
    target_module = _guard(lambda: module_for(target_name))
    source_model = FORMATS[source_module.FORMAT_NAME].model
    if source_model != "mapping" or FORMATS[target_name].model != "mapping":
        _fail(f"convert supports key -> array formats only; {source_module.FORMAT_NAME} -> {target_name} "
              "is not a lossless conversion", 2)

    def run() -> None:
        with source_module.load(source) as store:
            target_module.dump(store, target)

    _guard(run)
    click.echo(f"{shown_source} ({source_module.FORMAT_NAME}) -> {shown_target} ({target_name})")


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
                 "yes" if r["valid"] else "NO: " + "; ".join(r["problems"]), r["summary"]) for r in results])
    sys.exit(1 if failed else 0)


if __name__ == "__main__":  # pragma: no cover
    main()
