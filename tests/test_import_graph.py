"""The shape of the code, read from its imports (issue 41): what would let the op families tangle again fails here.

- no import cycle of more than MAX_CYCLE modules;
- no private name (leading underscore) imported from another package folder;
- the core (the runner outside its families, metrics, generator, nightly) never imports an op family, the
  registry excepted; a family imports another family's spec only (studies and the CLI sit on top: they may use a
  family's kernels);
- nothing in runner/ imports an e2egen module inside a function, except the registry's one deferred import;
- an op family's spec modules load without torch.
"""
from __future__ import annotations

import ast
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import REPO

MAX_CYCLE = 5
PACKAGE_DIRS = {"runner": "e2egen.runner", "metrics": "e2egen.metrics", "generator": "e2egen.generator",
                "nightly": "e2egen.nightly", "studies": "e2egen.studies", "e2egen": "e2egen"}
FAMILIES = REPO / "runner" / "ops"
# Modules of a family that describe it without torch, and that other families may import.
SPEC_MODULES = ("spec", "params", "conv", "gemm", "gemm_gemm", "conv_gemm", "conv_layouts")
REGISTRY = "e2egen.runner.ops"
CORE = ("e2egen.runner", "e2egen.metrics", "e2egen.generator", "e2egen.nightly")


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    names: tuple[str, ...]
    deferred: bool  # inside a function (not at module level, nor under `if TYPE_CHECKING:`)
    line: int


def module_name(path: Path) -> str:
    relative = path.relative_to(REPO).with_suffix("")
    parts = list(relative.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    top = PACKAGE_DIRS[parts[0]]
    return ".".join([top, *parts[1:]]) if parts[0] != "e2egen" else ".".join(parts)


def source_files() -> dict[str, Path]:
    files = {}
    for folder in PACKAGE_DIRS:
        for path in (REPO / folder).rglob("*.py"):
            files[module_name(path)] = path
    return files


MODULES = source_files()


def resolve(module: str, node: ast.ImportFrom | ast.Import) -> list[tuple[str, tuple[str, ...]]]:
    """(imported module, names taken from it) for one import statement, e2egen modules only."""
    if isinstance(node, ast.Import):
        return [(alias.name, ()) for alias in node.names if alias.name.startswith("e2egen")]
    if node.level:
        base = module.split(".") if MODULES[module].name == "__init__.py" else module.split(".")[:-1]
        base = base[:len(base) - node.level + 1]
        target = ".".join([*base, *([node.module] if node.module else [])])
    else:
        target = node.module or ""
    if not target.startswith("e2egen"):
        return []
    found = []
    for alias in node.names:
        submodule = f"{target}.{alias.name}"
        found.append((submodule, ()) if submodule in MODULES else (target, (alias.name,)))
    return found


def edges() -> list[Edge]:
    found = []
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text())
        found.extend(_edges_under(module, tree, deferred=False))
    return found


def _edges_under(module: str, node: ast.AST, deferred: bool) -> list[Edge]:
    found = []
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.Import, ast.ImportFrom)):
            for target, names in resolve(module, child):
                while target not in MODULES and "." in target:
                    target = target.rpartition(".")[0]
                if target in MODULES and target != module:
                    found.append(Edge(module, target, names, deferred, child.lineno))
        elif isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
            continue  # typing only: never runs
        else:
            inner = deferred or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            found.extend(_edges_under(module, child, inner))
    return found


EDGES = edges()


def family_of(module: str) -> str | None:
    parts = module.split(".")
    if parts[:3] == ["e2egen", "runner", "ops"] and len(parts) >= 4 and (FAMILIES / parts[3]).is_dir():
        return parts[3]
    return None


def is_spec(module: str) -> bool:
    """A family's package itself, or one of its torch-free description modules."""
    return family_of(module) is not None and (module.count(".") == 3 or module.rsplit(".", 1)[-1] in SPEC_MODULES)


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            found.append(sorted(component))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(10_000, limit))
    try:
        for node in sorted(graph):
            if node not in index:
                visit(node)
    finally:
        sys.setrecursionlimit(limit)  # the TOML reader's nesting check relies on the default
    return found


def test_no_import_cycle_is_larger_than_a_handful_of_modules():
    graph: dict[str, set[str]] = {}
    for edge in EDGES:
        graph.setdefault(edge.source, set()).add(edge.target)
    largest = max(strongly_connected(graph), key=len)
    assert len(largest) <= MAX_CYCLE, f"an import cycle of {len(largest)} modules: {largest}"


def test_the_cycle_check_finds_a_cycle():
    assert max(map(len, strongly_connected({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}))) == 3


def test_no_private_name_is_imported_from_another_package():
    def package(module: str) -> str:
        return module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]

    crossing = [f"{MODULES[e.source].relative_to(REPO)}:{e.line} imports {name} from {e.target}"
                for e in EDGES for name in e.names
                if name.startswith("_") and not name.startswith("__") and package(e.source) != package(e.target)]
    assert not crossing, "\n".join(crossing)


def test_the_core_never_imports_an_op_family():
    core = [e for e in EDGES if e.source.startswith(CORE) and family_of(e.source) is None
            and family_of(e.target) is not None and e.source != REGISTRY]
    assert not core, "\n".join(f"{MODULES[e.source].relative_to(REPO)}:{e.line} imports {e.target}" for e in core)


def test_a_family_imports_only_the_specs_of_another_family():
    crossing = [e for e in EDGES if family_of(e.source) and family_of(e.target)
                and family_of(e.source) != family_of(e.target) and not is_spec(e.target)]
    assert not crossing, "\n".join(f"{MODULES[e.source].relative_to(REPO)}:{e.line} imports {e.target}" for e in crossing)


def test_the_runner_defers_no_import_but_the_registrys():
    deferred = [e for e in EDGES if e.deferred and e.source.startswith("e2egen.runner")]
    assert not deferred, "\n".join(f"{MODULES[e.source].relative_to(REPO)}:{e.line} imports {e.target} inside a function"
                                   for e in deferred)


@pytest.mark.parametrize("family", sorted(p.name for p in FAMILIES.iterdir() if (p / "__init__.py").exists()))
def test_a_familys_spec_loads_without_torch(family):
    specs = [m for m in MODULES if family_of(m) == family and is_spec(m)]
    code = ("import sys, importlib\n"
            f"for name in {specs!r}: importlib.import_module(name)\n"
            "print('torch' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert result.stdout.strip() == "False", f"{family}'s spec modules load torch"
