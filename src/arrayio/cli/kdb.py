"""``arrayio kdb ...``: ingest robomimic HDF5 / LeRobot folders, export to .npz, show an episode."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import click

from ..errors import ArrayIOError
from ..kdb import convert
from ..kdb import open as open_file

COMPRESS_CHOICES = click.Choice(["jpeg", "png", "none"])


def _run(action: Callable[[], Any]) -> Any:
    """Run ``action``; a format, value or OS error becomes one line on stderr and exit 1."""
    try:
        return action()
    except (ArrayIOError, ValueError, OSError, KeyError, IndexError) as error:
        message = error.args[0] if isinstance(error, KeyError) and error.args else error
        click.echo(f"arrayio kdb: {message}", err=True)
        sys.exit(1)
    except ImportError as error:
        click.echo(f"arrayio kdb: this command needs an optional dependency: {error} "
                   "(pip install 'arrayio[all]')", err=True)
        sys.exit(1)


class _Bar:
    """A rich progress bar fed by the converters' (done, total) callback."""

    def __init__(self, label: str) -> None:
        from rich.progress import Progress

        self._progress = Progress(transient=False, console=None)
        self._label = label
        self._task = None

    def __enter__(self) -> _Bar:
        self._progress.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._progress.__exit__(*exc)

    def __call__(self, done: int, total: int) -> None:
        if self._task is None:
            self._task = self._progress.add_task(self._label, total=total)
        self._progress.update(self._task, completed=done)


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
    with _Bar("demos") as bar:
        count = _run(lambda: convert.ingest_hdf5(source, target, compress=_compress(compress), quality=quality,
                                                 embodiment=embodiment, task=task, fps=fps, progress=bar))
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
    with _Bar("parquet files") as bar:
        count = _run(lambda: convert.ingest_lerobot(source, target, compress=_compress(compress), quality=quality,
                                                    embodiment=embodiment, fps=fps, progress=bar))
    click.echo(f"{source} -> {target}: {count} episodes")


@kdb.command("export")
@click.argument("source", type=click.Path(dir_okay=False, exists=True))
@click.argument("target", type=click.Path(dir_okay=False))
@click.option("--no-images", is_flag=True, help="Leave the camera images out.")
def export(source: str, target: str, no_images: bool) -> None:
    """Write every episode of SOURCE.kdb into TARGET.npz (images decoded, metadata in episodes.json)."""
    with _Bar("episodes") as bar:
        count = _run(lambda: convert.export_npz(source, target, images=not no_images, progress=bar))
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

    def run() -> None:
        """Print the episode's facts and draw it when asked."""
        with open_file(file) as kdb:
            position = kdb.position_of(episode) if by_id else episode
            data = kdb.read_episode(position)
            meta = data.meta
            click.echo(f"episode {meta.episode_id} (position {position % len(kdb)}): {meta.num_frames} frames "
                       f"at {meta.fps:g} fps")
            click.echo(f"  embodiment: {meta.embodiment!r}  task: {meta.task!r}")
            click.echo(f"  success: {meta.success}  total_reward: {meta.total_reward}")
            click.echo(f"  state_dim: {meta.state_dim}  action_dim: {meta.action_dim}  "
                       f"terminal frames: {int((data.terminals != 0).sum())}")
            for record in kdb.image_records(position, 0) if meta.num_frames else []:
                kind = "compressed" if record.compressed else "raw"
                click.echo(f"  camera {record.camera!r}: {record.width}x{record.height}x{record.channels} {kind}")
            if png:
                from ..kdb.plot import episode_png

                episode_png(kdb, position, png, frames=frames)
                click.echo(f"  picture: {png}")

    _run(run)
