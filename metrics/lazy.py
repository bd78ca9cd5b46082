"""Package attributes loaded on first use (PEP 562).

metrics and runner export names whose modules import torch; loading them
lazily keeps `e2egen gen` (which needs only names and shapes) free of torch.
"""
from __future__ import annotations

import importlib
from typing import Any, Callable, Mapping


def lazy_exports(package: str, sources: Mapping[str, str], public: list[str], namespace: dict) -> tuple[Callable, Callable]:
    """__getattr__ and __dir__ for `package`: name -> its submodule in `sources`; other names are submodules."""

    def __getattr__(name: str) -> Any:
        if name in sources:
            value = getattr(importlib.import_module(f"{package}.{sources[name]}"), name)
        else:  # a submodule (metrics.fused_numba, runner.device, ...), as when the package imported them all
            try:
                value = importlib.import_module(f"{package}.{name}")
            except ModuleNotFoundError as err:
                if err.name != f"{package}.{name}":
                    raise
                raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        # Importing a submodule named like a function (metrics.compare, runner.run) binds the module
        # to the package attribute; the function replaces it.
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *public})

    return __getattr__, __dir__
