"""nvJPEG's batch decode of packed camera bytes, with the image views, the decode and the stacking in one
TorchScript function: it runs in C++ with the GIL released, and a batch's 512 image views and 512 decoded
images never become Python objects. Called from Python, torchvision's operator took the GIL back hundreds of
times per batch: beside a thread running Python (the loader's staging thread, a training loop) its decode
ran 2-10x slower on an H100 machine (benchmarks/kdb_gpu.py --probe). Where TorchScript cannot compile or run
the function, the same steps run from Python. On GPUs with a hardware JPEG decoder, nvJPEG is called directly
instead (:mod:`._nvjpeg_hardware`), and this path decodes what that one refuses.

This module has no ``from __future__ import annotations``: TorchScript reads the annotations as written.
"""

import logging
import time
import warnings
from typing import List, Optional  # noqa: UP035 - TorchScript's own spellings of these types

import torch

from .._optional import require
from ._nvjpeg_hardware import decode_into_stacks, hardware_decoder

LOG = logging.getLogger("arrayio.robot")
_COMPILED: dict = {}  # "function": the compiled decode, or None once it cannot be used here


def decode_stacked(datas: List[torch.Tensor], lengths: List[List[int]], groups: List[List[int]],  # noqa: UP006
                   mode: int, device: torch.device,
                   scale: Optional[torch.Tensor]) -> List[torch.Tensor]:  # noqa: UP006, UP045
    """Each camera's packed JPEGs (``datas[i]`` cut at ``lengths[i]``) decoded in one nvJPEG call, then the
    images of each group of cameras stacked into one (n, C, H, W) tensor (empty for a group without images):
    uint8, or times ``scale`` (a 0-d float32 tensor) where one is given. ``mode``: torchvision's
    ImageReadMode value."""
    pieces: List[torch.Tensor] = []  # noqa: UP006
    firsts: List[int] = []  # noqa: UP006
    for number in range(len(datas)):
        firsts.append(len(pieces))
        pieces.extend(datas[number].split_with_sizes(lengths[number]))
    decoded = torch.ops.image.decode_jpegs_cuda(pieces, mode, device)
    stacks: List[torch.Tensor] = []  # noqa: UP006
    for group in groups:
        images: List[torch.Tensor] = []  # noqa: UP006
        for number in group:
            images.extend(decoded[firsts[number]:firsts[number] + len(lengths[number])])
        stack = torch.stack(images) if len(images) > 0 else torch.empty([0], dtype=torch.uint8, device=device)
        stacks.append(stack if scale is None else torch.mul(stack, scale))
    return stacks


def decode_groups(datas: list[torch.Tensor], lengths: list[list[int]], groups: list[list[int]],
                  sizes: list[tuple[int, int]], mode: int, device: torch.device,
                  scale: torch.Tensor | None = None) -> list[torch.Tensor]:
    """:func:`decode_stacked` for images of channel ``mode`` (1: grey, 3: RGB), each group's images of
    ``sizes[g]`` = (height, width), checked against every header. Where the GPU has a hardware JPEG decoder,
    nvJPEG decodes straight into the stacks (:mod:`._nvjpeg_hardware`); else torchvision's operator, compiled
    where it can be, from Python where it cannot (or where the compiled one fails and the same steps from
    Python do not: then for good)."""
    io = require("torchvision.io", "GPU JPEG decode")  # registers the operator, and loads nvJPEG
    if device.type == "cuda":
        decoder = hardware_decoder(device)
        if decoder is not None:
            stacks = decode_into_stacks(decoder, datas, lengths, groups, sizes, mode, device, scale)
            if stacks is not None:
                return stacks
    read_mode = (io.ImageReadMode.GRAY if mode == 1 else io.ImageReadMode.RGB).value
    compiled = _compiled()
    if compiled is None:
        return decode_stacked(datas, lengths, groups, read_mode, device, scale)
    try:
        return compiled(datas, lengths, groups, read_mode, device, scale)
    except RuntimeError as error:  # the data's fault if the Python steps fail the same way: raised from there
        stacks = decode_stacked(datas, lengths, groups, read_mode, device, scale)
        LOG.warning("arrayio: nvJPEG decode through TorchScript failed (%s: %s); decoding from Python from now "
                    "on", type(error).__name__, error)
        _COMPILED["function"] = None
        return stacks


def _compiled():  # noqa: ANN202 - a TorchScript function, or None
    """The compiled :func:`decode_stacked` (compiled once), None where TorchScript or the operator is missing."""
    if "function" not in _COMPILED:
        started = time.perf_counter()
        try:
            with warnings.catch_warnings():  # torch.jit is deprecated, not removed; nothing else compiles this
                warnings.simplefilter("ignore")
                _COMPILED["function"] = torch.jit.script(decode_stacked)
            LOG.debug("arrayio: nvJPEG decode compiled with TorchScript in %.3f s", time.perf_counter() - started)
        except Exception as error:  # noqa: BLE001 - any failure to compile means: decode from Python
            LOG.info("arrayio: nvJPEG decode runs from Python (TorchScript: %s: %s)", type(error).__name__, error)
            _COMPILED["function"] = None
    return _COMPILED["function"]
