"""Optional packages: every import of one goes through :func:`require`, whose error names the extra
that installs the package and the command that installs it from a checkout (arrayio is not on PyPI).

``MODULES`` is the one table of which extra holds which module; ``tests/test_optional.py`` checks
each row against ``pyproject.toml`` (the distribution really is in that extra), so a hint can never
send a user round in a loop again.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import NamedTuple

from .errors import MissingDependencyError

__all__ = ["MODULES", "Provider", "install_hint", "missing", "require"]


class Provider(NamedTuple):
    """Where a top-level module comes from: its distribution on PyPI and the arrayio extra holding it."""

    distribution: str
    extra: str | None  # None: in no extra (it must match another package's build), installed by hand


MODULES: dict[str, Provider] = {
    "obstore": Provider("obstore", "remote"),
    "fsspec": Provider("fsspec", "remote"),
    "aiohttp": Provider("aiohttp", "remote"),
    "s3fs": Provider("s3fs", "remote"),
    "gcsfs": Provider("gcsfs", "remote"),
    "adlfs": Provider("adlfs", "remote"),
    "zarr": Provider("zarr", "zarr"),
    "xarray": Provider("xarray", "zarr"),
    "dask": Provider("dask", "dask"),
    "distributed": Provider("distributed", "dask"),
    "torch": Provider("torch", "torch"),
    "torchvision": Provider("torchvision", None),
    "av": Provider("av", "video"),
    "pyarrow": Provider("pyarrow", "lerobot"),
    "pandas": Provider("pandas", "lerobot"),
    "h5py": Provider("h5py", "hdf5"),
    "matplotlib": Provider("matplotlib", "plot"),
    "simplejpeg": Provider("simplejpeg", "fast"),
    "zlib_ng": Provider("zlib-ng", "fast"),
    # the extras of the ecosystem views (VirtualiZarr/Icechunk, tskit/tszip, Blosc2)
    "virtualizarr": Provider("virtualizarr", "virtual"),
    "icechunk": Provider("icechunk", "virtual"),
    "tskit": Provider("tskit", "tskit"),
    "tszip": Provider("tszip", "tskit"),
    "blosc2": Provider("blosc2", "blosc2"),
}


def install_hint(module: str | None) -> str:
    """How to install the package that provides ``module``: its extra, from the arrayio folder
    (every extra when the module is not known)."""
    top = (module or "").partition(".")[0]
    provider = MODULES.get(top)
    if provider is not None and provider.extra is None:
        return f"pip install {provider.distribution} (the build that matches your torch)"
    extra = provider.extra if provider is not None else "all"
    return f"from the arrayio folder: pip install '.[{extra}]'" + ("" if extra == "all" else
                                                                    " ('.[all]' installs every extra)")


def missing(module: str, feature: str) -> MissingDependencyError:
    """The error for ``feature`` needing ``module``, which is not installed."""
    top = module.partition(".")[0]
    return MissingDependencyError(f"{feature} needs the Python package {MODULES.get(top, Provider(top, None))[0]!r}, "
                                  f"which is not installed; {install_hint(top)}", name=top)


def require(module: str, feature: str) -> ModuleType:
    """Import ``module`` for ``feature`` (e.g. "reading URLs"); if it is missing, say which extra installs it."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as error:
        if error.name is None or error.name.partition(".")[0] != module.partition(".")[0]:
            raise  # the module is there but one of its own imports is not: its message is the truth
        raise missing(module, feature) from None
