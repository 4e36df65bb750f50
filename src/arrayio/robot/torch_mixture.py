"""Mixtures of datasets: frames drawn from several datasets (robots, embodiments, tasks) in
proportion to weights, deterministic for a seed, with state/action sizes padded to the largest."""

from __future__ import annotations

import copy as _copy
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

try:
    import torch
    from torch.utils.data import Dataset, Sampler
    from torch.utils.data import default_collate as _default_collate
except ModuleNotFoundError as error:  # say which extra installs it
    from .._optional import missing

    raise missing("torch", "arrayio.robot.torch_mixture") from error

from ._arguments import finite_number, item_indices, whole_number
from .torch_batch import PACKED_PARTS, ReadAheadBatch, Samples, pack


class MixtureDataset(Dataset):
    """Frames drawn from several datasets in proportion to their weights, the same for every process.

    ``MixtureDataset([(robot_a, 0.5), (robot_b, 0.3), (robot_c, 0.2)], seed=0)``
    has ``num_samples`` items (default: the datasets' total length). Item i is
    a fixed function of (seed, epoch, i): exactly ``round(weight * num_samples)``
    items come from each dataset (largest remainders), in shuffled order, each
    a uniformly drawn item of it. So any sampler works: a plain or shuffled
    DataLoader, workers, and ``DistributedSampler`` sharding across ranks all
    see one consistent mixture. Call :meth:`set_epoch` (before creating the
    DataLoader iterator) for a fresh draw each epoch; workers kept across
    epochs see it too (the epoch is in shared memory). Items carry ``dataset``,
    the number of the dataset they came from; datasets must give the same keys.
    FrameDatasets with the same options are fetched into one batch directly;
    other datasets batch by batch, then merged back into item order.

    Embodiments differ in state and action sizes: with ``pad_dims=True`` (the
    default) FrameDatasets whose sizes differ mix into one batch, each of
    ``state``, ``action`` (and ``state_history``) zero-padded in its last axis
    to the largest size among the datasets, with a ``<key>_dim_mask`` (B, size)
    bool tensor that is True on the entries the item really has. The masks
    are in every batch of such a mixture (never in one of equal sizes).
    """

    def __init__(self, datasets: Sequence[tuple[Any, float]], *, seed: int = 0,
                 num_samples: int | None = None, pad_dims: bool = True) -> None:
        if not datasets:
            raise ValueError("kdb: a mixture needs at least one (dataset, weight) pair")
        for number, pair in enumerate(datasets):
            if not isinstance(pair, Sequence) or isinstance(pair, str) or len(pair) != 2:
                raise TypeError(f"kdb: mixture entry {number} must be a (dataset, weight) pair, got {pair!r}")
        self.datasets = [dataset for dataset, _ in datasets]
        weights = np.asarray([finite_number(f"mixture weights[{number}]", weight)
                              for number, (_, weight) in enumerate(datasets)], np.float64)
        if weights.sum() <= 0:
            raise ValueError(f"kdb: mixture weights must not all be 0, got {weights.tolist()}")
        for number, dataset in enumerate(self.datasets):
            if weights[number] > 0 and len(dataset) == 0:
                raise ValueError(f"kdb: mixture dataset {number} is empty but has weight {weights[number]}")
        self.weights = weights / weights.sum()
        self.seed = whole_number("seed", seed, 0)
        # The epoch and its drawn plan, one object shared with the copies with_decode makes (GpuLoader's):
        # set_epoch on the mixture a user holds reaches the copy that is loaded.
        self._draw = _Draw()
        self.num_samples = sum(len(dataset) for dataset in self.datasets) if num_samples is None \
            else whole_number("num_samples", num_samples, 0)
        self._one_kind: bool | None = None
        self.pad_to = _padded_dims(self.datasets) if pad_dims else None

    def with_decode(self, decode: str, image_format: str | None = None, *,
                    reuse_shared_memory: bool | None = None) -> MixtureDataset:
        """A copy of this mixture whose datasets decode as ``decode`` (those that have the option)."""
        copy = _copy.copy(self)
        copy.datasets = [dataset.with_decode(decode, image_format, reuse_shared_memory=reuse_shared_memory)
                         if hasattr(dataset, "with_decode") else dataset for dataset in self.datasets]
        copy._one_kind = None
        copy._draw = self._draw  # copy.copy goes through __getstate__, which gives a process its own
        return copy

    @property
    def epoch(self) -> int:
        """The epoch whose mixture is drawn (see :meth:`set_epoch`)."""
        return self._draw.epoch

    def set_epoch(self, epoch: int) -> None:
        """Draw a new mixture for ``epoch`` (as DistributedSampler.set_epoch does for its order)."""
        self._draw.epoch = whole_number("epoch", epoch, 0)

    def __len__(self) -> int:
        return self.num_samples

    def counts(self) -> np.ndarray:
        """Items per dataset: weight * num_samples rounded so they sum to num_samples."""
        exact = self.weights * self.num_samples
        counts = np.floor(exact).astype(np.int64)
        remainder = self.num_samples - int(counts.sum())
        counts[np.argsort(-(exact - counts), kind="stable")[:remainder]] += 1
        return counts

    def plan(self) -> tuple[np.ndarray, np.ndarray]:
        """(dataset number, item within it) of every item, from seed and epoch alone."""
        draw = self._draw
        epoch = draw.epoch
        if draw.plan is None or draw.plan_epoch != epoch:
            rng = np.random.default_rng([self.seed, epoch])
            counts = self.counts()
            sources = np.repeat(np.arange(len(counts), dtype=np.int16 if len(counts) < 2**15 else np.int64), counts)
            rng.shuffle(sources)
            inner = np.zeros(self.num_samples, np.int64)
            for number, count in enumerate(counts.tolist()):
                if count:
                    inner[sources == number] = rng.integers(0, len(self.datasets[number]), count)
            draw.plan, draw.plan_epoch = (sources, inner), epoch
        return draw.plan

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_draw"] = _Draw(self._draw.shared)  # one epoch for all; each process draws its own plan
        return state

    def __getitem__(self, item: int) -> dict[str, Any]:
        return self.__getitems__([item])[0]

    def batch_sampler(self, batch_size: int, *, drop_last: bool = False, shuffle: bool = True,
                      num_replicas: int | None = None, rank: int | None = None) -> BatchPerDataset:
        """A DataLoader ``batch_sampler`` whose batches each hold items of one dataset (see BatchPerDataset)."""
        return BatchPerDataset(self, batch_size, drop_last=drop_last, shuffle=shuffle, num_replicas=num_replicas,
                               rank=rank)

    def __getitems__(self, items: Sequence[int]) -> Samples:
        """A batch in one call: items grouped by dataset, each group fetched as one batch, put back in order."""
        indices = item_indices(items, "a mixture item")
        if indices is not None:
            indices = np.where(indices < 0, indices + self.num_samples, indices)
        if indices is None or ((indices < 0) | (indices >= self.num_samples)).any():
            raise IndexError(f"kdb: mixture item outside 0..{self.num_samples - 1} in {list(items)[:8]}")
        sources, inner = self.plan()
        chosen = sources[indices]
        numbers = np.unique(chosen).tolist()
        ahead = self._ahead_by_dataset(getattr(items, "ahead", None))
        if self._one_kind is None:
            kinds = {_signature(dataset) for dataset in self.datasets}
            self._one_kind = len(kinds) == 1 and None not in kinds
        # Each remote dataset waits for its last read-ahead and starts the next; those read with their own
        # __getitems__ below are handed their part of ``ahead`` there.
        for number in (set(ahead) | set(numbers) if self._one_kind else set(ahead) - set(numbers)) \
                if self.remote else ():
            self.datasets[number].read_ahead(ahead.get(number), beside=inner[indices[chosen == number]])
        if self._one_kind:  # every dataset's frames decoded straight into one batch: no merge copy
            parts = [(self.datasets[number], inner[indices[chosen == number]], np.flatnonzero(chosen == number))
                     for number in numbers]
            batch = type(parts[0][0]).fetch_parts(parts, len(indices), self.pad_to)
            batch["dataset"] = torch.from_numpy(chosen.astype(np.int64))
            return Samples(batch, len(indices), self.datasets[numbers[0]].packed_keys())
        batches: list[tuple[np.ndarray, dict[str, Any]]] = []
        packed: set[str] = set()
        for number in numbers:
            members = np.flatnonzero(chosen == number)
            dataset = self.datasets[number]
            wanted = ReadAheadBatch(inner[indices[members]].tolist())
            wanted.ahead = ahead.get(number)
            fetched = dataset.__getitems__(wanted) if hasattr(dataset, "__getitems__") else [
                dataset[i] for i in wanted]
            if isinstance(fetched, Samples):
                batch = dict(fetched.batch)
                packed.update(fetched.packed)
            else:
                batch = _default_collate(list(fetched))
            batch["dataset"] = torch.full((len(members),), number, dtype=torch.int64)
            batches.append((members, batch))
        return Samples(_merge(batches, len(indices), packed), len(indices), sorted(packed))

    @property
    def remote(self) -> bool:
        """Whether any of the datasets is read over the network (where reading the next batch ahead pays)."""
        return any(getattr(dataset, "remote", False) for dataset in self.datasets)

    def _ahead_by_dataset(self, ahead: Sequence[int] | None) -> dict[int, list[int]]:
        """{dataset number: its items} of the mixture items ``ahead`` (the batch this process reads next), for
        the remote datasets that read ahead; none where an item is outside the mixture or not an integer (the
        batch that holds it will say, not this one)."""
        if ahead is None or not len(ahead) or not self.remote:
            return {}
        try:
            indices = item_indices(ahead, "a mixture item")
        except (TypeError, ValueError):
            return {}
        if indices is None or ((indices < -self.num_samples) | (indices >= self.num_samples)).any():
            return {}
        indices = np.where(indices < 0, indices + self.num_samples, indices)
        sources, inner = self.plan()
        chosen = sources[indices]
        return {number: inner[indices[chosen == number]].tolist()
                for number in np.unique(chosen).tolist()
                if getattr(self.datasets[number], "remote", False) and hasattr(self.datasets[number], "read_ahead")}


class _Draw:
    """A mixture's epoch, in shared memory, and the plan this process drew for it: DataLoader workers kept
    across epochs (``persistent_workers=True``) see ``set_epoch`` of the main process and draw again."""

    def __init__(self, shared: torch.Tensor | None = None) -> None:
        self.shared = torch.zeros(1, dtype=torch.int64).share_memory_() if shared is None else shared
        self.plan: tuple[np.ndarray, np.ndarray] | None = None
        self.plan_epoch = -1

    @property
    def epoch(self) -> int:
        """The epoch set last, by this process or the one that made the mixture."""
        return int(self.shared[0])

    @epoch.setter
    def epoch(self, epoch: int) -> None:
        self.shared[0] = epoch


class BatchPerDataset(Sampler):
    """Batches of a :class:`MixtureDataset` that each hold items of one dataset, for datasets whose items
    cannot share a batch (other cameras or image sizes): ``DataLoader(mixture,
    batch_sampler=mixture.batch_sampler(32))``. Every item of the mixture's epoch is in one batch (the last
    batch of a dataset may be short, or left out with ``drop_last``); the batches come in an order shuffled
    by (seed, epoch), so the datasets still mix over the epoch in proportion to their weights.

    Across ranks (``num_replicas`` processes, this one ``rank``; by default those of the initialized
    ``torch.distributed`` process group, else 1 and 0) each rank takes every ``num_replicas``-th batch of
    that order, as DistributedSampler deals items: every rank gets as many batches, the first batches dealt
    again to make up the count (or the last left out with ``drop_last``).
    """

    def __init__(self, mixture: MixtureDataset, batch_size: int, *, drop_last: bool = False,
                 shuffle: bool = True, num_replicas: int | None = None, rank: int | None = None) -> None:
        self.mixture = mixture
        self.batch_size = whole_number("batch_size", batch_size, 1)
        self.drop_last = bool(drop_last)
        self.shuffle = bool(shuffle)
        self.num_replicas, self.rank = _replicas(num_replicas, rank)

    def set_epoch(self, epoch: int) -> None:
        """Draw the mixture of ``epoch`` (:meth:`MixtureDataset.set_epoch`), as DistributedSampler.set_epoch."""
        self.mixture.set_epoch(epoch)

    def all_batches(self) -> list[list[int]]:
        """This epoch's batches of every rank, in the order they are dealt."""
        sources, _ = self.mixture.plan()
        found = []
        for number in range(len(self.mixture.datasets)):
            members = np.flatnonzero(sources == number).tolist()  # in the plan's shuffled order
            for start in range(0, len(members), self.batch_size):
                batch = members[start:start + self.batch_size]
                if len(batch) == self.batch_size or not self.drop_last:
                    found.append(batch)
        if self.shuffle:
            order = np.random.default_rng([self.mixture.seed, self.mixture.epoch, 1]).permutation(len(found))
            found = [found[position] for position in order.tolist()]
        return found

    def batches(self) -> list[list[int]]:
        """This rank's batches of this epoch, in the order they are given."""
        found = self.all_batches()
        if self.num_replicas == 1:
            return found
        dealt = len(self) * self.num_replicas
        while found and len(found) < dealt:  # as many for every rank: the first batches again
            found = found + found[:dealt - len(found)]
        return found[self.rank:dealt:self.num_replicas]

    def __iter__(self) -> Iterator[list[int]]:
        return iter(self.batches())

    def __len__(self) -> int:
        counts = self.mixture.counts()
        whole = counts // self.batch_size
        total = int(whole.sum() if self.drop_last else (whole + (counts % self.batch_size > 0)).sum())
        return total // self.num_replicas if self.drop_last else -(-total // self.num_replicas)


def _replicas(num_replicas: int | None, rank: int | None) -> tuple[int, int]:
    """(ranks, this rank): those given, else those of the initialized process group, else (1, 0)."""
    grouped = torch.distributed.is_available() and torch.distributed.is_initialized()
    if num_replicas is None:
        num_replicas = torch.distributed.get_world_size() if grouped else 1
    if rank is None:
        rank = torch.distributed.get_rank() if grouped else 0
    num_replicas = whole_number("num_replicas", num_replicas, 1)
    rank = whole_number("rank", rank, 0)
    if rank >= num_replicas:
        raise ValueError(f"kdb: rank must be in 0..{num_replicas - 1} (num_replicas={num_replicas}), got {rank}")
    return num_replicas, rank


def _merge(parts: list[tuple[np.ndarray, dict[str, Any]]], size: int, packed: set[str]) -> dict[str, Any]:
    """One batch of ``size`` items from per-dataset batches, each item back at its place."""
    keys = list(parts[0][1])
    for _, batch in parts[1:]:
        if set(batch) != set(keys):
            raise ValueError(f"kdb: mixture datasets give different keys: {sorted(keys)} vs {sorted(batch)}")
    if len(parts) == 1 and np.array_equal(parts[0][0], np.arange(size)):
        return parts[0][1]
    merged: dict[str, Any] = {}
    hidden = {camera + part for camera in packed for part in PACKED_PARTS}
    for key in keys:
        if key in hidden:
            continue
        if key in packed:
            merged.update(_merge_packed(parts, key, size))
            continue
        first = parts[0][1][key]
        if isinstance(first, torch.Tensor):
            shapes = {tuple(batch[key].shape[1:]) for _, batch in parts}
            if len(shapes) > 1:
                raise ValueError(f"kdb: mixture datasets give {key} of different shapes {sorted(shapes)}")
            # Merge in memory order (images are channels-last views): a transposing copy would cost a
            # large part of the decode.
            strides = first.stride()
            order = sorted(range(first.dim()), key=lambda dim: (dim != 0, -strides[dim]))
            inverse = [order.index(dim) for dim in range(first.dim())]
            out = torch.empty((size, *[first.shape[dim] for dim in order[1:]]), dtype=first.dtype)
            rows = out.numpy()  # numpy's row gather is a memcpy per row; torch's index_put is far slower here
            for members, batch in parts:
                rows[members] = batch[key].permute(order).numpy()
            merged[key] = out.permute(inverse)
        else:
            values: list[Any] = [None] * size
            for members, batch in parts:
                for member, value in zip(members.tolist(), batch[key]):
                    values[member] = value
            merged[key] = values
    return merged


def _merge_packed(parts: list[tuple[np.ndarray, dict[str, Any]]], key: str, size: int) -> dict[str, torch.Tensor]:
    sizes_shape = parts[0][1][key + "_sizes"].shape[1:]
    per_item = int(np.prod(sizes_shape[:-1], dtype=np.int64))
    pieces: list[Any] = [None] * (size * per_item)
    sizes = np.zeros((size, *sizes_shape), np.int32)
    for members, batch in parts:
        flat, starts = batch[key].numpy(), batch[key + "_offsets"].tolist()
        sizes[members] = batch[key + "_sizes"].numpy()
        for row, member in enumerate(members.tolist()):
            for slot in range(per_item):
                source = row * per_item + slot
                pieces[member * per_item + slot] = flat[starts[source]:starts[source + 1]]
    return {**pack(key, pieces), key + "_sizes": torch.from_numpy(sizes)}


def _signature(dataset: Any) -> tuple | None:
    """What datasets fetched into one batch together share (None: a dataset fetched on its own)."""
    signature = getattr(dataset, "batch_signature", None)
    return signature() if callable(signature) else None


def _padded_dims(datasets: Sequence[Any]) -> dict[str, int] | None:
    """{field: largest size} when the datasets' state or action sizes differ, else None (nothing to pad)."""
    found = [getattr(dataset, "dims", None) for dataset in datasets]
    dims = [dim for dim in found if dim is not None]
    if len(dims) != len(found):
        return None
    fields = sorted({field for dim in dims for field in dim})
    if all(len({dim.get(field) for dim in dims}) == 1 for field in fields):
        return None
    return {field: max(dim.get(field, 0) for dim in dims) for field in fields}
