"""``arrayio map FILE``: every byte of a file accounted for, as a table, JSON or a PNG picture."""

from __future__ import annotations

import click

from .._registry import FORMATS
from ..bytemap import map_file
from . import main
from ._common import emit_json, target_of
from ._table import command


@command(main, "map")
@click.argument("file")
@click.option("--png", "png", type=click.Path(dir_okay=False), help="Also draw the map into this PNG file.")
@click.option("--width", type=click.IntRange(400, 8000), default=1200, show_default=True,
              help="Width of the PNG in pixels.")
@click.option("--format", "format_name", type=click.Choice(sorted(FORMATS)),
              help="Read FILE as this format (default: detected from its magic bytes).")
@click.option("--no-validate", is_flag=True, help="Do not run validate (problems are then only where parsing stopped).")
def map_command(file: str, as_json: bool, storage_options: tuple[str, ...], png: str | None, width: int,
                format_name: str | None, no_validate: bool) -> None:
    """Show every byte of FILE as sections in file order: offset, length, kind and label."""
    bytemap = map_file(target_of(file, storage_options), format_name, check=not no_validate)
    if png:
        from ..bytemap import draw_png

        draw_png(bytemap, png, width)
    if as_json:
        result = bytemap.as_dict()
        if png:
            result["png"] = png
        emit_json(result)
    else:
        click.echo(f"{bytemap.name}: {bytemap.format}, {bytemap.size} bytes, {len(bytemap.sections)} sections")
        width_offset = max(len(str(bytemap.size)), 6)
        click.echo(f"{'offset':>{width_offset}}  {'length':>{width_offset}}  {'kind':<11}  label")
        for section in bytemap.sections:
            click.echo(f"{section.offset:>{width_offset}}  {section.length:>{width_offset}}  {section.kind:<11}  "
                       f"{section.label}")
        if bytemap.stop is not None:
            click.echo(f"stopped at byte {bytemap.stop.offset}: {bytemap.stop.problem}")
        for problem in bytemap.problems:
            click.echo(f"problem: {problem}")
        if png:
            click.echo(f"wrote {png}")
    click.get_current_context().exit(1 if bytemap.problems else 0)
