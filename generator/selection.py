"""The PR selection file: which case ids run in PR CI, and why each was chosen.

`e2egen select` writes it; the generator marks the listed cases `pr`.

    [[case]]
    id = "resnet50/conv2d/3x3-64/fwd/f16/nhwc/r0"
    why = "pairwise coverage: conv2d x f16"

Checked as a catalogue is (TomlReader): each problem at its line, with its key. An id that is not a case id
at all (not seven parts) is an error; a well-formed id the catalogue no longer has is stale, not wrong: `gen`
warns and `e2egen select` rewrites the file (refusing it here would stop `select` from loading the catalogue).
"""
from __future__ import annotations

from pathlib import Path

from e2egen.errors import closest
from e2egen.generator.case_id import CaseId
from e2egen.generator.errors import CatalogueError
from e2egen.generator.toml_lines import key_lines
from e2egen.generator.toml_reader import TomlReader, parse_toml, read_toml_text

TOP_KEYS = ("case",)
ENTRY_KEYS = ("id", "why")


def read_selection(path: str | Path) -> dict[str, str]:
    """Case id -> reason, in file order; CatalogueError with every problem, each at its line."""
    name = str(path)
    text = read_toml_text(path, "PR selection file")
    data = parse_toml(text, name)
    reader = TomlReader(name, key_lines(text))
    reader.unknown_keys(data, TOP_KEYS, ())
    selection: dict[str, str] = {}
    first: dict[str, tuple] = {}
    for i, entry in enumerate(reader.tables(data.get("case"), ("case",))):
        key_path = ("case", i)
        reader.unknown_keys(entry, ENTRY_KEYS, key_path)
        if "id" not in entry:
            if not closest("id", [k for k in entry if k not in ENTRY_KEYS]):  # else reported as the misspelling
                reader.problem(key_path, 'missing: expected id = "suite/op/config/direction/dtype/layout/range"')
            continue
        case_id = reader.string(entry["id"], key_path + ("id",))
        why = reader.string(entry.get("why", ""), key_path + ("why",))
        if case_id is None:
            continue
        try:
            CaseId.parse(case_id)
        except ValueError as err:
            reader.problem(key_path + ("id",), str(err))
            continue
        if case_id in first:
            reader.problem(key_path + ("id",), f"case {case_id!r} is selected twice (first at {reader.location(first[case_id])})")
            continue
        first[case_id] = key_path + ("id",)
        selection[case_id] = why or ""
    if reader.problems:
        raise CatalogueError(reader.problems)
    return selection
