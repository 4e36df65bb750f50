"""pytest plugin for make_seeds.py: every byte buffer a reader opens during the tests becomes a crafted seed.

Every format reads through ``arrayio._binary.Source``, so wrapping its
constructor sees the golden files, the corpora and each malformed case the
tests build, whichever load mode they use.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path


def pytest_configure(config) -> None:
    """Wrap Source.__init__ to copy each buffer it is given into $ARRAYIO_SEED_OUT."""
    from arrayio import _binary

    out = Path(os.environ["ARRAYIO_SEED_OUT"])
    limit = int(os.environ["ARRAYIO_SEED_MAX_LEN"])
    original = _binary.Source.__init__

    def recording_init(self, data, *args, **kwargs) -> None:
        original(self, data, *args, **kwargs)
        buffer = self.buffer
        if buffer is not None and 0 < len(buffer) <= limit:
            raw = bytes(buffer)
            (out / f"crafted-{hashlib.sha1(raw).hexdigest()[:16]}").write_bytes(raw)

    _binary.Source.__init__ = recording_init
