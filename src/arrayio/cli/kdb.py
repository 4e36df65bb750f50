"""``arrayio kdb ...``: ingest robomimic HDF5 / LeRobot folders, export to .npz, show an episode."""

from __future__ import annotations

import click

from ..kdb import convert
from ..kdb import open as open_file
from ._common import progress

COMPRESS_CHOICES = click.Choice(["jpeg", "png", "none"])


def _compress(value: str) -> str | None:
    return None if value == "none" else value


@click.group(name="kdb", context_settings={"help_option_names": ["-h", "--help"]})
def kdb() -> None:
    """kdb (KINO) tools: ingest robomimic HDF5 or LeRobot folders, export to .npz, show an episode."""


@kdb.command("ingest-hdf5")
@click.argument("source", type=click.Path(dir_okay=False, exists=True))
@click.argument("target", type=click.Path(dir_okay=False))
@click.option("--compress", type=COMPRESS_CHOICES, default="jpeg", show_default=True,
              help="How to store the camera images.")
@click.option("--quality", type=click.IntRange(1, 100), default=90, show_default=True, help="JPEG quality.")
@click.option("--embodiment", default="", help="Robot name stored in every episode.")
@click.option("--task", default=None, help="Task text (default: env_name from data.attrs['env_args']).")
@click.option("--fps", type=float, default=10.0, show_default=True, help="Control frequency.")
def ingest_hdf5(source: str, target: str, compress: str, quality: int, embodiment: str, task: str | None,
                fps: float) -> None:
    """Convert a robomimic-layout HDF5 file SOURCE to TARGET.kdb."""
    with progress("demos") as bar:
        count = convert.ingest_hdf5(source, target, compress=_compress(compress), quality=quality,
                                    embodiment=embodiment, task=task, fps=fps, progress=bar.update)
    click.echo(f"{source} -> {target}: {count} episodes")


@kdb.command("ingest-lerobot")
@click.argument("source", type=click.Path(file_okay=False, exists=True))
@click.argument("target", type=click.Path(dir_okay=False))
@click.option("--compress", type=COMPRESS_CHOICES, default="none", show_default=True,
              help="Re-encode raw images (encoded parquet images are always kept as they are).")
@click.option("--quality", type=click.IntRange(1, 100), default=90, show_default=True, help="JPEG quality.")
@click.option("--embodiment", default=None, help="Robot name (default: robot_type from meta/info.json).")
@click.option("--fps", type=float, default=None, help="Frame rate (default: fps from meta/info.json).")
def ingest_lerobot(source: str, target: str, compress: str, quality: int, embodiment: str | None,
                   fps: float | None) -> None:
    """Convert a LeRobot-style folder SOURCE (meta/ + data/**/*.parquet) to TARGET.kdb."""
    with progress("parquet files") as bar:
        count = convert.ingest_lerobot(source, target, compress=_compress(compress), quality=quality,
                                       embodiment=embodiment, fps=fps, progress=bar.update)
    click.echo(f"{source} -> {target}: {count} episodes")


@kdb.command("export")
@click.argument("source", type=click.Path(dir_okay=False, exists=True))
@click.argument("target", type=click.Path(dir_okay=False))
@click.option("--no-images", is_flag=True, help="Leave the camera images out.")
def export(source: str, target: str, no_images: bool) -> None:
    """Write every episode of SOURCE.kdb into TARGET.npz (images decoded, metadata in episodes.json)."""
    with progress("episodes") as bar:
        count = convert.export_npz(source, target, images=not no_images, progress=bar.update)
    click.echo(f"{source} -> {target}: {count} episodes")


@kdb.command("show")
@click.argument("file", type=click.Path(dir_okay=False, exists=True))
@click.argument("episode", type=int)
@click.option("--png", "png", type=click.Path(dir_okay=False), default=None,
              help="Draw state/action curves and a strip of camera frames to this PNG.")
@click.option("--frames", type=click.IntRange(1, 64), default=8, show_default=True,
              help="Camera frames in the strip.")
@click.option("--by-id", is_flag=True, help="EPISODE is an episode id, not a position.")
def show(file: str, episode: int, png: str | None, frames: int, by_id: bool) -> None:
    """Describe episode EPISODE of FILE (and draw it with --png)."""
    with open_file(file) as reader:
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
            from ..kdb.plot import episode_png

            episode_png(reader, position, png, frames=frames)
            click.echo(f"  picture: {png}")
