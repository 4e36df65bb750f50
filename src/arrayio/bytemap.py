"""Byte maps: every byte of a file accounted for, as sections in file order.

Each format package has a ``_map.py`` whose ``sections(source)`` lists what
its readers know about the bytes (headers, tables, keys, arrays, chunks,
episode parts, padding...). This module holds what every format shares: the
:class:`Section` record, :func:`tile` (sort, settle overlaps, fill holes with
``unaccounted`` so the sections cover the file exactly), :func:`map_file`
(detect, parse, validate) and :func:`draw_png` (a to-scale picture, matplotlib
imported only there).

A format's ``sections`` never raises for bad bytes: it maps what it can parse
and, when parsing stops, ends its list with :func:`stopped`, a zero-length
marker carrying the error, so the picture shows where and why.
"""

from __future__ import annotations

import importlib
import math
import os
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ._binary import Source
from ._edge import open_output, open_source
from ._optional import require
from ._registry import FORMATS, VIEWS, detect, view_of
from .errors import ArrayIOError, FormatError, Problem, naming_file

__all__ = [
    "KINDS",
    "STOP",
    "UNACCOUNTED",
    "ByteMap",
    "Collector",
    "Section",
    "draw_png",
    "map_file",
    "map_source",
    "png_size",
    "problem_offsets",
    "stopped",
    "tile",
    "tiling_errors",
]

STOP = "stop"
UNACCOUNTED = "unaccounted"

# Section kind -> colour. Every format uses these names for the same roles.
KINDS: dict[str, str] = {
    "header": "#4c72b0",        # fixed headers, preambles, header slots
    "table": "#8172b2",         # descriptor / index / offsets tables
    "keys": "#64b5cd",          # key names
    "array": "#55a868",         # array data, matrix payloads
    "chunk": "#55a868",         # compressed chunks
    "steps": "#55a868",         # kdb state/action rows
    "image": "#dd8452",         # image data
    "record": "#ccb974",        # per-frame / per-image record headers
    "metadata": "#937860",      # metadata blocks and their headers
    "checksum": "#da8bc3",      # digests
    "reserved": "#bbbbbb",      # reserved header bytes, spare table slots kept for appending
    "padding": "#dddddd",       # alignment padding
    "gap": "#eeeeee",           # bytes the format leaves free (superseded blocks' surroundings)
    "stale": "#a6a6a6",         # superseded data still in the file (old metadata blocks)
    "trailing": "#999999",      # bytes after the end of the data
    UNACCOUNTED: "#222222",     # bytes no parsed structure explains
}
_PROBLEM_COLOUR = "#d62728"
_FILLER_KINDS = frozenset({"padding", "gap", "reserved", "trailing", "stale"})
_DARK_KINDS = frozenset({"header", "table", "array", "chunk", "steps", "metadata", UNACCOUNTED})


@dataclass(frozen=True, slots=True)
class Section:
    """``length`` bytes at ``offset`` playing one role (``kind``), with a human ``label``.

    A zero-length section of kind ``stop`` marks where parsing stopped; its
    ``problem`` says why.
    """

    offset: int
    length: int
    kind: str
    label: str = ""
    problem: Problem | None = None

    @property
    def end(self) -> int:
        """The first byte after the section."""
        return self.offset + self.length

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly fields."""
        return {"offset": self.offset, "length": self.length, "end": self.end, "kind": self.kind,
                "label": self.label}


def stopped(error: FormatError, at: int) -> Section:
    """The marker a format's ``sections`` ends with when ``error`` stopped it at byte ``at``."""
    return Section(at, 0, STOP, f"parsing stopped: {error}", Problem.from_error(error))


def tile(sections: Iterable[Section], size: int) -> tuple[list[Section], Section | None]:
    """Sections covering ``[0, size)`` exactly, in file order, and the stop marker (if any).

    Sections are clipped to the file; where two overlap (a corrupt table can
    point anywhere) the one starting first, or the longer at the same offset,
    keeps the bytes and the other keeps only what is left; holes become
    ``unaccounted`` sections.
    """
    stop = None
    real = []
    for section in sections:
        if section.kind == STOP:
            stop = section if stop is None else stop
        elif section.offset >= 0 and section.length > 0 and section.offset + section.length <= size:
            real.append(section)
        elif section.offset < size and section.offset + section.length > 0:
            start, end = max(0, section.offset), min(size, section.offset + section.length)
            real.append(Section(start, end - start, section.kind, section.label, section.problem))
    real.sort(key=lambda section: (section.offset, -section.length))
    tiled: list[Section] = []
    cursor = 0
    for section in real:
        end = section.offset + section.length
        if end <= cursor:
            continue
        if section.offset > cursor:
            tiled.append(_hole(cursor, section.offset, stop))
            tiled.append(section)
        elif section.offset == cursor:
            tiled.append(section)
        else:
            tiled.append(Section(cursor, end - cursor, section.kind, section.label, section.problem))
        cursor = end
    if cursor < size:
        tiled.append(_hole(cursor, size, stop))
    return tiled, stop


def _hole(start: int, end: int, stop: Section | None) -> Section:
    if stop is not None and start >= stop.offset:
        return Section(start, end - start, UNACCOUNTED, f"not parsed (parsing stopped at byte {stop.offset})")
    return Section(start, end - start, UNACCOUNTED, "no structure explains these bytes")


def tiling_errors(sections: list[Section], size: int) -> list[str]:
    """Why ``sections`` do not tile ``[0, size)`` exactly (empty: they do)."""
    errors = []
    cursor = 0
    for index, section in enumerate(sections):
        if section.length <= 0:
            errors.append(f"section {index} ({section.kind}) is empty")
        if section.offset != cursor:
            errors.append(f"section {index} ({section.kind}) starts at {section.offset}, expected {cursor}")
        cursor = section.end
    if cursor != size:
        errors.append(f"the sections end at {cursor}, the file at {size}")
    return errors


@dataclass
class ByteMap:
    """A file's sections (tiling it exactly), where parsing stopped, and validate's problems."""

    name: str
    format: str
    size: int
    sections: list[Section]
    stop: Section | None = None
    problems: list[Any] = field(default_factory=list)

    def totals(self) -> dict[str, int]:
        """Bytes per kind, in order of first appearance."""
        totals: dict[str, int] = {}
        for section in self.sections:
            totals[section.kind] = totals.get(section.kind, 0) + section.length
        return totals

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly form (what ``arrayio map --json`` prints)."""
        return {
            "file": self.name,
            "format": self.format,
            "size": self.size,
            "sections": [section.as_dict() for section in self.sections],
            "stopped": None if self.stop is None else {"offset": self.stop.offset, "message": self.stop.label},
            "problems": [{"message": str(problem), "offset": getattr(problem, "offset", None)}
                         for problem in self.problems],
            "totals": self.totals(),
        }


def map_source(source: Source, format_name: str, name: str = "<data>",
               problems: Iterable[Any] = ()) -> ByteMap:
    """Map an open source of format ``format_name``; ``problems`` (from validate) are kept for drawing."""
    module = importlib.import_module(f"{(FORMATS.get(format_name) or VIEWS[format_name]).module}._map")
    sections, stop = tile(module.sections(source), source.size)
    found = list(problems)
    if stop is not None and stop.problem is not None:
        # validate often reports the same error as text; the Problem carries its offset.
        same = [index for index, problem in enumerate(found) if str(problem) == str(stop.problem)]
        for index in same:
            found[index] = stop.problem
        if not same:
            found.append(stop.problem)
    return ByteMap(name, format_name, source.size, sections, stop, found)


def map_file(target: Any, format_name: str | None = None, *, check: bool = True) -> ByteMap:
    """Detect ``target``'s format (or use ``format_name``), map it, and run ``validate`` when ``check``."""
    name = os.fsdecode(target) if isinstance(target, (str, bytes, os.PathLike)) else getattr(target, "name", "<data>")
    if format_name is None:
        format_name = detect(target) or view_of(target)  # a view's own container (a .tsz zip) has no format
        if format_name is None:
            raise FormatError("not a file of any known format (name the format to map it anyway)").naming(name)
    package = (FORMATS.get(format_name) or VIEWS[format_name]).module
    errors = importlib.import_module(f"{package}._errors").ERRORS
    problems: list[Any] = []
    if check:
        start = target.tell() if hasattr(target, "seek") else None
        try:
            problems = list(importlib.import_module(package).validate(target))
        except (ArrayIOError, OSError, TypeError, ValueError) as error:
            problems = [str(error)]
        if start is not None:
            target.seek(start)  # validate read the stream; the map reads the same bytes again
    with open_source(target, errors) as source, naming_file(source.name):
        return map_source(source, format_name, name, problems)


def problem_offsets(problems: Iterable[Any]) -> list[tuple[int, str]]:
    """(byte offset, message) of each problem that carries an ``.offset`` (strings carry none)."""
    return [(problem.offset, str(problem)) for problem in problems
            if isinstance(getattr(problem, "offset", None), int)]


# --------------------------------------------------------------------------- the picture

_DPI = 100
_TITLE_PX = 44
_ROW_PX = 96          # bar + offset labels
_BAR_PX = 46
_LEGEND_ROW_PX = 26
_LEGEND_PER_ROW = 6
_MARGIN_PX = 16
_MIN_SECTION_PX = 3.0
_SECTIONS_PER_ROW = 24
_MAX_ROWS = 12


def _rows_for(bytemap: ByteMap) -> int:
    return max(1, min(_MAX_ROWS, math.ceil(len(bytemap.sections) / _SECTIONS_PER_ROW)))


def _legend_kinds(bytemap: ByteMap) -> list[str]:
    kinds = list(bytemap.totals())
    if problem_offsets(bytemap.problems):
        kinds.append("problem")
    return kinds


def png_size(bytemap: ByteMap, width: int = 1200) -> tuple[int, int]:
    """(width, height) in pixels of the PNG :func:`draw_png` writes for ``bytemap``."""
    legend_rows = math.ceil(len(_legend_kinds(bytemap)) / _LEGEND_PER_ROW)
    return width, _TITLE_PX + _rows_for(bytemap) * _ROW_PX + legend_rows * _LEGEND_ROW_PX + _MARGIN_PX


def _short(value: int) -> str:
    for unit, factor in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if value >= 10 * factor:
            return f"{value / factor:.4g}{unit}"
    return str(value)


def draw_png(bytemap: ByteMap, out: Any, width: int = 1200) -> tuple[int, int]:
    """Draw ``bytemap`` as a to-scale strip (wrapped into rows for files with many sections); returns (w, h).

    Each row covers an equal share of the file; every section is at least a
    couple of pixels wide so that a 64-byte header still shows next to a
    gigabyte of data. Section starts are labelled with their offsets where
    there is room, problems are red lines at their byte offsets, and where
    parsing stopped is a dashed red line.
    """
    require("matplotlib", "arrayio map --png")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch, Rectangle

    width_px, height_px = png_size(bytemap, width)
    figure = Figure(figsize=(width_px / _DPI, height_px / _DPI), dpi=_DPI)
    FigureCanvasAgg(figure)
    axes = figure.add_axes((0, 0, 1, 1))
    axes.set_xlim(0, width_px)
    axes.set_ylim(height_px, 0)
    axes.axis("off")
    rows = _rows_for(bytemap)
    left, right = _MARGIN_PX, width_px - _MARGIN_PX
    span = right - left
    per_row = max(1, math.ceil(bytemap.size / rows))
    axes.text(left, _TITLE_PX / 2, f"{bytemap.name}: {bytemap.format}, {bytemap.size:,} bytes, "
              f"{len(bytemap.sections)} sections" + (f", {rows} rows of {_short(per_row)} bytes" if rows > 1 else ""),
              va="center", ha="left", fontsize=11, fontweight="bold")

    def x_of(offset: int, row: int) -> float:
        return left + (offset - row * per_row) / per_row * span

    def y_of(row: int) -> float:
        return _TITLE_PX + row * _ROW_PX

    starts = [section.offset for section in bytemap.sections]
    for row in range(rows):
        low, high = row * per_row, min(bytemap.size, (row + 1) * per_row)
        top = y_of(row)
        axes.add_patch(Rectangle((left, top), x_of(high, row) - left, _BAR_PX, facecolor="white",
                                 edgecolor="#444444", linewidth=0.8))
        last_label = -math.inf
        # Sections widened to the minimum are drawn last, so neighbours never hide them.
        spans: dict[tuple[bool, bool, str], list[tuple[float, float]]] = {}
        separators: list[float] = []
        drawn: set[tuple[int, str]] = set()
        for section in bytemap.sections[max(0, bisect_right(starts, low) - 1):bisect_left(starts, high)]:
            start, end = max(section.offset, low), min(section.end, high)
            if end <= start:
                continue
            x0, x1 = x_of(start, row), x_of(end, row)
            widened = x1 - x0 < _MIN_SECTION_PX
            x1 = max(x1, x0 + _MIN_SECTION_PX)
            pixel = (int(x0), section.kind)
            if x1 - x0 <= _MIN_SECTION_PX:
                if pixel in drawn:
                    continue  # tiny sections of one kind starting in one pixel column: one bar shows them all
                drawn.add(pixel)
            layer = (widened, section.kind not in _FILLER_KINDS, section.kind)
            spans.setdefault(layer, []).append((x0, x1 - x0))
            if x1 - x0 >= 4:
                separators.append(x0)
            if start == section.offset and x0 - last_label >= 46:
                axes.plot([x0, x0], [top + _BAR_PX, top + _BAR_PX + 4], color="#444444", linewidth=0.8)
                axes.text(x0, top + _BAR_PX + 6, _short(section.offset), rotation=45, ha="left", va="top",
                          fontsize=7, color="#333333")
                last_label = x0
            text = section.label or section.kind
            if x1 - x0 >= 7 * len(text) * 0.75:
                axes.text((x0 + x1) / 2, top + _BAR_PX / 2, text, ha="center", va="center", fontsize=7,
                          color="white" if section.kind in _DARK_KINDS else "black", clip_on=True)
            elif x1 - x0 >= 7 * len(section.kind) * 0.75:
                axes.text((x0 + x1) / 2, top + _BAR_PX / 2, section.kind, ha="center", va="center", fontsize=7,
                          color="white" if section.kind in _DARK_KINDS else "black", clip_on=True)
        for layer in sorted(spans):
            axes.broken_barh(spans[layer], (top, _BAR_PX), facecolors=KINDS.get(layer[2], "#777777"),
                             edgecolor="none")
        if separators:
            axes.vlines(separators, top, top + _BAR_PX, colors="white", linewidth=0.6)
        if row == rows - 1 and x_of(high, row) - last_label >= 46:
            axes.text(x_of(high, row), top + _BAR_PX + 6, _short(high), ha="right", va="top", fontsize=7,
                      color="#333333")
        marks: list[tuple[int, bool]] = [(offset, False) for offset, _ in problem_offsets(bytemap.problems)]
        if bytemap.stop is not None:
            marks.append((bytemap.stop.offset, True))
        for offset, dashed in marks:
            if low <= offset < high or (offset == bytemap.size and row == rows - 1):
                x = x_of(offset, row)
                axes.plot([x, x], [top - 6, top + _BAR_PX + 6], color=_PROBLEM_COLOUR, linewidth=2,
                          linestyle="--" if dashed else "-")
                axes.plot([x], [top - 6], marker="v", color=_PROBLEM_COLOUR, markersize=7)

    legend = [Patch(facecolor=KINDS.get(kind, _PROBLEM_COLOUR), edgecolor="#444444", label=kind)
              for kind in _legend_kinds(bytemap)]
    figure.legend(handles=legend, loc="lower left", ncol=_LEGEND_PER_ROW, frameon=False, fontsize=8,
                  bbox_to_anchor=(left / width_px, 2 / height_px))
    with open_output(out) as stream:  # a path is written atomically; a link there is replaced, not followed
        figure.savefig(stream, dpi=_DPI, format="png")
    return width_px, height_px


class Collector:
    """What a format's ``sections`` fills: sections as parsing finds them, then a stop marker on error."""

    def __init__(self, source: Source) -> None:
        self.source = source
        self.sections: list[Section] = []
        self.parsed_to = 0

    def add(self, offset: int, length: int, kind: str, label: str = "") -> None:
        """Record ``length`` bytes at ``offset`` (empty sections are dropped)."""
        if length > 0:
            self.sections.append(Section(int(offset), int(length), kind, label))
            self.parsed_to = max(self.parsed_to, int(offset) + int(length))

    def run(self, parse: Callable[[Collector], None]) -> list[Section]:
        """Run ``parse(self)``; a FormatError ends the list with a stop marker at the error's offset."""
        try:
            parse(self)
        except FormatError as error:
            at = error.offset if isinstance(error.offset, int) and 0 <= error.offset <= self.source.size \
                else min(self.parsed_to, self.source.size)
            self.sections.append(stopped(error, at))
        return self.sections

    def packed(self, start: int, extents: Iterable[tuple[int, int, str]], kind: str) -> int:
        """Add (offset, length, label) extents laid out in order from ``start``, with the bytes
        between them as ``padding``; returns where the last one ends."""
        cursor = start
        for offset, length, label in extents:
            if offset > cursor:
                self.add(cursor, offset - cursor, "padding", "alignment padding")
            self.add(offset, length, kind, label)
            cursor = max(cursor, offset + length)
        return cursor
