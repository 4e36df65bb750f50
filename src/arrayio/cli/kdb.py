"""``arrayio kdb ...``: ingest robomimic HDF5 / LeRobot folders, export to .npz, show an episode."""

from __future__ import annotations

import errno
import os

import click

from ..kdb import open as open_file
from ..robot import convert, lerobot, tools
from ._common import check_target, emit_json, fail, progress, storage_options_of, target_of
from ._table import command, group_help

COMPRESS_CHOICES = click.Choice(["jpeg", "png", "none"])


def _compress(value: str) -> str | None:
    return None if value == "none" else value


def _exists(source: str, folder: bool = False) -> None:
    """Stop with one line when a local SOURCE is missing, or is a folder where a file is wanted (or the reverse)."""
    if not os.path.exists(source):
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), source)
    if os.path.isdir(source) != folder:
        code = errno.ENOTDIR if folder else errno.EISDIR
        raise OSError(code, os.strerror(code), source)


@click.group(name="kdb", help=group_help("kdb"), context_settings={"help_option_names": ["-h", "--help"]})
def kdb() -> None:
    """The ``arrayio kdb`` group (its help comes from the verb table)."""


@command(kdb, "kdb ingest-hdf5")
@click.argument("source")
@click.argument("target", type=click.Path(dir_okay=False))
@click.option("--compress", type=COMPRESS_CHOICES, default="jpeg", show_default=True,
              help="How to store the camera images.")
@click.option("--quality", type=click.IntRange(1, 100), default=90, show_default=True, help="JPEG quality.")
@click.option("--embodiment", default="", help="Robot name stored in every episode.")
@click.option("--task", default=None, help="Task text (default: env_name from data.attrs['env_args']).")
@click.option("--fps", type=float, default=10.0, show_default=True, help="Control frequency.")
def ingest_hdf5(source: str, target: str, compress: str, quality: int, embodiment: str, task: str | None,
                fps: float, force: bool) -> None:
    """Convert a robomimic-layout HDF5 file SOURCE to TARGET.kdb."""
    _exists(source)
    check_target(target, force, source)
    with progress("demos") as bar:
        count = convert.ingest_hdf5(source, target, compress=_compress(compress), quality=quality,
                                    embodiment=embodiment, task=task, fps=fps, progress=bar.update)
    click.echo(f"{source} -> {target}: {count} episodes")


@command(kdb, "kdb ingest-lerobot")
@click.argument("source")
@click.argument("target", type=click.Path(dir_okay=False))
@click.option("--compress", type=COMPRESS_CHOICES, default="jpeg", show_default=True,
              help="How to store decoded video frames (embedded PNG/JPEG images are kept as they are).")
@click.option("--quality", type=click.IntRange(1, 100), default=90, show_default=True, help="JPEG quality.")
@click.option("--embodiment", default=None, help="Robot name (default: robot_type from meta/info.json).")
@click.option("--fps", type=float, default=None, help="Frame rate (default: fps from meta/info.json).")
@click.option("--tolerance-s", type=float, default=lerobot.TOLERANCE_S, show_default=True,
              help="How far a video frame may be from its row's timestamp.")
def ingest_lerobot(source: str, target: str, compress: str, quality: int, embodiment: str | None,
                   fps: float | None, tolerance_s: float, force: bool) -> None:
    """Convert a LeRobot dataset SOURCE (v2.1 or v3.0, video features included) to TARGET.kdb."""
    _exists(source, folder=True)
    check_target(target, force, source)
    with progress("parquet files") as bar:
        count = lerobot.ingest_lerobot(source, target, compress=_compress(compress), quality=quality,
                                       embodiment=embodiment, fps=fps, tolerance_s=tolerance_s,
                                       progress=bar.update)
    click.echo(f"{source} -> {target}: {count} episodes")


@command(kdb, "kdb export-lerobot")
@click.argument("source")
@click.argument("target", type=click.Path())
@click.option("--images", is_flag=True, help="PNG images inside the parquet instead of MP4 videos.")
@click.option("--codec", type=click.Choice(sorted(lerobot.VIDEO_CODECS)), default="av1", show_default=True,
              help="Video codec (LeRobot's default is AV1).")
@click.option("--crf", type=click.IntRange(0, 63), default=None, help="Encoder quality (default: 30 AV1, 23 H.264).")
@click.option("--robot-type", default=None, help="robot_type in info.json (default: the first embodiment).")
def export_lerobot(source: str, target: str, images: bool, codec: str, crf: int | None,
                   robot_type: str | None, storage_options: tuple[str, ...], force: bool) -> None:
    """Write SOURCE.kdb as a LeRobot v3.0 dataset in the new folder TARGET (--force replaces a LeRobot dataset)."""
    with progress("episodes") as bar:
        count = lerobot.export_lerobot(target_of(source, storage_options), target, video=not images, codec=codec,
                                       crf=crf, robot_type=robot_type, progress=bar.update, force=force)
    click.echo(f"{source} -> {target}: {count} episodes (LeRobot {lerobot.CODEBASE_VERSION})")


@command(kdb, "kdb merge")
@click.argument("sources", nargs=-1, required=True)
@click.option("-o", "--output", "target", required=True, type=click.Path(dir_okay=False), help="The merged file.")
@click.option("--keep-ids", is_flag=True, help="Keep the episode ids (they must be unique across the inputs).")
def merge(sources: tuple[str, ...], target: str, keep_ids: bool, storage_options: tuple[str, ...],
          force: bool) -> None:
    """Concatenate the episodes of SOURCES (files, URLs or globs) into one file, image bytes copied as they are."""
    check_target(target, force, *sources)
    with progress("episodes") as bar:
        count = tools.merge(sources, target, keep_ids=keep_ids, progress=bar.update,
                            storage_options=storage_options_of(storage_options) or None)
    click.echo(f"{len(sources)} input(s) -> {target}: {count} episodes")


@command(kdb, "kdb filter")
@click.argument("source")
@click.argument("target", type=click.Path(dir_okay=False))
@click.option("--task", default=None, help="Keep episodes whose task matches this regular expression.")
@click.option("--embodiment", default=None, help="Keep episodes of this embodiment.")
@click.option("--success", type=click.Choice(sorted(tools.SUCCESS_VALUES)), default=None,
              help="Keep episodes with this outcome.")
@click.option("--min-frames", type=click.IntRange(1), default=None, help="Keep episodes with at least N frames.")
@click.option("--where", default=None,
              help="A boolean expression, e.g. 'fps >= 10 and success and task != \'idle\'' "
                   f"(fields: {', '.join(tools.WHERE_FIELDS)}).")
def filter_(source: str, target: str, task: str | None, embodiment: str | None, success: str | None,
            min_frames: int | None, where: str | None, storage_options: tuple[str, ...], force: bool) -> None:
    """Copy the episodes of SOURCE that meet every condition into TARGET (episode ids kept)."""
    check_target(target, force, source)
    predicate = tools.episode_filter(task=task, embodiment=embodiment, success=success, min_frames=min_frames,
                                     where=where)
    with progress("episodes") as bar:
        kept, total = tools.filter_file(target_of(source, storage_options), target, predicate, progress=bar.update,
                                        keep_empty=False)
    if not kept:
        fail(f"kdb filter: none of the {total} episodes of {source} meets the conditions; {target} was not written")
    click.echo(f"{source} -> {target}: kept {kept} of {total} episodes")


@command(kdb, "kdb stats")
@click.argument("sources", nargs=-1, required=True)
def stats(sources: tuple[str, ...], as_json: bool, storage_options: tuple[str, ...]) -> None:
    """Episodes, frames, tasks with success rates, cameras and bytes per part of SOURCES (files, URLs or globs)."""
    with progress("episodes") as bar:
        facts = tools.stats(sources, progress=bar.update, storage_options=storage_options_of(storage_options) or None)
    if as_json:
        emit_json(facts)
    else:
        for line in tools.stats_lines(facts):
            click.echo(line)


@command(kdb, "kdb export")
@click.argument("source")
@click.argument("target", type=click.Path(dir_okay=False))
@click.option("--no-images", is_flag=True, help="Leave the camera images out.")
def export(source: str, target: str, no_images: bool, storage_options: tuple[str, ...], force: bool) -> None:
    """Write every episode of SOURCE.kdb into TARGET.npz (images decoded, metadata in episodes.json)."""
    check_target(target, force, source)
    with progress("episodes") as bar:
        count = convert.export_npz(target_of(source, storage_options), target, images=not no_images,
                                   progress=bar.update)
    click.echo(f"{source} -> {target}: {count} episodes")


@command(kdb, "kdb show")
@click.argument("file")
@click.argument("episode", type=int)
@click.option("--png", "png", type=click.Path(dir_okay=False), default=None,
              help="Draw state/action curves and a strip of camera frames to this PNG.")
@click.option("--frames", type=click.IntRange(1, 64), default=8, show_default=True,
              help="Camera frames in the strip.")
@click.option("--by-id", is_flag=True, help="EPISODE is an episode id, not a position.")
def show(file: str, episode: int, png: str | None, frames: int, by_id: bool, storage_options: tuple[str, ...],
         force: bool) -> None:
    """Describe episode EPISODE of FILE (and draw it with --png)."""
    if png:
        check_target(png, force, file)
    with open_file(target_of(file, storage_options)) as reader:
        position = reader.position_of(episode) if by_id else episode
        data = reader.read_episode(position)
        meta = data.meta
        click.echo(f"episode {meta.episode_id} (position {position % len(reader)}): {meta.num_frames} frames "
                   f"at {meta.fps:g} fps")
        click.echo(f"  embodiment: {meta.embodiment!r}  task: {meta.task!r}")
        click.echo(f"  success: {meta.success}  total_reward: {meta.total_reward}")
        click.echo(f"  state_dim: {meta.state_dim}  action_dim: {meta.action_dim}  "
                   f"terminal frames: {int((data.terminals != 0).sum())}")
        for record in reader.image_records(position, 0) if meta.num_frames else []:
            kind = "compressed" if record.compressed else "raw"
            click.echo(f"  camera {record.camera!r}: {record.width}x{record.height}x{record.channels} {kind}")
        if png:
            from ..robot.plot import episode_png

            episode_png(reader, position, png, frames=frames)
            click.echo(f"  picture: {png}")
