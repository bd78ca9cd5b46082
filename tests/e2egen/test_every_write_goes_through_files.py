"""Issue 46, the class behind the planted-link and overwritten-input findings: every file the shipped package
writes goes through e2egen.files (renamed into place, or appended to with O_NOFOLLOW; never an input the command
reads). A new `open(path, "w")`, `Path.write_text` or `os.open` anywhere else fails here, naming its line."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE_FOLDERS = ("e2egen", "generator", "metrics", "runner", "nightly", "studies")  # pyproject's package-dir
WRITERS_HOME = ROOT / "e2egen" / "files.py"
# (file, what) that may stay: the CLI points stdout at /dev/null after a broken pipe (nothing is created).
ALLOWED = {("e2egen/cli.py", "os.open")}


def _mode(call: ast.Call, position: int) -> str | None:
    if len(call.args) > position and isinstance(call.args[position], ast.Constant):
        return str(call.args[position].value)
    for keyword in call.keywords:
        if keyword.arg == "mode" and isinstance(keyword.value, ast.Constant):
            return str(keyword.value.value)
    return None


def _writes(tree: ast.AST):
    """(line, what) for each call in `tree` that writes a file by itself."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in ("write_text", "write_bytes"):
            yield node.lineno, f"Path.{func.attr}"
        elif isinstance(func, ast.Attribute) and func.attr == "open" and isinstance(func.value, ast.Name) \
                and func.value.id == "os":
            yield node.lineno, "os.open"
        elif isinstance(func, ast.Name) and func.id == "open":
            mode = _mode(node, 1)
            if mode is not None and set(mode) & set("wax+"):
                yield node.lineno, f"open(..., {mode!r})"
        elif isinstance(func, ast.Attribute) and func.attr == "open":  # Path.open(mode)
            mode = _mode(node, 0)
            if mode is not None and set(mode) & set("wax+"):
                yield node.lineno, f".open({mode!r})"


def test_the_detector_finds_each_kind_of_write():
    source = ("open(p, 'w'); open(p, mode='a'); Path(p).open('x'); p.write_text('t'); p.write_bytes(b'');"
              "os.open(p, 0); open(p); open(p, 'rb'); p.read_text()")
    assert [what for _, what in _writes(ast.parse(source))] == [
        "open(..., 'w')", "open(..., 'a')", ".open('x')", "Path.write_text", "Path.write_bytes", "os.open"]


def test_the_package_writes_files_only_through_e2egen_files():
    found = []
    for folder in PACKAGE_FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path == WRITERS_HOME:
                continue
            name = path.relative_to(ROOT).as_posix()
            for line, what in _writes(ast.parse(path.read_text(encoding="utf-8"))):
                if (name, what) not in ALLOWED:
                    found.append(f"{name}:{line}: {what}")
    assert found == [], "write through e2egen.files (write_text_atomically, open_appending):\n" + "\n".join(found)
