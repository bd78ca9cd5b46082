"""Plugins load through pytest's own mechanisms, and the layers import only downwards.

The generated conftest loads only the case runner (e2egen.generator.plugin): a
PR run of the suite imports nothing of e2egen.nightly. The nightly sweep adds
its recorder on pytest's command line (-p e2egen.nightly.recorder).
Layering: e2egen (CLI, diagnose) -> nightly -> generator -> runner -> metrics.
"""
from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import REPO, run_cli

# A plugin of its own (no conftest), given with -p: at the end of the session it
# writes which e2egen modules the pytest process imported.
PROBE = '''
import json
import os
import sys

import pytest


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session):
    loaded = sorted(m for m in sys.modules if m == "e2egen" or m.startswith("e2egen."))
    with open(os.environ["E2E_PROBE_OUT"], "w", encoding="utf-8") as f:
        json.dump({"modules": loaded, "plugins": sorted(n for n, _ in session.config.pluginmanager.list_name_plugin())}, f)
'''

FAST_CASES = 3


@pytest.fixture(scope="module")
def shipped_suite(tmp_path_factory):
    """The shipped catalogue's suite, generated once, and a -k expression selecting its smallest PR cases."""
    root = tmp_path_factory.mktemp("shipped")
    out = root / "build" / "e2e"
    result = run_cli("gen", str(REPO / "configs.toml"), "--out", str(out))
    assert result.returncode == 0, result.stderr
    cases = json.loads((out / "manifest.json").read_text(encoding="utf-8"))["cases"]
    smallest = sorted((c for c in cases if c["pr"]), key=lambda c: (c["flops"], c["id"]))[:FAST_CASES]
    assert len(smallest) == FAST_CASES
    (root / "probe").mkdir()
    (root / "probe" / "e2e_import_probe.py").write_text(textwrap.dedent(PROBE), encoding="utf-8")
    return root, out, " or ".join(c["id"] for c in smallest)


def run_probed(root: Path, out: Path, *args: str) -> tuple[subprocess.CompletedProcess, dict]:
    """pytest on the generated suite from `root`, with the probe plugin; its report of what was imported."""
    report = root / "probe.json"
    report.unlink(missing_ok=True)
    # Only the probe's folder on the path: the project's folders must not be importable as top-level names.
    env = {**os.environ, "PYTHONPATH": str(root / "probe"), "E2E_PROBE_OUT": str(report)}
    result = subprocess.run([sys.executable, "-m", "pytest", str(out), "-q", "-p", "no:cacheprovider",
                             "-p", "e2e_import_probe", "--e2e-device", "cpu", *args],
                            cwd=root, env=env, capture_output=True, text=True)
    assert report.exists(), result.stdout + result.stderr
    return result, json.loads(report.read_text(encoding="utf-8"))


def test_generated_conftest_loads_only_the_case_runner(shipped_suite):
    _, out, _ = shipped_suite
    tree = ast.parse((out / "conftest.py").read_text(encoding="utf-8"))
    plugins = [ast.literal_eval(node.value) for node in ast.walk(tree) if isinstance(node, ast.Assign)
               and any(isinstance(t, ast.Name) and t.id == "pytest_plugins" for t in node.targets)]
    assert plugins == [["e2egen.generator.plugin"]]  # where plugin autoload is off; else the installed one


def test_a_pr_run_imports_nothing_of_nightly(shipped_suite):
    root, out, selection = shipped_suite
    result, seen = run_probed(root, out, "-m", "pr", "-k", selection)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{FAST_CASES} passed" in result.stdout, result.stdout
    assert "e2egen.generator.plugin" in seen["modules"]  # the probe saw the suite's own plugin: it works
    assert [m for m in seen["modules"] if m.startswith("e2egen.nightly")] == []
    # Without the recorder its options do not exist: nothing of nightly is registered behind the scenes.
    bare = subprocess.run([sys.executable, "-m", "pytest", str(out), "-q", "-p", "no:cacheprovider", "--collect-only",
                           "--e2e-record", str(root / "r.jsonl")], cwd=root, capture_output=True, text=True)
    assert bare.returncode == 4 and "--e2e-record" in bare.stderr, bare.stdout + bare.stderr


def test_the_recorder_loads_from_the_command_line(shipped_suite):
    """What the sweep does: -p e2egen.nightly.recorder brings the recorder and, through it, the sweep plugin."""
    root, out, selection = shipped_suite
    ids = root / "selected.cases"
    ids.write_text("".join(f"{case_id}\n" for case_id in selection.split(" or ")), encoding="utf-8")
    result, seen = run_probed(root, out, "--collect-only", "-p", "e2egen.nightly.recorder",
                              "--e2e-record", str(root / "records.jsonl"), "--e2e-select-cases", str(ids))
    assert result.returncode == 0, result.stdout + result.stderr
    assert {"e2egen.nightly.recorder", "e2egen.nightly.sweep_plugin"} <= set(seen["modules"])  # the probe sees them
    assert re.search(rf"\b{FAST_CASES}/\d+ tests collected", result.stdout), result.stdout  # --e2e-select-cases works


# --- layering, statically -------------------------------------------------------------------------

# Folder -> the e2egen packages above it, which its modules must not import. (Shared leaves such as
# e2egen.errors and the template data, e2egen.templates, belong to no layer.)
ABOVE_THE_GENERATOR = ("e2egen.nightly", "e2egen.commands", "e2egen.cli", "e2egen.diagnose")
MUST_NOT_IMPORT = {
    "generator": ABOVE_THE_GENERATOR,
    "templates": ABOVE_THE_GENERATOR,
    "runner": ("e2egen.generator", *ABOVE_THE_GENERATOR),
    "metrics": ("e2egen.runner", "e2egen.generator", *ABOVE_THE_GENERATOR),
}
PROJECT_FOLDERS = ("generator", "metrics", "runner", "nightly", "templates", "studies")


def under(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def module_name(path: Path) -> tuple[str, bool]:
    """The installed name of a source file (generator/plugin.py -> e2egen.generator.plugin) and whether it is a package."""
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    is_package = parts[-1] == "__init__"
    if is_package:
        parts.pop()
    return ".".join(["e2egen", *parts]), is_package


def imported_names(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in a file, relative imports resolved; and of every string
    that names an e2egen module (importlib.import_module, pytest_plugins), docstrings aside."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    name, is_package = module_name(path)
    package = name if is_package else name.rpartition(".")[0]
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            names.append((node.lineno, module))
            names += [(node.lineno, f"{module}.{alias.name}") for alias in node.names]  # `from e2egen import nightly`
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
              and node.value.startswith("e2egen.")):
            names.append((node.lineno, node.value.split(":")[0]))
    return names


def layer_files(folder: str) -> list[Path]:
    return sorted(p for p in (REPO / folder).rglob("*.py") if "__pycache__" not in p.parts)


@pytest.mark.parametrize("folder", sorted(MUST_NOT_IMPORT))
def test_layers_import_only_downwards(folder):
    files = layer_files(folder)
    assert files, folder
    wrong = []
    for path in files:
        for line, name in imported_names(path):
            where = f"{path.relative_to(REPO)}:{line}: {name}"
            if name.split(".")[0] in PROJECT_FOLDERS:
                wrong.append(f"{where} (a top-level project name: import it as e2egen.{name})")
            elif any(under(name, above) for above in MUST_NOT_IMPORT[folder]):
                wrong.append(f"{where} (a layer above {folder}; dependencies flow one way: "
                             "e2egen CLI/diagnose -> nightly -> generator -> runner -> metrics)")
    assert not wrong, "\n".join(wrong)


def test_templates_name_nothing_above_the_generator():
    templates = sorted((REPO / "templates").glob("*.j2"))
    assert templates
    wrong = [f"{path.name}:{number}: {line.strip()}" for path in templates
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if any(name in line for name in ABOVE_THE_GENERATOR)]
    assert not wrong, "\n".join(wrong)


def test_the_layering_check_sees_a_wrong_import(tmp_path, monkeypatch):
    """The checker itself: relative, absolute and string imports of a higher layer are all found."""
    folder = tmp_path / "runner" / "ops"
    folder.mkdir(parents=True)
    bad = folder / "x.py"
    bad.write_text('"""Mentions e2egen.nightly in a docstring: harmless."""\n'
                   "from ...nightly import recorder\n"
                   "from e2egen import generator\n"
                   "import metrics\n"
                   'PLUGINS = ["e2egen.nightly.sweep_plugin"]\n', encoding="utf-8")
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    names = [name for _, name in imported_names(bad)]
    assert names == ["e2egen.nightly", "e2egen.nightly.recorder", "e2egen", "e2egen.generator", "metrics",
                     "e2egen.nightly.sweep_plugin"]


@pytest.mark.parametrize("workers, user_threads", [("2", None), ("64", None), ("2", "3"), (None, None)])
def test_xdist_workers_share_the_cpu_threads(monkeypatch, workers, user_threads):
    import os

    import torch

    from e2egen.generator.plugin import share_cpu_threads

    before = torch.get_num_threads()
    for name, value in (("PYTEST_XDIST_WORKER_COUNT", workers), ("OMP_NUM_THREADS", user_threads)):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    try:
        share_cpu_threads()
        if workers is None:
            assert "OMP_NUM_THREADS" not in os.environ and torch.get_num_threads() == before
        elif user_threads is not None:
            assert os.environ["OMP_NUM_THREADS"] == user_threads and torch.get_num_threads() == before
        else:
            share = max(1, (os.cpu_count() or 1) // int(workers))
            assert os.environ["OMP_NUM_THREADS"] == str(share) and torch.get_num_threads() == share
    finally:
        torch.set_num_threads(before)
