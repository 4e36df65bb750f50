"""Fixtures for the bloscpack tests: the reference package (bloscpack 0.16.0) behind its shim."""

from __future__ import annotations

import pytest
import references


@pytest.fixture(scope="session")
def reference():
    """bloscpack 0.16.0, importable on Python >= 3.10 once collections.MutableMapping exists again."""
    return references.bloscpack(pytest.importorskip)


@pytest.fixture(scope="session")
def reference_append(reference):
    """The reference's in-place append (it lives in bloscpack.append, not at top level)."""
    from bloscpack.append import append

    return append
