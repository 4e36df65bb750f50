"""The names bloscpack 0.16.0 deprecated, kept as warning aliases of the current functions."""

from __future__ import annotations

import warnings
from typing import Any, Callable

__all__ = ["deprecated_alias"]


def deprecated_alias(function: Callable[..., Any], old_name: str) -> Callable[..., Any]:
    """``function`` under the name bloscpack deprecated in 0.16.0, warning as bloscpack does."""
    def alias(*args: Any, **kwargs: Any) -> Any:
        warnings.warn(f"{old_name} is deprecated since bloscpack 0.16.0; use {function.__name__}",
                      DeprecationWarning, stacklevel=2)
        return function(*args, **kwargs)
    alias.__name__ = alias.__qualname__ = old_name
    alias.__doc__ = f"Deprecated name of :func:`{function.__name__}`."
    alias.__wrapped__ = function  # type: ignore[attr-defined]
    return alias
