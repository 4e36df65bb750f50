"""What every harness shares: the allowed outcomes, the memory limit and the atheris entry point.

A harness module defines ``FORMAT`` and ``exercise(path, data)``, which drives
every public read path over one input (``path`` holds the same bytes as
``data``). The only allowed outcomes of ``check(format, data)`` are success
or an :class:`arrayio.FormatError` (plus the compatibility exceptions listed
in ``ALLOWED_EXTRA``); anything else propagates, and atheris reports it as a
finding. Hangs (over 1 s) and over-allocation (the address-space limit set by
:func:`limit_memory`) are findings too.
"""

from __future__ import annotations

import importlib
import operator
import os
import resource
import shutil
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

FUZZ_DIR = Path(__file__).resolve().parent
ROOT = FUZZ_DIR.parent
sys.path.insert(0, str(ROOT / "src"))

FORMATS = ("kastore", "kast", "bloscpack", "kdb", "pycauset")
# The paths around the readers (issue 19's campaign): LeRobot metadata and parquet ingest, the
# zarr/kerchunk/convert views of fuzzed files, the remote Source against a fuzzed loopback server.
# Their modules may name their allowed outcomes (ALLOWED) and build their seeds (seeds()).
AROUND = ("lerobot", "views", "remote")
HARNESSES = FORMATS + AROUND

# The address space one run may take above the process's size just before it is
#     HEADROOM_MIB + EXPANSION x the input's size.
# kastore/KAST readers are zero-copy or copy the file once or twice, so 128 MiB is the "small
# constant". The decoders have documented expansion bounds, and their limits follow them:
# bloscpack data may expand 32768:1 (bloscpack MAX_EXPANSION, zstd's run-length bound; the whole
# array, a chunk and a copy may be alive at once); kdb images decode to at most 1100 x their bytes or
# 64 MiB (kdb/_images.py MAX_EXPANSION, EXPANSION_FLOOR), held by Pillow, a converted copy and the
# array; the pycauset harness unpacks matrices of up to 64 MiB (UNPACK_BYTES below) and copies them
# for the view's scalar.
# The harnesses around the readers get the same bounds as the formats they drive: LeRobot images and
# video frames go through kdb's image limits (plus pyarrow's buffers); the views read every format
# (bloscpack's expansion; the zarr row blocks, at most 64 MiB, and a copy); the remote harness reads
# one small file.
HEADROOM_MIB = {"kastore": 128, "kast": 128, "bloscpack": 128, "kdb": 128 + 4 * 64, "pycauset": 128 + 3 * 64,
                "lerobot": 256 + 4 * 64, "views": 256 + 4 * 64, "remote": 256}
EXPANSION = {"kastore": 4, "kast": 4, "bloscpack": 3 * 32768, "kdb": 4 * 1100, "pycauset": 4,
             "lerobot": 4 * 1100, "views": 3 * 32768, "remote": 4}

# Seconds one input may take before it is a finding: 1 for the readers; the harnesses around them
# start pyarrow readers, zarr writers and HTTP exchanges, whose first runs on a loaded machine took 1 s.
TIMEOUT_S = {"lerobot": 5, "views": 5, "remote": 5}

# Largest input the fuzzer makes; the seeds are smaller than this.
MAX_LEN = 16384


def allowed(format: str, data: bytes, error: BaseException) -> bool:
    """Whether ``error``, raised by reading ``data`` as ``format``, is an allowed outcome."""
    from arrayio import FormatError

    # An empty keyed store is a FormatError that is also an EOFError (kastore's end of a stream).
    return isinstance(error, getattr(harness(format), "ALLOWED", FormatError))


def harness(format: str):
    """The harness module of ``format`` (fuzz/fuzz_<format>.py)."""
    if str(FUZZ_DIR) not in sys.path:
        sys.path.insert(0, str(FUZZ_DIR))
    return importlib.import_module(f"fuzz_{format}")


class Runner:
    """Runs one format's ``exercise`` over inputs, through a scratch file on a RAM disk when there is one."""

    def __init__(self, format: str, exercise: Callable[[str, bytes], None]) -> None:
        self.format = format
        self.exercise = exercise
        folder = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
        self.folder = tempfile.mkdtemp(prefix=f"arrayio-fuzz-{format}-", dir=folder)
        self.path = os.path.join(self.folder, "input")
        self.limited = False  # set by limit_memory
        self.hard_limit = resource.getrlimit(resource.RLIMIT_AS)[1]

    def limit_memory(self) -> int:
        """From now on cap each run's address space (see HEADROOM_MIB); returns the current size."""
        self.limited = True
        return address_space()

    def check(self, data: bytes) -> None:
        """Read ``data`` every way; return on an allowed outcome, raise the finding otherwise."""
        # A fresh inode per input: readers of the previous input may still map the old one.
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        with open(self.path, "wb") as handle:
            handle.write(data)
        if self.limited:
            # Measured before every run: worker threads and allocator arenas that appear late (a
            # thread pool's second worker, Blosc's own threads) must not eat into one run's headroom.
            limit = address_space() + HEADROOM_MIB[self.format] * 2**20 + EXPANSION[self.format] * len(data)
            resource.setrlimit(resource.RLIMIT_AS, (limit, self.hard_limit))
        try:
            self.exercise(self.path, data)
        except Exception as error:
            if not allowed(self.format, data, error):
                raise

    def close(self) -> None:
        """Remove the scratch folder (the harnesses around the readers leave datasets and outputs in it)
        and stop what the harness started (the remote harness's loopback server)."""
        shutil.rmtree(self.folder, ignore_errors=True)
        stop = getattr(harness(self.format), "close", None)
        if stop is not None:
            stop()


def address_space() -> int:
    """The process's current virtual size in bytes (every thread's stack and arena included)."""
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[0]) * resource.getpagesize()


def warm_up(runner: Runner, seeds: list[Path], count: int = 200) -> None:
    """Run up to ``count`` seeds (valid files first) so that lazy imports, thread pools and allocator
    arenas exist before the limit is set."""
    for seed in sorted(seeds, key=lambda path: not path.name.startswith("valid-"))[:count]:
        try:
            runner.check(seed.read_bytes())
        except Exception as error:  # noqa: BLE001 - a seed that is a finding is reported by the fuzzer itself
            print(f"fuzz: seed {seed} raises {type(error).__name__}: {error}", file=sys.stderr)


def seed_files(args: list[str]) -> list[Path]:
    """The files in the corpus folders named on a libFuzzer command line."""
    files = []
    for arg in args:
        if arg.startswith("-"):
            continue
        path = Path(arg)
        if path.is_dir():
            files.extend(sorted(p for p in path.iterdir() if p.is_file()))
        elif path.is_file():
            files.append(path)
    return files


_OPERATORS = (operator.lt, operator.le, operator.eq, operator.ne, operator.gt, operator.ge)
_TRACED = (int, float, str, bytes)


def patch_compare_tracing(atheris) -> Callable:
    """Route only scalar comparisons to atheris's tracer.

    atheris 3.0 keeps a reference to every comparison result that is not a
    plain bool: each numpy array compare (``offsets > limit``) leaked its
    result, about 3 KB per run here, until the address-space limit tripped.
    Comparisons of arrays are decided here instead (no cmp feedback, which
    libFuzzer cannot use for arrays anyway); the instrumented code looks the
    tracer up on the module at every call, so replacing it is enough, once
    ``atheris.Fuzz`` has bound the native one (so: from the first run).
    """
    native = atheris._trace_cmp
    if getattr(native, "arrayio_patched", False):
        return native

    def trace_cmp(left, right, op, counter, left_is_const):
        if isinstance(left, _TRACED) and isinstance(right, _TRACED):
            return native(left, right, op, counter, left_is_const)
        return _OPERATORS[op](left, right)

    trace_cmp.arrayio_patched = True
    atheris._trace_cmp = trace_cmp
    return trace_cmp


def main(format: str) -> None:
    """The atheris entry point of a harness: ``python fuzz/fuzz_<format>.py [libFuzzer args] corpus...``."""
    import atheris
    import blosc  # noqa: F401

    # Third-party code first, uninstrumented; then arrayio, instrumented for coverage.
    import numpy  # noqa: F401
    import PIL.Image
    import PIL.JpegImagePlugin
    import PIL.PngImagePlugin  # noqa: F401
    with atheris.instrument_imports(include=["arrayio"]):
        import arrayio  # noqa: F401
        module = harness(format)
        if format in FORMATS:
            importlib.import_module(f"arrayio.{format}")
    runner = Runner(format, module.exercise)
    warm_up(runner, seed_files([str(FUZZ_DIR / "seeds" / format), *sys.argv[1:]]))
    size = runner.limit_memory()
    print(f"fuzz: {format}: each run may add {HEADROOM_MIB[format]} MiB + {EXPANSION[format]} x its input to the "
          f"address space ({size / 2**20:.0f} MiB, {threading.active_count()} threads after warm-up)",
          file=sys.stderr)

    def one_input(data: bytes) -> None:
        if not getattr(atheris._trace_cmp, "arrayio_patched", False):
            patch_compare_tracing(atheris)
        runner.check(data)

    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()


def read_mapped(path: str, data: bytes, format_name: str, open_mapped: Callable[[str], object],
                read: Callable[[object], None]) -> bool:
    """What every harness does first: detect the bytes, validate the file (a list of Problems), then
    ``read`` the mapped open (through the registry when it detects the format) and ``arrayio.info``.
    False when that open raised a FormatError: info, entries and cat begin with the same open."""
    import arrayio

    arrayio.detect(data)
    problems = arrayio.validate(path)
    assert isinstance(problems, list) and all(isinstance(problem, arrayio.Problem) for problem in problems), problems
    try:
        read(arrayio.open(path) if arrayio.detect(path) == format_name else open_mapped(path))
    except arrayio.FormatError:
        return False
    arrayio.info(path)
    return True
