"""What every verb and group of the ``arrayio`` command shares: the one error wrapper, the one
progress bar, and the text renderings (human sizes, the ``info`` tree, the ``ls`` table).

Exit codes: 0 success, 1 a file problem (invalid file, format or OS error), 2 usage, 130
interrupted, 141 when the reader of our output went away (``| head``), as Unix tools report SIGPIPE.
Every failure is one ``arrayio:`` line on stderr (a JSON error object on stdout under --json);
warnings are ``arrayio: warning:`` lines; a traceback only with ``arrayio --debug``.
"""

from __future__ import annotations

import _thread
import contextlib
import itertools
import json
import os
import sys
import threading
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, NoReturn

import click

from .._edge import check_output, is_local, remote_target
from .._interrupts import forget_dropped_interrupt, note_dropped_interrupt
from .._optional import install_hint
from .._temporary import clear_leftovers
from ..errors import ArrayIOError, FormatError, Problem, describe

PREFIX = "arrayio"
EXIT_PIPE_CLOSED = 128 + 13  # what a shell reports for a tool killed by SIGPIPE
EXIT_INTERRUPTED = 128 + 2

# What a user can cause (a bad file, a missing path, an unknown key, a bad value): one line, exit 1.
# Anything else is a bug: one line too, and its traceback with --debug.
USER_ERRORS = (ArrayIOError, OSError, KeyError, IndexError, ValueError, ImportError)
DEBUG_FLAG = "--debug"


class Failure(Exception):
    """A user-facing failure raised by a verb: one ``arrayio:`` line (or JSON under --json), exit ``code``."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def fail(message: str, code: int = 1) -> NoReturn:
    """Stop the verb with ``message``; exit ``code`` (1 a file problem, 2 usage)."""
    raise Failure(message, code)


def os_error_text(error: OSError) -> str:
    """One line for an OS error: "path: reason" (the reason alone when no path is known)."""
    return f"{getattr(error, 'filename', '') or ''}: {error.strerror or error}".lstrip(": ")


def error_text(error: BaseException) -> str:
    """The one line a user sees for ``error``."""
    if isinstance(error, KeyError) and error.args:  # str() of a KeyError would quote the message
        return str(error.args[0])
    if isinstance(error, ArrayIOError):
        return str(error)
    if isinstance(error, OSError):
        return os_error_text(error)
    if isinstance(error, click.ClickException):
        return error.format_message()
    if isinstance(error, ImportError):  # raised inside another package (fsspec's "Install gcsfs ..."), not by require
        return f"this command needs an optional package: {error}; {install_hint(error.name)}"
    return str(error)


def error_object(error: BaseException) -> dict[str, Any]:
    """``{"error": {"message", "file", "field", "offset"}}``: what ``--json`` prints when a verb fails."""
    file = error.file if isinstance(error, FormatError) else getattr(error, "filename", None)
    if not isinstance(file, (str, bytes, os.PathLike)):  # an OSError's filename may be an fd, or None
        file = None
    return {"error": {"message": error_text(error), "file": None if file is None else os.fsdecode(file),
                      "field": getattr(error, "field", None) if isinstance(error, FormatError) else None,
                      "offset": getattr(error, "offset", None) if isinstance(error, FormatError) else None}}


def problem_object(problem: Problem) -> dict[str, Any]:
    """A Problem as JSON: message, field, offset, expected, found (bytes and other values as text)."""
    def plain(value: Any) -> Any:
        return value if value is None or isinstance(value, (bool, int, float, str)) else describe(value)

    return {"message": problem.message, "field": problem.field, "offset": problem.offset,
            "expected": plain(problem.expected), "found": plain(problem.found)}


# --json on the command line: failures then print a JSON error object on stdout as well.
_JSON_OUTPUT = {"on": False}


def _remember_json(ctx: click.Context, param: click.Parameter, value: bool) -> bool:
    _JSON_OUTPUT["on"] = _JSON_OUTPUT["on"] or value
    return value


def storage_options_of(pairs: Iterable[str]) -> dict[str, Any]:
    """``KEY=VALUE`` pairs as fsspec storage options: dotted keys nest (``client_kwargs.endpoint_url=...``),
    values are JSON when they parse (``anon=true``) and strings otherwise."""
    options: dict[str, Any] = {}
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


def storage_option(function: Callable) -> Callable:
    """The repeatable ``--storage-option KEY=VALUE`` of every verb that reads URLs (as ``storage_options``)."""
    return click.option("--storage-option", "storage_options", multiple=True, metavar="KEY=VALUE",
                        help="An fsspec storage option for URLs (repeatable; dotted keys nest).")(function)


def force_option(function: Callable) -> Callable:
    """The ``-f/--force`` flag of every verb that writes: without it an existing output is refused."""
    return click.option("-f", "--force", "force", is_flag=True,
                        help="Replace an existing output (a folder only when it is one arrayio writes).")(function)


def target_of(file: str, pairs: Iterable[str]) -> Any:
    """The path, or a RemoteFile for a URL (opened once, shared by detection and the reader)."""
    options = storage_options_of(pairs)
    if is_local(file):
        if options:
            raise click.BadParameter(f"{file}: --storage-option applies to URLs only", param_hint="--storage-option")
        return file
    return remote_target(file, options)


def clear_leftovers_of(target: Any) -> None:
    """Remove what killed runs writing the local ``target`` left beside it (once per run, not per write)."""
    if is_local(target):
        clear_leftovers(target)


def check_target(target: Any, force: bool, *sources: Any, folder: bool = False,
                 replaces: Callable[[Any], bool] | None = None) -> None:
    """Refuse ``target`` before any work is done unless it may be written (``--force`` for an existing one;
    never ``.``, a source or a folder holding one); clear what killed runs to it left beside it."""
    clear_leftovers_of(target)
    check_output(target, force=force, sources=[source for source in sources if isinstance(source, str)],
                 folder=folder, replaces=replaces)


def json_option(function: Callable) -> Callable:
    """The ``--json`` flag of every verb that prints data: its value arrives as ``as_json``."""
    return click.option("--json", "as_json", is_flag=True, callback=_remember_json,
                        help="Print JSON instead of text (also on failure: {\"error\": {...}}).")(function)


def emit_json(value: Any) -> None:
    """Print ``value`` as indented JSON on stdout."""
    click.echo(json.dumps(value, indent=2, default=str, ensure_ascii=False))


def _report(error: BaseException) -> None:
    if _JSON_OUTPUT["on"]:
        emit_json(error_object(error))
    click.echo(f"{PREFIX}: {error_text(error)}", err=True)


def _silence_stdout() -> None:
    """Point stdout at /dev/null so that the interpreter's last flush cannot fail on the closed pipe."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    with contextlib.suppress(OSError):
        os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def _show_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                  file: Any = None, line: str | None = None) -> None:
    """A warning as one ``arrayio: warning:`` line on stderr (not Python's two lines with a source line)."""
    click.echo(f"{PREFIX}: warning: {message}", err=True)


def _invoke(command: click.Command, args: list[str]) -> int:
    _JSON_OUTPUT["on"] = False  # a new command line (the tests run many in one process)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("default")
            warnings.showwarning = _show_warning
            with command.make_context(PREFIX, list(args)) as ctx:  # a copy: click's parser consumes its list
                command.invoke(ctx)
        return 0
    except click.exceptions.Exit as done:
        return done.exit_code
    except click.ClickException as error:
        if "--json" in args:  # the option's callback never ran: parsing failed first
            emit_json(error_object(error))
        error.show()
        return error.exit_code
    except (click.Abort, KeyboardInterrupt):
        return EXIT_INTERRUPTED
    except Failure as error:
        _report(error)
        return error.code
    except USER_ERRORS as error:
        if isinstance(error, BrokenPipeError):
            raise
        _report(error)
        return 1
    except Exception as error:  # a bug: one line all the same, the traceback only with --debug
        if DEBUG_FLAG in args:
            raise
        _report(RuntimeError(f"unexpected {type(error).__name__}: {error} (run with {DEBUG_FLAG} for the "
                             "traceback, and please report it)"))
        return 1


INTERRUPT_AGAIN_S = 0.01


@contextlib.contextmanager
def _stopping_on_dropped_interrupts() -> Iterator[None]:
    """While a command runs: a Ctrl-C that lands in a finalizer or weakref callback, where Python prints
    "Exception ignored in ..." and carries on, still stops it (130, nothing published; see _interrupts)."""
    previous = sys.unraisablehook
    timers: list[threading.Timer] = []

    def hook(unraisable: Any) -> None:
        if unraisable.exc_type is None or not issubclass(unraisable.exc_type, KeyboardInterrupt):
            previous(unraisable)
            return
        note_dropped_interrupt()  # no write gets through from here on, whatever runs next
        # Raised again in the main thread once it has left this hook, from a timer's thread: raised from this
        # one, it would land (and be dropped) here. Should it land in another callback, this runs again.
        timer = threading.Timer(INTERRUPT_AGAIN_S, _thread.interrupt_main)
        timer.daemon = True
        timers.append(timer)
        timer.start()

    sys.unraisablehook = hook
    try:
        yield
    finally:
        sys.unraisablehook = previous
        forget_dropped_interrupt()  # the command is over: later writes in this process are not its
        for timer in timers:
            timer.cancel()
            timer.join()  # what it raised is raised here, where run() still turns it into 130


def run(command: click.Command, args: list[str] | None = None) -> NoReturn:
    """Run ``command`` as the console script does: the one error wrapper of every verb and group.

    Usage errors exit 2; user errors print one ``arrayio:`` line (and a JSON error object under
    --json) and exit 1; a closed stdout (``| head``) ends the command quietly with 141.
    """
    try:
        with _stopping_on_dropped_interrupts():
            try:
                code = _invoke(command, sys.argv[1:] if args is None else args)
                sys.stdout.flush()
            except BrokenPipeError:
                _silence_stdout()
                code = EXIT_PIPE_CLOSED
    except KeyboardInterrupt:  # a dropped Ctrl-C raised again after the command had ended
        code = EXIT_INTERRUPTED
    sys.exit(code)


class Bar:
    """Progress callbacks for the library's long operations; draws on stderr only when it is a terminal."""

    def __init__(self, advance: Callable[[int], None] | None = None,
                 update: Callable[[int, int], None] | None = None) -> None:
        self._advance = advance
        self._update = update

    def advance(self, amount: int) -> None:
        """``amount`` more units are done (bloscpack's ``progress(nbytes)`` callbacks)."""
        if self._advance is not None:
            self._advance(amount)

    def update(self, done: int, total: int) -> None:
        """``done`` of ``total`` units are done (kdb's ``progress(done, total)`` callbacks)."""
        if self._update is not None:
            self._update(done, total)


@contextlib.contextmanager
def progress(label: str, total: int | None = None, *, threshold: int = 0, unit: str = "items") -> Iterator[Bar]:
    """A progress bar on stderr for work of ``total`` units (bytes when ``unit="bytes"``).

    Drawn only on a terminal and only when ``total`` is unknown or above ``threshold``;
    otherwise the bar's callbacks do nothing.
    """
    if not sys.stderr.isatty() or (total is not None and total <= threshold):
        yield Bar()
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        MofNCompleteColumn,
        Progress,
        TimeRemainingColumn,
    )

    amount = DownloadColumn() if unit == "bytes" else MofNCompleteColumn()
    with Progress("[progress.description]{task.description}", BarColumn(), amount, TimeRemainingColumn(),
                  console=Console(stderr=True), transient=True) as drawing:
        task = drawing.add_task(label, total=total)
        yield Bar(advance=lambda amount: drawing.advance(task, amount),
                  update=lambda done, total: drawing.update(task, completed=done, total=total))


# ---- text renderings -------------------------------------------------------------------------

_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")
LIST_ITEMS_SHOWN = 8
ROWS_SHOWN = 5
TEXT_SHOWN = 120


def human_size(size: int) -> str:
    """``1536`` -> ``"1.5 KiB"``; below 1 KiB the exact count, ``"812 B"``."""
    value = float(size)
    for unit in _UNITS:
        if abs(value) < 1024 or unit == _UNITS[-1]:
            return f"{size} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def is_size(key: str) -> bool:
    """Whether the fact named ``key`` counts bytes (so that text output shows it human-readable)."""
    return key in ("bytes", "nbytes", "cbytes") or key.endswith(("size", "_bytes", "_length"))


def _scalar(value: Any, key: str = "", exact: bool = False) -> str:
    if value is None or value == "":
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int) and is_size(key) and not exact:
        return human_size(value)
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, str) and len(value) > TEXT_SHOWN + 40:
        return f"{value[:TEXT_SHOWN]}... ({len(value) - TEXT_SHOWN} more characters)"
    if isinstance(value, (list, tuple)):
        return _inline_list(value, key)
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{name}: {_scalar(item, name)}" for name, item in value.items()) + "}"
    return str(value)


def _inline_list(values: Any, key: str = "") -> str:
    if key == "shape" or key.endswith("_shape"):
        return "x".join(map(str, values)) if values else "scalar"
    shown = [_scalar(value) for value in list(values)[:LIST_ITEMS_SHOWN]]
    if len(values) > LIST_ITEMS_SHOWN:
        shown.append(f"... {len(values) - LIST_ITEMS_SHOWN} more")
    return "[" + ", ".join(shown) + "]"


def _is_flat(value: Any) -> bool:
    return not isinstance(value, (Mapping, list, tuple)) or (
        isinstance(value, (list, tuple)) and not any(isinstance(item, (Mapping, list, tuple)) for item in value))


def tree_lines(facts: Mapping[str, Any], indent: int = 0) -> Iterator[str]:
    """``info`` as text: one ``key: value`` line per fact, nested maps indented, long lists cut short."""
    pad = "  " * indent
    for key, value in facts.items():
        if isinstance(value, Mapping) and value:
            yield f"{pad}{key}:"
            yield from tree_lines(value, indent + 1)
        elif isinstance(value, (list, tuple)) and not _is_flat(value):
            yield f"{pad}{key}: ({len(value)})"
            for item in value[:ROWS_SHOWN]:
                if isinstance(item, Mapping) and all(_is_flat(part) for part in item.values()):
                    yield f"{pad}  - " + "  ".join(f"{name}: {_scalar(part, name)}" for name, part in item.items())
                elif isinstance(item, Mapping):
                    lines = list(tree_lines(item, indent + 2))
                    yield f"{pad}  - {lines[0].lstrip()}" if lines else f"{pad}  - {{}}"
                    yield from lines[1:]
                else:
                    yield f"{pad}  - {_scalar(item)}"
            if len(value) > ROWS_SHOWN:
                yield f"{pad}  ... {len(value) - ROWS_SHOWN} more"
        elif isinstance(value, int) and not isinstance(value, bool) and is_size(key) and value >= 1024:
            yield f"{pad}{key}: {human_size(value)} ({value} bytes)"
        else:
            yield f"{pad}{key}: {_scalar(value, key)}"


def _is_number(value: Any) -> bool:
    return value is None or (isinstance(value, (int, float)) and not isinstance(value, bool))


def table_lines(rows: list[Mapping[str, Any]], *, exact: bool = False) -> Iterator[str]:
    """``ls -l`` as text: a header row, then one aligned row per entry, the name last."""
    columns = list(dict.fromkeys(key for row in rows for key in row if key != "name")) + ["name"]
    cells = [[_scalar(row.get(column), column, exact) for column in columns] for row in rows]
    numeric = [column != "name" and all(_is_number(row.get(column)) for row in rows) for column in columns]
    widths = [max([len(column)] + [len(line[index]) for line in cells]) for index, column in enumerate(columns)]
    for line in [[column.upper() for column in columns], *cells]:
        parts = [text.rjust(width) if right else text.ljust(width)
                 for text, width, right in zip(line[:-1], widths, numeric)]
        yield "  ".join([*parts, line[-1]])


WRITE_BATCH = 4096


def write_lines(lines: Iterable[str]) -> None:
    """Write ``lines`` to stdout as they come, a few thousand at a time (one write call per batch)."""
    stream = iter(lines)
    while batch := list(itertools.islice(stream, WRITE_BATCH)):
        sys.stdout.write("\n".join(batch) + "\n")
