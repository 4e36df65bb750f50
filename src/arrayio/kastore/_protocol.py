"""The registry protocol of kastore: open, info, validate, entries, demo (the keyed formats' hooks)."""

from __future__ import annotations

from .._keyed import keyed_hooks
from ._reader import load, loads
from ._writer import dump

open, validate, info, entries, demo, save_model = keyed_hooks(load, loads, dump, "demo.kas")  # noqa: A001 - the protocol names
