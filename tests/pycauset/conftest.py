"""Fixtures of the pycauset tests: the reference package, imported away from the checkout.

Importing pycauset creates ``./.pycauset/`` for its backing files, so it is
imported from a temporary folder and pointed at one.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import references


@pytest.fixture(scope="session")
def reference():
    """The pycauset 0.6.1 package (skips when it is not installed)."""
    return references.pycauset(importer=pytest.importorskip)


@pytest.fixture(scope="session")
def ref_numpy(reference):
    """A function turning a pycauset object into a numpy array."""
    def convert(obj) -> np.ndarray:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return np.asarray(reference.to_numpy(obj, allow_huge=True))
    return convert
