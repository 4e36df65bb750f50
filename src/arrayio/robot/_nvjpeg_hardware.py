"""nvJPEG's batched decode called directly (through ctypes, on the library torchvision has loaded) on GPUs
with a hardware JPEG decoder (A100, H100 and later): each group of cameras decodes straight into one
(n, C, H, W) tensor, and a batch's images are cut into runs that several lanes decode side by side.

torchvision's operator calls the same library with the same backend, but per call it parses every header
twice, allocates every image on its own, re-initialises its decoder and synchronises its stream before and
after the decode. Here the images' sizes come from their records (checked against every header before a
batch gets here, see ``check_jpeg_headers``) and the pointer tables are a few array operations. nvJPEG's
call returns only once its decode is done (measured on an H100), but calls made from several threads, each
with its own handle and stream, run side by side: :data:`LANES` of them, each with two decoder states in
turn (a state is used again only once the decode issued with it has finished, and what that decode reads
is kept alive until then).

Where the library or the hardware backend is missing, or nvJPEG refuses a batch (a progressive JPEG, say),
the caller decodes that batch through torchvision instead. ``ARRAYIO_NVJPEG=torchvision`` turns this path
off.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import glob
import logging
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import torch

LOG = logging.getLogger("arrayio.robot")
SUCCESS = 0
BACKEND_HARDWARE = 3  # nvjpegBackend_t
OUTPUT_Y, OUTPUT_RGB = 2, 3  # nvjpegOutputFormat_t
COMPONENTS = 4  # nvjpegImage_t: unsigned char *channel[4]; size_t pitch[4]
STATES = 2
# Lanes of one decoder: nvJPEG calls made side by side, each on a run of at least LANE_IMAGES of a batch's
# images. Alone on an H100, 2 cameras x 256 frames at 96 px (224 px): 1 lane 17,800 frames/s (13,600),
# 2 lanes 25,100 (22,300), 4 lanes 37,000 (31,400), 8 lanes 42,300 (34,000) (benchmarks/kdb_gpu.py). Four
# take most of that with half the threads and handles.
LANES = 4
LANE_IMAGES = 32
SWITCH = "ARRAYIO_NVJPEG"  # "torchvision": decode through torchvision's operator only
_DECODERS: dict[int, HardwareDecoder | None] = {}  # CUDA device index -> its decoder, None where none can be made
_MADE = threading.Lock()


class NvjpegError(RuntimeError):
    """An nvJPEG call returned a status other than success."""


def library_path(maps: str) -> str | None:
    """The nvJPEG library this process has loaded, from the text of ``/proc/self/maps``; None if it has not."""
    for line in maps.splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) == 6 and os.path.basename(fields[5]).startswith("libnvjpeg"):
            return fields[5].strip()
    return None


def _load_library() -> ctypes.CDLL | None:
    """torchvision's own nvJPEG (its wheel bundles one under a hashed name), else the system's; None if none."""
    try:
        with open("/proc/self/maps") as maps:
            loaded = library_path(maps.read())
    except OSError:
        loaded = None
    candidates = [loaded] if loaded else []
    with contextlib.suppress(ImportError):  # where it is missing, only the system's library is left
        import torchvision

        candidates += sorted(glob.glob(os.path.join(os.path.dirname(torchvision.__file__) + ".libs", "libnvjpeg*")))
    candidates += [name for name in (ctypes.util.find_library("nvjpeg"),) if name]
    for candidate in candidates:
        try:
            return ctypes.CDLL(candidate)
        except OSError:
            continue
    return None


def _declare(library: Any) -> None:
    """The argument types of the calls made (handles and pointers as void*, so no address is truncated)."""
    pointer, integer = ctypes.c_void_p, ctypes.c_int
    signatures = {"nvjpegCreateEx": [integer, pointer, pointer, ctypes.c_uint, pointer],
                  "nvjpegJpegStateCreate": [pointer, pointer],
                  "nvjpegDecodeBatchedInitialize": [pointer, pointer, integer, integer, integer],
                  "nvjpegDecodeBatched": [pointer, pointer, pointer, pointer, pointer, pointer]}
    for name, arguments in signatures.items():
        function = getattr(library, name)
        function.argtypes, function.restype = arguments, integer


def _check(status: int, call: str) -> None:
    if status != SUCCESS:
        raise NvjpegError(f"{call} returned nvJPEG status {status}")


class CudaSide:
    """What the decoder asks of the CUDA runtime (tests without a GPU give a stand-in)."""

    def __init__(self, device: torch.device) -> None:
        self.device = device if device.index is not None else torch.device("cuda", torch.cuda.current_device())

    def stream(self) -> Any:
        """A new stream of the device: each lane decodes on its own."""
        return torch.cuda.Stream(self.device)

    def current_stream(self) -> Any:
        """The stream the caller's work is on."""
        return torch.cuda.current_stream(self.device)

    def event(self) -> Any:
        """A new event."""
        return torch.cuda.Event()

    def enter_device(self) -> None:
        """Make the device current in this thread (nvJPEG's handles belong to the device they were made on)."""
        torch.cuda.set_device(self.device)


class _Lane:
    """One nvJPEG handle on the hardware backend with its own stream and :data:`STATES` decoder states in turn."""

    def __init__(self, library: Any, side: Any) -> None:
        self.library, self.side = library, side
        handle = ctypes.c_void_p()
        _check(library.nvjpegCreateEx(BACKEND_HARDWARE, None, None, 0, ctypes.byref(handle)), "nvjpegCreateEx")
        self.handle = handle
        self.states = []
        for _ in range(STATES):
            state = ctypes.c_void_p()
            _check(library.nvjpegJpegStateCreate(handle, ctypes.byref(state)), "nvjpegJpegStateCreate")
            self.states.append(state)
        self.stream = side.stream()
        self.events = [side.event() for _ in range(STATES)]  # each state's: after its last decode
        self.shapes: list[tuple[int, int] | None] = [None] * STATES  # (images, output format) initialised for
        self.pending: list[Any] = [None] * STATES  # what each state's last decode reads, until it has finished
        self.turn = 0
        self.lock = threading.Lock()

    def decode(self, sources: np.ndarray, lengths: np.ndarray, destinations: np.ndarray, output_format: int,
               ready: Any, keep: Any) -> tuple[int, Any]:
        """Decode the JPEGs at host addresses ``sources`` (``lengths`` bytes each) into the device planes
        ``destinations`` (one nvjpegImage_t row each) on this lane's stream, after the event ``ready``; ``keep``
        stays alive until the decode has finished. nvJPEG's status, and the event after the decode."""
        with self.lock:
            turn = self.turn
            self.turn = (turn + 1) % STATES
            event = self.events[turn]
            if self.pending[turn] is not None:
                event.synchronize()  # this state's last decode, and the bytes it read, are done with
                self.pending[turn] = None
            state, shape = self.states[turn], (len(sources), output_format)
            if self.shapes[turn] != shape:
                self.shapes[turn] = None
                status = self.library.nvjpegDecodeBatchedInitialize(self.handle, state, shape[0], 1, output_format)
                if status != SUCCESS:
                    return status, None
                self.shapes[turn] = shape
            self.stream.wait_event(ready)  # the images' memory is the caller's stream's to hand out
            status = self.library.nvjpegDecodeBatched(self.handle, state, sources.ctypes.data, lengths.ctypes.data,
                                                      destinations.ctypes.data, self.stream.cuda_stream)
            if status != SUCCESS:
                self.shapes[turn] = None  # nvJPEG asks for a new initialisation after a failed batch
                return status, None
            event.record(self.stream)
            self.pending[turn] = (sources, lengths, destinations, keep)
            return SUCCESS, event


class HardwareDecoder:
    """nvJPEG's hardware decoder on one device in ``lanes`` lanes: a batch's images are cut into that many
    runs, decoded at once from as many threads (see :data:`LANES`)."""

    def __init__(self, library: Any, device: torch.device, lanes: int | None = None, *, side: Any = None) -> None:
        self.device = device
        self.side = side or CudaSide(device)
        self.lanes = [_Lane(library, self.side) for _ in range(lanes or LANES)]
        self.pool: ThreadPoolExecutor | None = None
        self.broken: BaseException | None = None  # what failed, after which torchvision decodes instead

    def decode(self, sources: np.ndarray, lengths: np.ndarray, destinations: np.ndarray, output_format: int,
               keep: Any) -> int:
        """Decode the JPEGs at host addresses ``sources`` (``lengths`` bytes each) into the device planes
        ``destinations`` (one nvjpegImage_t row each), the caller's stream then waiting for it; ``keep`` stays
        alive until it has finished. nvJPEG's status: anything but 0 means nothing usable was decoded."""
        caller = self.side.current_stream()
        ready = self.side.event()
        ready.record(caller)
        runs = max(1, min(len(self.lanes), len(sources) // LANE_IMAGES))
        bounds = np.linspace(0, len(sources), runs + 1).astype(int).tolist()
        if self.pool is None:  # its threads keep the device current: nothing to switch per call
            self.pool = ThreadPoolExecutor(len(self.lanes), initializer=self.side.enter_device,
                                           thread_name_prefix="arrayio-nvjpeg")
        runs_decoded = [self.pool.submit(lane.decode, sources[start:stop], lengths[start:stop],
                                         destinations[start:stop], output_format, ready, keep)
                        for lane, start, stop in zip(self.lanes, bounds, bounds[1:])]
        statuses = []
        for run in runs_decoded:
            status, finished = run.result()
            statuses.append(status)
            if finished is not None:  # even where another run failed: its images' memory is freed after
                caller.wait_event(finished)
        return next((status for status in statuses if status != SUCCESS), SUCCESS)


def hardware_decoder(device: torch.device) -> HardwareDecoder | None:
    """The hardware decoder of CUDA ``device`` (made once), None where there is none or it is switched off."""
    if os.environ.get(SWITCH, "").lower() == "torchvision":
        return None
    index = device.index if device.index is not None else torch.cuda.current_device()
    with _MADE:
        if index not in _DECODERS:
            _DECODERS[index] = _make(torch.device("cuda", index))
        decoder = _DECODERS[index]
        return None if decoder is None or decoder.broken is not None else decoder


def _make(device: torch.device) -> HardwareDecoder | None:
    library = _load_library()
    if library is None:
        LOG.info("arrayio: no nvJPEG library found in this process: decoding through torchvision")
        return None
    try:
        _declare(library)
        with torch.cuda.device(device):
            decoder = HardwareDecoder(library, device)
    except (AttributeError, NvjpegError) as error:  # an old library, or no hardware decoder on this GPU
        LOG.info("arrayio: nvJPEG's hardware decoder is not usable here (%s): decoding through torchvision", error)
        return None
    LOG.debug("arrayio: nvJPEG hardware decoder on %s", device)
    return decoder


def plane_table(bases: np.ndarray, channels: int, height: int, width: int) -> np.ndarray:
    """nvjpegImage_t rows (``channel[4]`` addresses, then ``pitch[4]``) for planar images of ``channels``
    planes of ``height`` x ``width`` bytes, image i starting at device address ``bases[i]``."""
    table = np.zeros((len(bases), 2 * COMPONENTS), np.uint64)
    plane = np.uint64(height * width)
    table[:, :channels] = np.asarray(bases, np.uint64)[:, None] + np.arange(channels, dtype=np.uint64) * plane
    table[:, COMPONENTS:COMPONENTS + channels] = width
    return table


def decode_into_stacks(decoder: HardwareDecoder, datas: list[torch.Tensor], lengths: list[list[int]],
                       groups: list[list[int]], sizes: list[tuple[int, int]], mode: int, device: torch.device,
                       scale: torch.Tensor | None) -> list[torch.Tensor] | None:
    """The stacks of ``decode_stacked`` (each group of cameras' images, of ``sizes[g]`` = (height, width), in one
    tensor), decoded by ``decoder``'s lanes, the current stream then waiting for them; None where these bytes
    cannot go to it (not contiguous host bytes), nvJPEG refuses the batch or the decoder fails."""
    channels = 1 if mode == 1 else 3
    stacks: list[torch.Tensor] = []
    place: dict[int, tuple[torch.Tensor, int]] = {}
    for group, (height, width) in zip(groups, sizes):
        count = sum(len(lengths[number]) for number in group)
        if not count:
            stacks.append(torch.empty([0], dtype=torch.uint8, device=device))
            continue
        stack = torch.empty((count, channels, height, width), dtype=torch.uint8, device=device)
        stacks.append(stack)
        first = 0
        for number in group:
            place[number] = (stack, first)
            first += len(lengths[number])
    sources, byte_counts, tables = [], [], []
    for number, data in enumerate(datas):
        counts = np.asarray(lengths[number], np.uint64)
        if not len(counts):
            continue
        if (number not in place or data.device.type != "cpu" or data.dtype != torch.uint8
                or not data.is_contiguous() or int(counts.sum()) > data.numel()):
            return None
        stack, first = place[number]
        height, width = int(stack.shape[2]), int(stack.shape[3])
        starts = np.concatenate([np.zeros(1, np.uint64), np.cumsum(counts[:-1], dtype=np.uint64)])
        sources.append(np.uint64(data.data_ptr()) + starts)
        byte_counts.append(counts)
        image_bytes = np.uint64(channels * height * width)
        firsts = np.arange(first, first + len(counts), dtype=np.uint64)
        tables.append(plane_table(np.uint64(stack.data_ptr()) + firsts * image_bytes, channels, height, width))
    if sources:
        try:
            status = decoder.decode(np.concatenate(sources), np.concatenate(byte_counts), np.concatenate(tables),
                                    OUTPUT_Y if mode == 1 else OUTPUT_RGB, datas)
        except RuntimeError as error:  # a lane's thread or CUDA call failing: not this batch's fault
            LOG.warning("arrayio: nvJPEG's hardware decoder failed (%s: %s); decoding through torchvision from "
                        "now on", type(error).__name__, error)
            decoder.broken = error
            return None
        if status != SUCCESS:
            LOG.debug("arrayio: nvJPEG's hardware decoder refused a batch (status %d): torchvision decodes it",
                      status)
            return None
    return stacks if scale is None else [torch.mul(stack, scale) for stack in stacks]
