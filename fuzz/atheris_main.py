#!/usr/bin/env python3
"""Run one harness under atheris: ``ARRAYIO_FUZZ_FORMAT=F fuzz/atheris_main.py [libFuzzer flags] [corpus...]``.

arrayio is imported here first, inside atheris's instrumentation, so that the
fuzzer sees its coverage. The format comes from the environment because
libFuzzer re-runs this command line for -merge and -minimize_crash.
fuzz/run.py is the usual way to call this.
"""

import os
import sys

import _common

if __name__ == "__main__":
    format = os.environ.get("ARRAYIO_FUZZ_FORMAT", "")
    if format not in _common.HARNESSES:
        sys.exit(f"fuzz: set ARRAYIO_FUZZ_FORMAT to one of {', '.join(_common.HARNESSES)}")
    _common.main(format)
