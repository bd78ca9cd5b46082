"""Reference tables of the docs generated from the code, so that they cannot drift from it.

The ops table of docs/reference/ops.md is rendered from the op registry (`e2egen.runner.ops.OPS`, torch-free
specs): one row per registered op with its family, directions, dtypes, layouts and catalogue parameters
(required ones, then optional ones with their defaults). It lives between two HTML comments in the page:

    python -m e2egen.reference_tables --write    # rewrite the table in docs/reference/ops.md
    python -m e2egen.reference_tables --check    # exit 1, naming the difference, when the page is stale

Nothing here imports torch.
"""
from __future__ import annotations

import argparse
import difflib
import sys
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

START = "<!-- ops-table:start -->"
END = "<!-- ops-table:end -->"
OPS_PAGE = Path(__file__).resolve().parents[1] / "docs" / "reference" / "ops.md"
_OPS_PACKAGE = "e2egen.runner.ops."


def registered_ops() -> Mapping[str, Any]:
    """The op registry: name -> spec, in the order `e2egen` lists them."""
    from e2egen.runner.ops import OPS

    return OPS


def family_of(op: Any) -> str:
    """The op's family: its package under runner/ops/ (`product_sum`, `attention`, ...), else its module."""
    module = type(op).__module__
    if module.startswith(_OPS_PACKAGE):
        return module[len(_OPS_PACKAGE):].split(".")[0]
    return module


def _toml_value(value: Any) -> str:
    """A default as a catalogue would spell it."""
    if value is None or value == "":
        return "none"  # no value: the op decides (an empty string in a catalogue is refused)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    return repr(value)


def _codes(values: Iterable[str]) -> str:
    return ", ".join(f"`{v}`" for v in values)


def _accepts_more_layouts(op: Any) -> bool:
    """Whether the op's layouts are data (it overrides Op.layout_problem and so accepts more than it lists)."""
    from e2egen.runner.ops.base import Op

    return type(op).layout_problem is not Op.layout_problem


def shape_keys(op: Any) -> str:
    """The op's catalogue parameters: required ones, then the optional ones with their defaults."""
    required = _codes(op.param_names)
    optional = ", ".join(f"`{key}` = {_toml_value(default)}" for key, default in op.optional_params.items())
    if required and optional:
        return f"required: {required}; optional: {optional}"
    return f"required: {required}" if required else (f"optional: {optional}" if optional else "—")


def ops_rows(ops: Mapping[str, Any] | None = None) -> list[tuple[str, ...]]:
    """One row per registered op: name, family, directions, dtypes, layouts, shape keys."""
    ops = registered_ops() if ops is None else ops
    rows = []
    for name, op in ops.items():
        layouts = _codes(op.layouts)
        if _accepts_more_layouts(op):
            layouts += " (and more: see its notes)"
        rows.append((f"`{name}`", f"`{family_of(op)}`", _codes(op.directions), _codes(op.dtypes), layouts,
                     shape_keys(op)))
    return rows


def ops_table(ops: Mapping[str, Any] | None = None) -> str:
    """The Markdown table of the registered ops (no trailing newline)."""
    header = ("op", "family", "directions", "dtypes", "layouts", "catalogue keys (config)")
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in ops_rows(ops)]
    return "\n".join(lines)


class MarkersMissing(ValueError):
    """The page has no `<!-- ops-table:start -->` ... `<!-- ops-table:end -->` region."""


def _region(text: str) -> tuple[int, int]:
    start = text.find(START)
    end = text.find(END, start + len(START)) if start >= 0 else -1
    if start < 0 or end < 0:
        raise MarkersMissing(f"expected the markers {START} and {END}, in that order")
    return start + len(START), end


def table_in(text: str) -> str:
    """The table between the markers of a page's text, stripped of surrounding blank lines."""
    begin, end = _region(text)
    return text[begin:end].strip("\n")


def with_table(text: str, table: str) -> str:
    """The page's text with the region between the markers replaced by `table`."""
    begin, end = _region(text)
    return text[:begin] + "\n" + table + "\n" + text[end:]


def ops_named(table: str) -> list[str]:
    """The op names of a rendered table's rows (its first column, without the backquotes)."""
    names = []
    for line in table.splitlines()[2:]:
        cells = line.split("|")
        if len(cells) > 2:
            names.append(cells[1].strip().strip("`"))
    return names


def difference(page_text: str, ops: Mapping[str, Any] | None = None) -> list[str]:
    """What differs between the page's table and the registry's rendering (empty: nothing)."""
    ops = registered_ops() if ops is None else ops
    have, want = table_in(page_text), ops_table(ops)
    if have == want:
        return []
    problems = []
    listed = ops_named(have)
    missing = [name for name in ops if name not in listed]
    extra = [name for name in listed if name not in ops]
    if missing:
        problems.append(f"ops registered but not in the table: {', '.join(missing)}")
    if extra:
        problems.append(f"ops in the table but not registered: {', '.join(extra)}")
    diff = list(difflib.unified_diff(have.splitlines(), want.splitlines(), "page", "registry", lineterm="", n=0))
    problems.append("table differs from the registry's rendering:")
    problems += diff[:40] + ([f"... ({len(diff) - 40} more diff lines)"] if len(diff) > 40 else [])
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m e2egen.reference_tables", description=__doc__.split("\n\n")[0])
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--write", action="store_true", help="rewrite the ops table in the page")
    action.add_argument("--check", action="store_true", help="exit 1, naming the difference, when the page is stale")
    action.add_argument("--print", action="store_true", help="print the table")
    parser.add_argument("--file", type=Path, default=OPS_PAGE, help=f"the page (default: {OPS_PAGE})")
    args = parser.parse_args(argv)
    if args.print:
        print(ops_table())
        return 0
    try:
        text = args.file.read_text(encoding="utf-8")
        if args.write:
            new = with_table(text, ops_table())
            if new != text:
                from e2egen.files import write_text_atomically

                write_text_atomically(args.file, new)
                print(f"wrote the ops table ({len(registered_ops())} ops) into {args.file}")
            else:
                print(f"{args.file}: the ops table is current")
            return 0
        problems = difference(text)
    except (OSError, MarkersMissing) as error:
        print(f"error: {args.file}: {error}", file=sys.stderr)
        return 2
    if problems:
        print(f"{args.file}: the ops table is stale; regenerate it: python -m e2egen.reference_tables --write",
              file=sys.stderr)
        for line in problems:
            print(line, file=sys.stderr)
        return 1
    print(f"{args.file}: the ops table is current ({len(registered_ops())} ops)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
