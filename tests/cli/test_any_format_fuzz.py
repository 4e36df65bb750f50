"""Every format through the generic API: damaged files give problems or FormatErrors, never a crash."""

from __future__ import annotations

import random
import zlib

import pytest

import arrayio
from arrayio._registry import FORMATS, module_for

MUTATIONS = 60


@pytest.fixture(scope="module")
def samples(tmp_path_factory):
    folder = tmp_path_factory.mktemp("samples")
    return {name: module_for(name).demo(folder).read_bytes() for name in FORMATS}


def _mutants(data: bytes, seed: int):
    rng = random.Random(seed)
    for _ in range(MUTATIONS):
        mutated = bytearray(data)
        kind = rng.randrange(3)
        if kind == 0:
            mutated = mutated[:rng.randrange(len(mutated))]
        elif kind == 1:
            for _ in range(rng.randint(1, 4)):
                mutated[rng.randrange(len(mutated))] = rng.randrange(256)
        else:
            position = rng.randrange(max(1, len(mutated) - 8))
            mutated[position:position + 8] = rng.choice([b"\xff" * 8, bytes(8), (2**63).to_bytes(8, "little")])
        yield bytes(mutated)


def _read_everything(reader) -> None:
    """Touch what a user would: every entry's data, through the reader the format returns."""
    if hasattr(reader, "keys") and hasattr(reader, "__getitem__"):
        for key in list(reader.keys()):
            reader[key].sum()
    elif hasattr(reader, "read_episode"):
        for index in range(len(reader)):
            episode = reader.read_episode(index)
            if episode.images is not None:
                for frame in range(len(episode)):
                    episode.images.frame(frame)
    elif hasattr(reader, "iter_chunks"):
        for chunk in reader.iter_chunks():
            len(chunk)
    elif hasattr(reader, "array"):
        reader.array.sum()


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_damaged_files_never_crash(name, samples, tmp_path):
    path = tmp_path / f"damaged{FORMATS[name].extensions[0]}"
    for number, data in enumerate(_mutants(samples[name], seed=zlib.crc32(name.encode()))):
        path.write_bytes(data)
        problems = arrayio.validate(path)
        assert isinstance(problems, list) and all(isinstance(problem, arrayio.Problem) for problem in problems)
        try:
            arrayio.info(path)
            reader = arrayio.open(path)
            try:
                _read_everything(reader)
            finally:
                close = getattr(reader, "close", None)
                if close is not None:
                    close()
        except arrayio.FormatError:
            continue
        except arrayio.ArrayIOError as error:
            pytest.fail(f"{name} mutant {number}: {type(error).__name__} is not a FormatError: {error}")
