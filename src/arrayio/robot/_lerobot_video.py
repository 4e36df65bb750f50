"""The MP4 videos of a LeRobot dataset: frames read by presentation time (ingest) and episodes written back
to back (export), with PyAV."""

from __future__ import annotations

import os
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from .. import limits
from .._optional import require
from ..errors import FormatError

VIDEO_CODECS = {"av1": "libsvtav1", "h264": "libx264"}
# Frames per group of pictures (a key frame each): see VideoWriter.
GOP_SIZES = {"av1": 1, "h264": 2}


def _time(seconds: float) -> str:
    """A time in a message: to the microsecond, or in exponent form past a billion seconds."""
    return f"{seconds:.6f}" if abs(seconds) < 1e9 else f"{seconds:g}"


class Videos:
    """One open decoder per video feature, moving forward through its MP4 (seeking back only when asked)."""

    def __init__(self, tolerance_s: float) -> None:
        self.tolerance_s = tolerance_s
        self._readers: dict[str, VideoReader] = {}

    def frame_at(self, key: str, path: Path, seconds: float) -> np.ndarray:
        """RGB pixels of the frame of ``key`` shown at ``seconds`` in ``path``."""
        reader = self._readers.get(key)
        if reader is None or reader.path != path:
            if reader is not None:
                reader.close()
            reader = self._readers[key] = VideoReader(path, self.tolerance_s)
        return reader.frame_at(seconds)

    def close(self) -> None:
        """Close every open container."""
        for reader in self._readers.values():
            reader.close()
        self._readers.clear()


class VideoReader:
    """Frames of one MP4 by presentation time, decoded in order with PyAV (AV1 via libdav1d, H.264...)."""

    def __init__(self, path: Path, tolerance_s: float) -> None:
        av = require("av", "LeRobot videos")

        self.path = path
        self.tolerance_s = tolerance_s
        try:
            self._container = av.open(os.fspath(path))
        except (FileNotFoundError, av.error.FFmpegError) as error:
            raise _video_error(path, f"cannot open the video: {error}") from None
        if not self._container.streams.video:
            self._container.close()
            raise _video_error(path, "no video stream")
        self._stream = self._container.streams.video[0]
        self._check_size(self._stream.codec_context.width, self._stream.codec_context.height)
        self._stream.thread_type = "AUTO"
        self._restart()

    def _check_size(self, width: int, height: int) -> None:
        """Refuse frames over the image_bytes limit before the decoder allocates them (an 8192x8192 AV1
        video of 200 KB cost 1.2 GB a frame)."""
        try:
            limits.check("image_bytes", width * height * 3, f"a {width}x{height} frame of {self.path}",
                         format="LeRobot")
        except limits.LimitError:
            self._container.close()
            raise

    def _restart(self) -> None:
        self._frames = self._container.decode(self._stream)
        self._current: tuple[float, Any] | None = None
        self._pixels: np.ndarray | None = None

    def frame_at(self, seconds: float) -> np.ndarray:
        """The pixels of the frame within ``tolerance_s`` of ``seconds``; ValueError when there is none."""
        av = require("av", "LeRobot videos")

        tolerance = self.tolerance_s
        if self._current is not None and seconds < self._current[0] - tolerance:
            assert self._stream.time_base is not None  # set on every opened stream
            self._container.seek(max(0, int(seconds / self._stream.time_base)), stream=self._stream, backward=True)
            self._restart()
        while True:
            if self._current is not None:
                found = self._current[0]
                if abs(found - seconds) <= tolerance:
                    if self._pixels is None:
                        self._pixels = self._current[1].to_ndarray(format="rgb24")
                    return self._pixels
                if found > seconds + tolerance:
                    raise _video_error(self.path, f"no frame at {_time(seconds)} s (within {tolerance:g} s); the next "
                                                  f"frame is at {_time(found)} s")
            try:
                frame = next(self._frames, None)
            except av.error.FFmpegError as error:
                raise _video_error(self.path, f"cannot decode the video: {error}") from None
            if frame is None:
                raise _video_error(self.path, f"the video ends before {_time(seconds)} s")
            if (frame.width, frame.height) != (self._stream.codec_context.width, self._stream.codec_context.height):
                self._check_size(frame.width, frame.height)  # a stream may change size midway
            if frame.time is None:
                raise _video_error(self.path, "a frame without a presentation time")
            self._current = (float(frame.time), frame)
            self._pixels = None

    def close(self) -> None:
        """Close the container."""
        self._container.close()


# -- export -----------------------------------------------------------------------------------------



class VideoWriter:
    """One MP4 per camera holding every episode back to back: frame n of the file at n / fps."""

    def __init__(self, path: Path, fps: float, shape: tuple, codec: str, crf: int | None) -> None:
        av = require("av", "LeRobot videos")
        # SVT-AV1 prints a 20-line Svt[info] banner per encoder to stderr; its level comes only from the
        # SVT_LOG variable (PyAV's logging never sees it): errors only (1), unless the user chose a level.
        os.environ.setdefault("SVT_LOG", "1")
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.rate = Fraction(fps).limit_denominator(1001)
        self._container = av.open(os.fspath(path), "w", options={"movflags": "faststart"})
        default_crf = 30 if codec == "av1" else 23
        options = {"crf": str(default_crf if crf is None else crf)}
        if codec == "av1":
            options["preset"] = "12"
        stream = self._container.add_stream(VIDEO_CODECS[codec], rate=self.rate, options=options)
        assert isinstance(stream, av.VideoStream)  # a video codec gives a video stream
        self._stream = stream
        self._stream.height, self._stream.width = int(shape[0]), int(shape[1])
        self._stream.pix_fmt = "yuv420p"
        # SVT-AV1 codes the inter frame of a 2-frame group at a high QP offset and, when motion search
        # fails, as an all-skip copy of the key frame before it: that frame then shows the previous
        # timestamp's picture. Key frames only keep every frame at its own timestamp (and random
        # access to any frame a single decode).
        self._stream.codec_context.gop_size = GOP_SIZES[codec]
        self._frames = 0

    def add_episode(self, images: Any, camera: str, frames: int) -> int:
        """Append an episode's frames of ``camera``; returns the file frame number of its first frame."""
        av = require("av", "LeRobot videos")
        start = self._frames
        for frame in range(frames):
            pixels = images.frame(frame, [camera])[camera]
            if pixels.shape[2] != 3:
                pixels = np.repeat(pixels[:, :, :1], 3, axis=2) if pixels.shape[2] == 1 else pixels[:, :, :3]
            picture = av.VideoFrame.from_ndarray(np.ascontiguousarray(pixels), format="rgb24")
            picture.pts = self._frames
            picture.time_base = 1 / self.rate
            self._container.mux(self._stream.encode(picture))
            self._frames += 1
        return start

    def close(self) -> None:
        """Flush the encoder and finish the file."""
        try:
            self._container.mux(self._stream.encode(None))
        finally:
            self._container.close()


def _video_error(path: Any, what: str) -> FormatError:
    """A FormatError about one video of a LeRobot dataset, naming the file as every FormatError does."""
    return FormatError(f"LeRobot: {what}", format="LeRobot").naming(os.fsdecode(path))
