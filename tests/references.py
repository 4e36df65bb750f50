"""The reference packages as the tests import them: bloscpack 0.16 needs ``collections.MutableMapping``
back on Python >= 3.10, and importing pycauset creates ``./.pycauset/``, so it is imported from a
scratch folder that also becomes its backing folder. ``importer`` is ``pytest.importorskip`` in
fixtures that skip when the package is missing."""

from __future__ import annotations

import collections
import collections.abc
import importlib
import os
import tempfile
import warnings
from collections.abc import Callable
from types import ModuleType


def bloscpack(importer: Callable[[str], ModuleType] = importlib.import_module) -> ModuleType:
    """bloscpack 0.16.0."""
    if not hasattr(collections, "MutableMapping"):
        collections.MutableMapping = collections.abc.MutableMapping  # type: ignore[attr-defined]
    return importer("bloscpack")


def pycauset(folder: str | None = None, importer: Callable[[str], ModuleType] = importlib.import_module) -> ModuleType:
    """pycauset 0.6.1, its backing folder ``folder`` (default: a new scratch folder)."""
    folder = folder or tempfile.mkdtemp(prefix="pycauset-backing-")
    previous = os.getcwd()
    os.chdir(folder)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            module = importer("pycauset")
        module.set_backing_dir(folder)
    finally:
        os.chdir(previous)
    return module
