"""Batches of the kdb torch datasets: the tensors a batch is made of, reused batch arrays, packed
image bytes, and :func:`collate` (no dataset logic: the datasets, the mixture and the GPU loader share it)."""

from __future__ import annotations

import math
import sys
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

try:
    import torch
    from torch.utils.data import default_collate as _default_collate
    from torch.utils.data._utils.collate import collate as _collate
    from torch.utils.data._utils.collate import default_collate_fn_map
except ModuleNotFoundError as error:  # say which extra installs it
    from .._optional import missing

    raise missing("torch", "arrayio.robot.torch_batch") from error

from ._arguments import whole_number
from .torch_blocks import shared_blocks

IMAGE_FORMATS = ("float", "uint8")
PACKED_PARTS = ("_offsets", "_sizes")
_NUMPY_DTYPES = {torch.uint8: np.uint8, torch.float32: np.float32}
SCALE = np.float32(1 / 255)  # uint8 pixels -> float32 in [0, 1]


def check_image_format(image_format: str) -> None:
    """ValueError unless ``image_format`` is one of IMAGE_FORMATS."""
    if image_format not in IMAGE_FORMATS:
        raise ValueError(f"kdb: image_format must be one of {IMAGE_FORMATS}, got {image_format!r}")


def as_device(device: Any) -> torch.device:
    """``device`` ("cpu", "cuda:1", a torch.device) as a torch.device; ValueError naming it otherwise."""
    try:
        return torch.device(device)
    except (RuntimeError, TypeError) as error:
        raise ValueError(f"kdb: device {device!r} is not a torch device ({error})") from None


def batch_tensor(shape: tuple[int, ...], dtype: torch.dtype, *, reuse: bool = False) -> torch.Tensor:
    """A new tensor for a batch: in a DataLoader worker in shared memory, so that handing the batch
    to the main process copies nothing (as the default collation does), else an array of the
    process's pool of batch arrays. ``reuse``: in a worker, a kept block the main process has let go of
    (see :mod:`.torch_blocks`) where one of that size is free, else a new one kept."""
    if torch.utils.data.get_worker_info() is not None:
        nbytes = math.prod(shape) * dtype.itemsize
        if reuse:
            storage = shared_blocks.free(nbytes)
            if storage is None:
                storage = shared_blocks.new(nbytes)
        else:
            # Made in shared memory from the start, as default collation does: share_memory_() on a fresh
            # tensor copies it into a new shared block (12 ms for a 19 MB float batch here, on top of the
            # block's own page faults).
            storage = torch.UntypedStorage._new_shared(nbytes)
        return torch.empty(0, dtype=dtype).set_(storage)[:math.prod(shape)].view(shape)
    return torch.from_numpy(_batch_arrays.empty(shape, _NUMPY_DTYPES[dtype]))


def scratch_pixels(shape: tuple[int, ...]) -> np.ndarray:
    """This thread's reused uint8 array of ``shape``: one image decoded there stays in the CPU cache for
    its conversion to float (decoding a whole batch of uint8 first, then converting it, reads it back
    from memory)."""
    arrays = _scratch.__dict__.setdefault("arrays", {})
    array = arrays.get(shape)
    if array is None:
        arrays.clear()  # one image size at a time in practice: keep one array
        array = arrays[shape] = np.empty(shape, np.uint8)
    return array


class _BatchArrays:
    """Batch arrays handed out again once nothing but this pool refers to them (every tensor of the
    batch they made is gone). A fresh 7-14 MB array page-faults in ~800 pages per batch, about 5 % of
    the decode time of 96x96 JPEGs; an array the caller has let go is already mapped."""

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self._arrays: list[np.ndarray] = []
        self._lock = threading.Lock()

    def empty(self, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        """An uninitialised array of ``shape`` and ``dtype`` that nobody else holds."""
        with self._lock:
            for array in self._arrays:
                # References: the pool's list, this loop's name and getrefcount's argument.
                if array.shape == shape and array.dtype == dtype and sys.getrefcount(array) == 3:
                    return array
            array = np.empty(shape, dtype)
            self._arrays.append(array)
            if len(self._arrays) > self.keep:
                self._arrays.pop(0)
            return array


_batch_arrays = _BatchArrays(keep=8)
_scratch = threading.local()


def image_tensor(pixels: np.ndarray | torch.Tensor, image_format: str) -> torch.Tensor:
    """(..., H, W, C) uint8 -> (..., C, H, W) tensor, uint8 or float32 in [0, 1], without a transposing copy.

    The result is a channels-last view (strides of the decoded HWC pixels): a
    transposing copy costs as much as a third of the JPEG decode. Call
    ``.contiguous()`` where an operation needs channels-first memory.
    """
    tensor = pixels if isinstance(pixels, torch.Tensor) else torch.from_numpy(pixels)
    if image_format == "float":
        floats = batch_tensor(tuple(tensor.shape), torch.float32)
        # In numpy: torch's copy_ and mul_ would, in the main process, wake its thread pool for every item
        # (14 ms for one 224x224 image on a loaded 2-core machine against 0.1 ms here).
        to_float(tensor.numpy(), floats.numpy())
        tensor = floats
    return channels_first(tensor)


def to_float(pixels: np.ndarray, out: np.ndarray) -> None:
    """uint8 ``pixels`` -> float32 in [0, 1] into ``out`` (the same floats as ``pixels * SCALE``)."""
    # Two vectorised passes, the cast and then the scale in place, take 22 us for a 224x224 image against
    # the one mixed-type pass's 35 us (numpy casts that one through small buffers; 56 against 79 us into a
    # batch larger than the cache).
    np.copyto(out, pixels, casting="unsafe")
    np.multiply(out, SCALE, out=out)


def channels_first(tensor: torch.Tensor) -> torch.Tensor:
    """(..., H, W, C) -> a (..., C, H, W) view of the same memory."""
    lead = tensor.dim() - 3
    return tensor.permute(*range(lead), lead + 2, lead, lead + 1)


class SampleItem(dict):
    """One item of a fetched batch (a plain dict to its users)."""


class Samples(Sequence):
    """One fetched batch: :func:`collate` returns it whole, and so does default collation of decoded images
    (it would otherwise stack the items back into a copy of the same batch); packed bytes are taken
    apart by item there, as lists of bytes."""

    def __init__(self, batch: dict[str, Any], size: int, packed: Sequence[str] = ()) -> None:
        self.batch = batch
        self.size = size
        self.packed = tuple(packed)
        self._items: list[SampleItem] | None = None

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, item: Any) -> Any:
        if isinstance(item, (int, np.integer)) and -self.size <= item < self.size:  # default collation asks
            return self._item(int(item) % self.size)  # for item 0 only, to look its type up
        if self._items is None:
            self._items = [self._item(number) for number in range(self.size)]
        return self._items[item]

    def _item(self, number: int) -> SampleItem:
        hidden = {camera + part for camera in self.packed for part in PACKED_PARTS}
        item = SampleItem({key: value[number] for key, value in self.batch.items()
                           if key not in hidden and key not in self.packed})
        for camera in self.packed:
            item[camera] = _packed_item(self.batch, camera, number)
        return item


def _packed_item(batch: Mapping[str, Any], camera: str, number: int) -> Any:
    """The stored bytes of item ``number`` of a packed camera (a list of bytes for a window)."""
    sizes = batch[camera + "_sizes"]
    per_item = int(np.prod(sizes.shape[1:-1], dtype=np.int64))
    offsets = batch[camera + "_offsets"].tolist()
    data = batch[camera].numpy()
    pieces = [data[offsets[slot]:offsets[slot + 1]].tobytes()
              for slot in range(number * per_item, (number + 1) * per_item)]
    return pieces if sizes.dim() > 2 else pieces[0]


def collate(samples: Any) -> Any:
    """DataLoader ``collate_fn``: a fetched batch as it is (packed bytes included), else default collation."""
    if isinstance(samples, Samples):
        return outgoing(samples.batch)
    return _default_collate(samples)


def _collate_items(batch: Sequence[SampleItem], *, collate_fn_map: dict | None = None) -> Any:
    """Default collation of SampleItems: a whole fetched batch of decoded images as it was fetched (the
    values default collation would stack, in the batch's own tensors), anything else item by item."""
    if isinstance(batch, Samples) and not batch.packed:
        return outgoing(batch.batch)
    return _collate([dict(item) for item in batch], collate_fn_map=collate_fn_map)


def outgoing(batch: dict[str, Any]) -> dict[str, Any]:
    """A fetched batch as a DataLoader worker sends it to the main process (see :class:`_WorkerBatch`); a
    plain dict elsewhere."""
    return _WorkerBatch(batch) if torch.utils.data.get_worker_info() is not None else dict(batch)


_INLINE_BYTES = 1 << 20


class _WorkerBatch(dict):
    """A batch leaving a DataLoader worker. Its small tensors (state, action, masks, indices) travel inside
    the pickle, a copy of a few KB: torch would put each in a new shared-memory block and send its file
    descriptor over a connection of its own, about 3 ms of the main process's time per batch of ten (a
    third of a 224x224 float batch's decode). The main process gets a plain dict of tensors."""

    def __reduce__(self) -> tuple:
        inline = {key: value.numpy() for key, value in self.items() if type(value) is torch.Tensor
                  and not value.is_shared() and value.device.type == "cpu" and value.nbytes <= _INLINE_BYTES}
        return _received_batch, (list(self), inline, {key: value for key, value in self.items() if key not in inline})


def _received_batch(keys: list[str], inline: dict[str, np.ndarray], shared: dict[str, Any]) -> dict[str, Any]:
    """(In the main process) the batch a worker sent, keys in their order."""
    return {key: torch.from_numpy(inline[key]) if key in inline else shared[key] for key in keys}


# torch's DataLoader hands a fetched batch to default_collate, which looks the type of its first item up
# in this table: a batch of SampleItems is then returned as fetched instead of copied item by item (half
# the DataLoader throughput of 224x224 float images on 2 workers).
default_collate_fn_map[SampleItem] = _collate_items


def pack(key: str, pieces: list[Any]) -> dict[str, torch.Tensor]:
    """``key``: the pieces' bytes in one uint8 tensor; ``key_offsets``: (count + 1,) int64 starts."""
    lengths = np.fromiter((len(piece) for piece in pieces), np.int64, len(pieces))
    offsets = np.zeros(len(pieces) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    data = batch_tensor((int(offsets[-1]),), torch.uint8)
    flat = data.numpy()
    for start, piece in zip(offsets[:-1].tolist(), pieces):
        flat[start:start + len(piece)] = np.frombuffer(piece, np.uint8)
    return {key: data, key + "_offsets": torch.from_numpy(offsets)}


def packed_cameras(batch: Mapping[str, Any]) -> list[str]:
    """The keys of ``batch`` that hold packed image bytes (with their _offsets and _sizes)."""
    return [key for key in batch if all(key + part in batch for part in PACKED_PARTS)]


class ReadAheadBatch(list):
    """A batch's indices, and ``ahead``: those of the batch the same DataLoader process gets next (None for
    its last). A dataset that reads remote files fetches ``ahead``'s bytes while it decodes this batch."""

    ahead: list[int] | None = None


class ReadAheadSampler(torch.utils.data.Sampler):
    """``batch_sampler``'s batches as :class:`ReadAheadBatch` for a DataLoader with ``workers`` workers.

    A DataLoader hands batch k to worker k % workers (the main process reads every batch when there are
    none), so each batch's ``ahead`` is the batch ``max(workers, 1)`` places later, and with ``batches_ahead`` n
    the n batches its process reads after this one (each already asked for by the batch before is not
    asked for again). Where a worker falls out of that order (one stops early), a read-ahead fetches
    bytes another process reads: more requests, never other results. Pass it as the DataLoader's
    ``batch_sampler``.
    """

    def __init__(self, batch_sampler: Any, workers: int, batches_ahead: int = 1) -> None:
        self.batch_sampler = batch_sampler
        self.span = max(whole_number("workers", workers, 0), 1)
        self.batches_ahead = whole_number("batches_ahead", batches_ahead, 1)

    def __iter__(self) -> Any:
        waiting: list[ReadAheadBatch] = []
        for indices in self.batch_sampler:
            waiting.append(ReadAheadBatch(indices))
            if len(waiting) > self.span * self.batches_ahead:
                yield self._with_ahead(waiting)
        while waiting:
            yield self._with_ahead(waiting)

    def _with_ahead(self, waiting: list[ReadAheadBatch]) -> ReadAheadBatch:
        """The first of ``waiting``, taken out, with the items of the ``batches_ahead`` batches its process
        reads next."""
        batch = waiting.pop(0)
        later = [item for step in range(1, self.batches_ahead + 1) if step * self.span <= len(waiting)
                 for item in waiting[step * self.span - 1]]
        batch.ahead = later or None
        return batch

    def __len__(self) -> int:
        return len(self.batch_sampler)
