"""`--json` on e2egen's commands: one JSON document on stdout instead of the text, for scripts and CI.

Every document names its schema and version first ("schema": "e2egen.list/1"); docs/reference/json-output.md lists each
document's fields. Removing or renaming a field, or changing its meaning, makes a new version; adding a field
does not. Numbers that are not finite are written as null (JSON has no NaN). A user error under --json is a
document too, {"schema": "e2egen.error/1", "errors": [...]}, still with exit status 2.
"""
from __future__ import annotations

import json
import math
import sys
from typing import Any

from e2egen.errors import UserError

SCHEMA_VERSION = 1


def json_argument(parser) -> None:
    parser.add_argument("--json", action="store_true",
                        help="print one JSON document instead of text (fields: docs/reference/json-output.md)")


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def document(kind: str, **fields: Any) -> dict[str, Any]:
    return {"schema": f"e2egen.{kind}/{SCHEMA_VERSION}", **_finite(fields)}


def emit(kind: str, **fields: Any) -> None:
    """Print the `kind` document (one JSON object, indented) on stdout."""
    print(json.dumps(document(kind, **fields), indent=2, ensure_ascii=False, allow_nan=False))


def arithmetic_findings(arithmetic) -> dict[str, Any]:
    """A kernel's measured arithmetic (runner.arithmetic.model.Arithmetic), one form in `explain` and `arithmetic`:
    its description, each finding by name under "properties" (with the derived `accumulator` and `flushes`), and
    under "evidence" what the probes ran on and saw but could not pin down."""
    table = arithmetic.to_table()
    evidence = {"probed_with": table.pop("probed_with"), "notes": table.pop("notes"),
                "unexplained": table.pop("unexplained")}
    properties = {"accumulator": arithmetic.acc_name, "flushes": arithmetic.flushes, **table}
    return {"description": arithmetic.describe(), "properties": properties, "evidence": evidence}


def error_fields(err: UserError) -> list[dict[str, Any]]:
    """A user error as a list of {file, line, key, message}: a catalogue's every problem, else the one error."""
    problems = getattr(err, "problems", None)
    if problems:
        return [{"file": p.location.path, "line": p.location.line, "key": p.key or None, "message": p.message}
                for p in problems]
    return [{"file": err.where, "line": None, "key": err.key, "message": err.message}]


def emit_error(err: UserError) -> None:
    emit("error", errors=error_fields(err))
    sys.stdout.flush()
