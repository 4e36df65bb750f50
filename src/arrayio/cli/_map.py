"""``arrayio map FILE``: every byte of a file accounted for, as a table, JSON or a PNG picture."""

from __future__ import annotations

import json
import sys

import click

from .._registry import FORMATS
from ..bytemap import map_file
from ..errors import ArrayIOError
from ._common import check_target, force_option


@click.command(name="map")
@click.argument("file")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
@click.option("--png", "png", type=click.Path(dir_okay=False), help="Also draw the map into this PNG file.")
@click.option("--width", type=click.IntRange(400, 8000), default=1200, show_default=True,
              help="Width of the PNG in pixels.")
@click.option("--format", "format_name", type=click.Choice(sorted(FORMATS)),
              help="Read FILE as this format (default: detected from its magic bytes).")
@click.option("--no-validate", is_flag=True, help="Do not run validate (problems are then only where parsing stopped).")
@force_option
def map_command(file: str, as_json: bool, png: str | None, width: int, format_name: str | None,
                no_validate: bool, force: bool) -> None:
    """Show every byte of FILE as sections in file order: offset, length, kind and label.

    The sections tile the file exactly; bytes no parsed structure explains are
    `unaccounted`. On a corrupt file the map shows what parses and where
    parsing stopped. Exit 0 when the file is valid, 1 when it has problems.
    """
    if png:
        check_target(png, force, file)
    try:
        bytemap = map_file(file, format_name, check=not no_validate)
    except ArrayIOError as error:
        click.echo(f"arrayio: {error}", err=True)
        sys.exit(1)
    except OSError as error:
        click.echo(f"arrayio: {getattr(error, 'filename', None) or file}: {error.strerror or error}", err=True)
        sys.exit(1)
    if png:
        from ..bytemap import draw_png

        try:
            draw_png(bytemap, png, width)
        except OSError as error:
            click.echo(f"arrayio: {png}: {error.strerror or error}", err=True)
            sys.exit(1)
    if as_json:
        result = bytemap.as_dict()
        if png:
            result["png"] = png
        click.echo(json.dumps(result, indent=2, ensure_ascii=False))
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
    sys.exit(1 if bytemap.problems else 0)
