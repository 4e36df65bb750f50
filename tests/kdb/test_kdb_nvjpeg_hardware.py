"""nvJPEG's hardware decoder called directly: the pointer tables, the two decoder states taking turns and
a refused batch, against a stand-in library that decodes on the CPU at the very addresses it is given (so
the address arithmetic is checked end to end without a GPU); on a CUDA machine, the real decoder against
torchvision's and a batch it refuses."""

from __future__ import annotations

import ctypes
import threading

import numpy as np
import pytest
from test_kdb_training import _cuda_and_torchvision

torch = pytest.importorskip("torch")
simplejpeg = pytest.importorskip("simplejpeg")

from arrayio import kdb  # noqa: E402
from arrayio.kdb import EncodedImage  # noqa: E402
from arrayio.kdb._images import encode  # noqa: E402
from arrayio.robot import _nvjpeg_hardware as hardware  # noqa: E402
from arrayio.robot.torch import FrameDataset, collate, plan_decode  # noqa: E402


class Event:
    def __init__(self, log, number):
        self.log, self.number = log, number

    def record(self, stream):
        self.log.append(("record", self.number, stream.cuda_stream))

    def synchronize(self):
        self.log.append(("synchronize", self.number))


class Stream:
    def __init__(self, log, number):
        self.log, self.cuda_stream = log, number

    def wait_event(self, event):
        self.log.append(("wait", self.cuda_stream, event.number))


class Side:
    """The CUDA runtime as the decoder sees it: streams numbered from 7, the caller's being 0; events
    numbered from 0 as they are made."""

    def __init__(self, log):
        self.log, self.streams, self.events = log, 0, 0

    def stream(self):
        self.streams += 1
        return Stream(self.log, 6 + self.streams)

    def current_stream(self):
        return Stream(self.log, 0)

    def event(self):
        self.events += 1
        return Event(self.log, self.events - 1)

    def enter_device(self):
        self.log.append(("device", threading.current_thread().name))


class Library:
    """nvJPEG's calls as the decoder makes them: each batch decoded with simplejpeg from the host addresses
    it names into the planes its nvjpegImage_t rows name."""

    def __init__(self, refuse=(), backend_status=0):
        self.log, self.sizes, self.refuse, self.backend_status = [], {}, set(refuse), backend_status
        self.batches = 0

    def nvjpegCreateEx(self, backend, device_allocator, pinned_allocator, flags, handle):  # noqa: N802
        self.log.append(("create", backend))
        handle._obj.value = 1000
        return self.backend_status

    def nvjpegJpegStateCreate(self, handle, state):  # noqa: N802
        state._obj.value = 2000 + sum(1 for entry in self.log if entry[0] == "state")
        self.log.append(("state", state._obj.value))
        return 0

    def nvjpegDecodeBatchedInitialize(self, handle, state, count, threads, output_format):  # noqa: N802
        self.log.append(("initialize", state.value, count, output_format))
        self.sizes[state.value] = count
        return 0

    def nvjpegDecodeBatched(self, handle, state, sources, lengths, destinations, stream):  # noqa: N802
        self.batches += 1
        self.log.append(("decode", state.value, stream))
        if self.batches in self.refuse:
            return 8
        count = self.sizes[state.value]
        sources = np.ctypeslib.as_array((ctypes.c_uint64 * count).from_address(sources))
        lengths = np.ctypeslib.as_array((ctypes.c_uint64 * count).from_address(lengths))
        rows = np.ctypeslib.as_array((ctypes.c_uint64 * (8 * count)).from_address(destinations)).reshape(count, 8)
        for source, length, row in zip(sources.tolist(), lengths.tolist(), rows.tolist()):
            planes = [(address, pitch) for address, pitch in zip(row[:4], row[4:]) if address]
            pixels = simplejpeg.decode_jpeg(ctypes.string_at(source, length),
                                            colorspace="GRAY" if len(planes) == 1 else "RGB")
            for channel, (address, pitch) in enumerate(planes):
                plane = np.ascontiguousarray(pixels[:, :, channel])
                assert pitch == plane.shape[1]
                ctypes.memmove(address, plane.ctypes.data, plane.nbytes)
        return 0


def decoder(library, lanes=1):
    return hardware.HardwareDecoder(library, torch.device("cpu"), lanes, side=Side(library.log))


def cameras(sizes, seed=0):
    """Packed JPEG bytes and lengths of cameras of ``sizes`` = [(count, height, width)], and their pixels."""
    rng = np.random.default_rng(seed)
    pixels = [rng.integers(0, 255, (count, height, width, 3), np.uint8) for count, height, width in sizes]
    encoded = [[encode(image, "jpeg", 95) for image in camera] for camera in pixels]
    datas = [torch.from_numpy(np.frombuffer(b"".join(camera) or b"\0", np.uint8).copy()) for camera in encoded]
    return datas, [[len(image) for image in camera] for camera in encoded], encoded


def test_the_library_is_found_where_the_process_has_loaded_it():
    maps = ("7f00-7f10 r-xp 00000000 08:01 12 /usr/lib/libc.so.6\n"
            "7f20-7f30 r--p 00000000 00:00 0\n"
            "7f40-7f50 r-xp 00000000 08:01 99 /site/torchvision.libs/libnvjpeg-8a1b2c3d.so.13\n")
    assert hardware.library_path(maps) == "/site/torchvision.libs/libnvjpeg-8a1b2c3d.so.13"
    assert hardware.library_path(maps.splitlines()[0]) is None


def test_plane_tables_name_each_plane_and_its_pitch():
    rgb = hardware.plane_table(np.array([1000, 1000 + 3 * 6], np.uint64), 3, 2, 3)
    assert rgb.tolist() == [[1000, 1006, 1012, 0, 3, 3, 3, 0], [1018, 1024, 1030, 0, 3, 3, 3, 0]]
    grey = hardware.plane_table(np.array([64], np.uint64), 1, 4, 5)
    assert grey.tolist() == [[64, 0, 0, 0, 5, 0, 0, 0]]


@pytest.mark.parametrize("mode", [3, 1])
def test_each_group_of_cameras_is_decoded_into_its_own_stack(mode):
    # Cameras 0 and 2 share a size (one stack, camera 0's images first), camera 1 has its own, camera 3 has
    # no images: every image lands where its group's stack keeps it, as simplejpeg decodes it.
    datas, lengths, encoded = cameras([(3, 8, 12), (4, 16, 8), (2, 8, 12), (0, 8, 12)])
    library = Library()
    groups, sizes = [[0, 2], [1], [3]], [(8, 12), (16, 8), (8, 12)]
    stacks = hardware.decode_into_stacks(decoder(library), datas, lengths, groups, sizes, mode,
                                         torch.device("cpu"), None)
    assert [tuple(stack.shape) for stack in stacks] == [(5, mode, 8, 12), (4, mode, 16, 8), (0,)]
    colorspace = "GRAY" if mode == 1 else "RGB"
    for stack, group in zip(stacks, groups):
        want = [simplejpeg.decode_jpeg(image, colorspace=colorspace) for number in group for image in encoded[number]]
        assert all(np.array_equal(stack[slot].permute(1, 2, 0).numpy(), image) for slot, image in enumerate(want))
    scale = torch.tensor(np.float32(1 / 255))
    floats = hardware.decode_into_stacks(decoder(Library()), datas, lengths, groups, sizes, mode,
                                         torch.device("cpu"), scale)
    assert all(made.dtype == torch.float32 and torch.equal(made, stack * scale) for made, stack in zip(floats, stacks))
    formats = {entry[3] for entry in library.log if entry[0] == "initialize"}
    assert formats == {hardware.OUTPUT_Y if mode == 1 else hardware.OUTPUT_RGB}


def test_two_states_take_turns_and_a_state_waits_for_its_last_decode():
    # Batch n + 1 is issued while batch n decodes (the other state); a state is used again only after the
    # decode issued with it has finished, and it is initialised once per batch size, not per batch.
    datas, lengths, _ = cameras([(3, 8, 8)])
    library = Library()
    made = decoder(library)
    for _ in range(3):
        hardware.decode_into_stacks(made, datas, lengths, [[0]], [(8, 8)], 3, torch.device("cpu"), None)
    # the lane's events are 0 and 1 (one per state), each call's "ready" event 2, 3, 4: recorded on the
    # caller's stream (0), waited for by the lane's stream (7) before it decodes
    assert library.log[library.log.index(("record", 2, 0)):] == [
        ("record", 2, 0), ("device", "arrayio-nvjpeg_0"), ("initialize", 2000, 3, 3), ("wait", 7, 2),
        ("decode", 2000, 7), ("record", 0, 7),
        ("wait", 0, 0),
        ("record", 3, 0), ("initialize", 2001, 3, 3), ("wait", 7, 3), ("decode", 2001, 7), ("record", 1, 7),
        ("wait", 0, 1),
        ("record", 4, 0), ("synchronize", 0), ("wait", 7, 4), ("decode", 2000, 7), ("record", 0, 7),
        ("wait", 0, 0)]
    assert library.log[0] == ("create", hardware.BACKEND_HARDWARE)
    assert made.lanes[0].pending[0][-1] is datas  # the bytes the decode in flight reads are kept alive
    smaller, smaller_lengths, _ = cameras([(2, 8, 8)], seed=1)
    hardware.decode_into_stacks(made, smaller, smaller_lengths, [[0]], [(8, 8)], 3, torch.device("cpu"), None)
    assert library.log[-7:] == [("record", 5, 0), ("synchronize", 1), ("initialize", 2001, 2, 3), ("wait", 7, 5),
                                ("decode", 2001, 7), ("record", 1, 7), ("wait", 0, 1)]


def test_a_batch_is_cut_into_runs_that_lanes_decode_side_by_side():
    # 2 x 70 images over 4 lanes: 4 runs of 35, each its own nvJPEG call on its own stream from its own
    # thread, each stream first waiting for the caller's (the images' memory is its to hand out), and the
    # caller's stream then waiting for every lane.
    datas, lengths, encoded = cameras([(70, 8, 8), (70, 8, 8)])
    library = Library()
    threads = set()
    decode = library.nvjpegDecodeBatched
    # Every run waits until all four are decoding: a lane whose run ended before the last one was handed out
    # would otherwise take that run on its thread too (it did, once, on a loaded machine), and lanes that
    # decoded one after another would never all meet here.
    together, calls = threading.Barrier(4, timeout=20), []

    def noting_thread(*arguments):
        threads.add(threading.current_thread().name)
        calls.append(arguments)
        if len(calls) <= 4:  # the first batch's four runs
            together.wait()
        return decode(*arguments)
    library.nvjpegDecodeBatched = noting_thread
    stacks = hardware.decode_into_stacks(decoder(library, lanes=4), datas, lengths, [[0, 1]], [(8, 8)], 3,
                                         torch.device("cpu"), None)
    want = [simplejpeg.decode_jpeg(image) for camera in encoded for image in camera]
    assert all(np.array_equal(stacks[0][slot].permute(1, 2, 0).numpy(), image) for slot, image in enumerate(want))
    assert sorted(entry[2] for entry in library.log if entry[0] == "initialize") == [35] * 4
    assert sorted(entry[2] for entry in library.log if entry[0] == "decode") == [7, 8, 9, 10]
    ready = next(entry[1] for entry in library.log if entry[0] == "record" and entry[2] == 0)
    finished = [entry[1] for entry in library.log if entry[0] == "record" and entry[2] != 0]
    assert sorted(entry[1:] for entry in library.log if entry[0] == "wait") == \
        sorted([(0, event) for event in finished] + [(stream, ready) for stream in (7, 8, 9, 10)])
    assert len(threads) == 4 and len([entry for entry in library.log if entry[0] == "device"]) == 4
    few, few_lengths, _ = cameras([(40, 8, 8)])
    library.log.clear()
    hardware.decode_into_stacks(decoder(library, lanes=4), few, few_lengths, [[0]], [(8, 8)], 3,
                                torch.device("cpu"), None)
    assert [entry[2] for entry in library.log if entry[0] == "initialize"] == [40]  # too few to share out


def test_a_refused_batch_is_left_to_torchvision_and_its_state_initialised_again():
    datas, lengths, _ = cameras([(3, 8, 8)])
    library = Library(refuse={1})
    made = decoder(library)
    assert hardware.decode_into_stacks(made, datas, lengths, [[0]], [(8, 8)], 3, torch.device("cpu"), None) is None
    assert made.lanes[0].pending == [None, None] and made.lanes[0].shapes == [None, None]
    for _ in range(2):  # state 2001, then 2000 again: initialised anew after its failed batch
        assert hardware.decode_into_stacks(made, datas, lengths, [[0]], [(8, 8)], 3, torch.device("cpu"), None)
    assert [entry[1] for entry in library.log if entry[0] == "initialize"] == [2000, 2001, 2000]


def test_a_decoder_that_fails_is_left_for_torchvision_for_good(monkeypatch, caplog):
    datas, lengths, _ = cameras([(3, 8, 8)])
    library = Library()
    made = decoder(library)

    def failing(*arguments):
        raise RuntimeError("CUDA error: an illegal memory access was encountered")
    library.nvjpegDecodeBatched = failing
    assert hardware.decode_into_stacks(made, datas, lengths, [[0]], [(8, 8)], 3, torch.device("cpu"), None) is None
    assert isinstance(made.broken, RuntimeError) and "decoding through torchvision from now on" in caplog.text
    monkeypatch.setitem(hardware._DECODERS, 5, made)
    assert hardware.hardware_decoder(torch.device("cuda", 5)) is None


def test_bytes_it_cannot_address_go_to_torchvision():
    datas, lengths, _ = cameras([(3, 8, 8)])
    library = Library()
    made = decoder(library)
    strided = [torch.stack([datas[0], datas[0]], 1).reshape(-1)[::2]]  # the same bytes, not contiguous
    assert not strided[0].is_contiguous()
    assert hardware.decode_into_stacks(made, strided, lengths, [[0]], [(8, 8)], 3, torch.device("cpu"), None) is None
    short = [[*lengths[0][:-1], lengths[0][-1] + 1]]  # one byte past the packed bytes
    assert hardware.decode_into_stacks(made, datas, short, [[0]], [(8, 8)], 3, torch.device("cpu"), None) is None
    assert library.batches == 0


def test_a_gpu_without_a_hardware_decoder_and_the_switch_leave_decoding_to_torchvision(monkeypatch):
    with pytest.raises(hardware.NvjpegError, match="nvjpegCreateEx returned nvJPEG status 7"):
        decoder(Library(backend_status=7))
    monkeypatch.setenv(hardware.SWITCH, "torchvision")
    monkeypatch.setattr(hardware, "_load_library", lambda: pytest.fail("the switch is off: no library is loaded"))
    assert hardware.hardware_decoder(torch.device("cuda", 0)) is None


@pytest.mark.skipif(_cuda_and_torchvision() is not None, reason=str(_cuda_and_torchvision()))
def test_on_cuda_the_hardware_decoder_matches_torchvision_and_leaves_what_it_refuses_to_it(tmp_path):
    from PIL import Image
    from torchvision.io import ImageReadMode, decode_jpeg

    rng = np.random.default_rng(3)
    pictures = rng.integers(0, 255, (6, 24, 32, 3), np.uint8)
    for name, channels, options in (("baseline", 3, {}), ("progressive", 3, {"progressive": True}),
                                    ("grey", 1, {})):
        encoded = []
        for picture in pictures:
            target = tmp_path / "image.jpg"
            Image.fromarray(picture if channels == 3 else picture[:, :, 0]).save(target, quality=90, **options)
            encoded.append(target.read_bytes())
        path = tmp_path / f"{name}.kdb"
        with kdb.Writer(path) as writer:
            writer.add_episode(np.zeros((6, 2), np.float32), np.zeros((6, 1), np.float32), fps=10.0,
                               images={"front": [EncodedImage(data, "jpeg", 32, 24, channels) for data in encoded]})
        packed = collate(FrameDataset(path, decode="none").__getitems__(list(range(6))))
        got = plan_decode(packed, "cuda", image_format="uint8")()["image.front"]
        want = torch.stack(decode_jpeg([torch.frombuffer(bytearray(data), dtype=torch.uint8) for data in encoded],
                                       device="cuda", mode=ImageReadMode.RGB if channels == 3 else ImageReadMode.GRAY))
        assert got.shape == (6, channels, 24, 32) and torch.equal(got, want), name
    if any(card in torch.cuda.get_device_name() for card in ("A100", "H100", "H200", "B200")):
        assert hardware.hardware_decoder(torch.device("cuda")) is not None
