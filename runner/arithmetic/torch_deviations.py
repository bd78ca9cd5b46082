"""What torch's own kernels legitimately do below e2egen's default requirements: knowledge the tool ships.

Each entry of torch_deviations.toml (beside this file) states, for one device kind and the kernel paths
torch takes there (runner.kernel_paths: ATen's instruction set, the formats oneDNN gets; on CUDA, torch's
reduced-precision switches), the arithmetic measured (or documented) and its reason. It accepts a broken
requirement of torch's kernels only (impl "torch"), and only down to its `floor`: a user's kernel with the
same arithmetic still fails, and so does a torch that does worse than what was measured.
`e2egen accepted` lists them.
"""
from __future__ import annotations

import functools
import tomllib
from importlib import resources
from typing import Any, Mapping

from e2egen.runner.options import Requirements
from e2egen.runner.arithmetic.model import FORMAT_BITS
from e2egen.runner.arithmetic.requirements import Acceptance

TORCH_IMPL = "torch"  # the impl name of torch's own kernels (runner.kernels)
FILE = "torch_deviations.toml"
ENTRY_KEYS = ("device", "cells", "require", "floor", "when", "arithmetic", "reason", "measured")


def parse(data: Mapping[str, Any], where: str = FILE) -> tuple[Acceptance, ...]:
    """The entries of a deviations table; ValueError naming the entry and key when one is malformed."""
    entries = []
    requirement_keys = Requirements.catalogue_keys()
    for i, table in enumerate(data.get("deviation", [])):
        at = f"{where}: deviation[{i}]"
        unknown = sorted(set(table) - set(ENTRY_KEYS))
        missing = [key for key in ENTRY_KEYS if key not in table]
        if unknown or missing:
            raise ValueError(f"{at}: {'unknown key ' + unknown[0] if unknown else 'missing key ' + missing[0]}; "
                             f"keys: {', '.join(ENTRY_KEYS)}")
        if not table["require"] or any(key not in requirement_keys for key in table["require"]):
            raise ValueError(f"{at}: require = {table['require']!r}; valid: {', '.join(requirement_keys)}")
        if table["floor"] not in FORMAT_BITS:
            raise ValueError(f"{at}: floor = {table['floor']!r}; valid: {', '.join(FORMAT_BITS)}")
        when = tuple(sorted((str(name), tuple(str(v) for v in values)) for name, values in table["when"].items()))
        entries.append(Acceptance(device=table["device"], reason=table["reason"], requirements=tuple(table["require"]),
                                  impl=TORCH_IMPL, cells=table["cells"], floor=table["floor"], when=when,
                                  arithmetic=table["arithmetic"], measured=table["measured"], shipped=True))
    return tuple(entries)


@functools.lru_cache(maxsize=None)
def torch_deviations() -> tuple[Acceptance, ...]:
    """The deviations shipped with e2egen, read once."""
    text = (resources.files(__package__) / FILE).read_text(encoding="utf-8")
    return parse(tomllib.loads(text))


def accepted_for(impl: str, catalogue_entries: tuple[Acceptance, ...]) -> tuple[Acceptance, ...]:
    """What may excuse a broken requirement of `impl`: the catalogue's own [[accept]] entries first, then, for
    torch's kernels only, the deviations e2egen knows of."""
    return catalogue_entries + (torch_deviations() if impl == TORCH_IMPL else ())
