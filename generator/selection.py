"""The PR selection file: which case ids run in PR CI, and why each was chosen.

`e2egen select` writes it; the generator marks the listed cases `pr`.

    [[case]]
    id = "resnet50/conv2d/3x3-64/fwd/f16/nhwc/r0"
    why = "pairwise coverage: conv2d x f16"
"""
from __future__ import annotations

from pathlib import Path

from e2egen.generator.errors import CatalogueError, Location, Problem
from e2egen.generator.toml_reader import parse_toml


def read_selection(path: str | Path) -> dict[str, str]:
    """Case id -> reason, in file order."""
    path = Path(path)
    data = parse_toml(path.read_text(encoding="utf-8"), str(path))
    problems, selection = [], {}
    for i, entry in enumerate(data.get("case", [])):
        if not isinstance(entry, dict) or not isinstance(entry.get("id"), str):
            problems.append(Problem(Location(str(path)), f"case[{i}]", "expected a table with a string `id` (and `why`)"))
            continue
        selection[entry["id"]] = str(entry.get("why", ""))
    unknown = set(data) - {"case"}
    if unknown:
        problems.append(Problem(Location(str(path)), ", ".join(sorted(unknown)), "unknown key; valid: case"))
    if problems:
        raise CatalogueError(problems)
    return selection
