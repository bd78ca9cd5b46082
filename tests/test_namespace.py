"""One installed namespace: the project installs and imports as e2egen.* only.

After `pip install .`, `import metrics` fails and `import e2egen.metrics`
works; generated code names only e2egen.* modules; a user's `metrics.py`,
`runner/` or `generator/` in the working directory changes no verdict.
"""
from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

from conftest import REPO, run_cli

PROJECT_FOLDERS = ("generator", "metrics", "runner", "nightly", "templates", "studies")

# One gemm suite, 4 tiny cases: "m8" passes, "tight" fails on an impossible rel_l2 (so both verdicts are compared).
CATALOGUE = """
seed = 11

[ranges]
r0 = [-1.0, 1.0]

[tolerances]
bound_ratio = 1.0

[[suite]]
name = "ns"
op = "gemm"
dtypes = ["f32", "f16"]
layouts = ["nn"]
ranges = ["r0"]

[[suite.config]]
name = "m8"
m = 8
n = 8
k = 16

[[suite.config]]
name = "tight"
m = 8
n = 8
k = 16
tolerances.rel_l2 = 1e-12
"""
FAILING_CASE = "ns/gemm/tight/fwd/f32/nn/r0"

# A user's modules with the project's folder names; each leaves a marker when imported.
MARK = 'import pathlib; pathlib.Path(__file__).resolve().parent.joinpath("IMPORTED-" + __name__).touch()\n'
HOSTILE = {
    "metrics.py": MARK + 'TOLERANCE_KEYS = ()\n\n\ndef compare(*args, **kwargs):\n    return "nonsense"\n',
    "runner/__init__.py": MARK + 'raise RuntimeError("user module imported")\n',
    "generator/__init__.py": MARK + 'raise RuntimeError("user module imported")\n',
    "nightly/__init__.py": MARK + 'raise RuntimeError("user module imported")\n',
}


def clean_env(**extra: str) -> dict:
    """The environment without anything that puts the project's folders on the path (or keeps the cwd off it)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONSAFEPATH")}
    return {**env, **extra}


def e2egen_command() -> list[str]:
    """The installed `e2egen` command beside this Python, as a user types it."""
    script = Path(sys.executable).with_name("e2egen")
    return [str(script)] if script.exists() else [sys.executable, "-m", "e2egen"]


def run(command: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(command, cwd=cwd, env=clean_env(**env), capture_output=True, text=True)


# --- the wheel ---------------------------------------------------------------------------------------

def build_wheel(tmp_path: Path) -> Path:
    """A wheel of the project, built from a copy of its sources (setuptools leaves build/ in the tree it builds)."""
    source = tmp_path / "src"
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(
        ".venv", "build", "results", "runs", ".git", "__pycache__", "*.egg-info", ".pytest_cache", ".hypothesis", "*.pyc"))
    result = run([sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "--no-build-isolation",
                  "-w", str(tmp_path / "dist"), "-q"], cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    [wheel] = (tmp_path / "dist").glob("e2egen-*.whl")
    return wheel


def test_the_wheel_holds_only_the_e2egen_package(tmp_path):
    wheel = build_wheel(tmp_path)
    names = zipfile.ZipFile(wheel).namelist()
    outside = [n for n in names if n.split("/")[0] != "e2egen" and not n.split("/")[0].endswith(".dist-info")]
    assert not outside, outside
    top_level = [n for n in names if n.endswith(".dist-info/top_level.txt")]
    for path in top_level:
        assert zipfile.ZipFile(wheel).read(path).decode().split() == ["e2egen"]
    # Every source file of the folders, and their data, is in it under e2egen/.
    expected = {f"e2egen/{p.relative_to(REPO).as_posix()}" for folder in PROJECT_FOLDERS
                for p in (REPO / folder).rglob("*") if p.suffix in (".py", ".j2", ".toml") and "__pycache__" not in p.parts}
    expected |= {p.relative_to(REPO).as_posix() for p in (REPO / "e2egen").rglob("*.py") if "__pycache__" not in p.parts}
    assert {f"e2egen/templates/{p.name}" for p in (REPO / "templates").glob("*.j2")} <= expected
    assert "e2egen/studies/seed003.toml" in expected
    assert expected - set(names) == set()

    # Installed: e2egen works, the folders' own names do not exist.
    site, cwd = tmp_path / "site", tmp_path / "cwd"
    cwd.mkdir()
    result = run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-compile", "--target", str(site), str(wheel),
                  "-q"], cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert sorted(p.name for p in site.iterdir() if p.name != "bin") == ["e2egen", wheel.name.split("-py")[0] + ".dist-info"]
    script = textwrap.dedent(f"""
        import importlib, sys
        import e2egen.metrics, e2egen.generator.plugin
        assert e2egen.metrics.__file__.startswith({str(site)!r}), e2egen.metrics.__file__
        for name in {PROJECT_FOLDERS!r}:
            try:
                importlib.import_module(name)
            except ModuleNotFoundError:
                continue
            sys.exit(f"import {{name}} worked")
    """)
    result = run([sys.executable, "-c", script], cwd=cwd, PYTHONPATH=str(site))
    assert result.returncode == 0, result.stdout + result.stderr
    (cwd / "ns.toml").write_text(CATALOGUE, encoding="utf-8")
    result = run([sys.executable, "-m", "e2egen", "gen", "ns.toml", "--out", "out"], cwd=cwd, PYTHONPATH=str(site))
    assert result.returncode == 0, result.stdout + result.stderr
    assert_names_only_e2egen(cwd / "out")


def test_import_metrics_fails_and_e2egen_metrics_works(tmp_path):
    result = run([sys.executable, "-c", "import metrics"], cwd=tmp_path)
    assert result.returncode == 1 and "ModuleNotFoundError: No module named 'metrics'" in result.stderr, result.stderr
    result = run([sys.executable, "-c", "import e2egen.metrics; from e2egen.metrics import compare; print(compare.__module__)"],
                 cwd=tmp_path)
    assert result.returncode == 0 and result.stdout.strip() == "e2egen.metrics.compare", result.stdout + result.stderr


# --- a user's modules in the working directory --------------------------------------------------------

OUTCOME_LINE = re.compile(r"^(PASSED|FAILED|SKIPPED|ERROR) \S+::\w+\[(?P<case>[^\]]+)\]", re.M)


def user_session(cwd: Path, catalogue: Path) -> dict:
    """What a user sees from `cwd`: gen, pytest on the suite, `e2egen run` of a failing case."""
    gen = run([*e2egen_command(), "gen", str(catalogue), "--out", "build/e2e"], cwd=cwd)
    assert gen.returncode == 0, gen.stdout + gen.stderr
    suite = cwd / "build" / "e2e"
    files = {p.name: p.read_bytes() for p in sorted(suite.iterdir()) if p.is_file()}
    tests = run([sys.executable, "-m", "pytest", "build/e2e", "-q", "-p", "no:cacheprovider", "-rA", "--e2e-device", "cpu"], cwd=cwd)
    outcomes = {m["case"]: m[1] for m in OUTCOME_LINE.finditer(tests.stdout)}
    # `python -m e2egen`, not the script: -m puts the working directory first on sys.path, as `python -m pytest` does.
    result = run([sys.executable, "-m", "e2egen", "run", FAILING_CASE, "--catalogue", str(catalogue), "--device", "cpu"],
                 cwd=cwd)
    assert "Traceback" not in result.stderr, result.stderr
    # The whole report but its timings: the same values, margins, worst elements and repro line.
    runs = (result.returncode, [line for line in result.stdout.splitlines() if not line.startswith("time:")])
    return {"files": files, "pytest": (tests.returncode, outcomes), "runs": runs, "log": tests.stdout + tests.stderr}


def test_a_users_metrics_runner_and_generator_change_no_verdict(tmp_path):
    catalogue = tmp_path / "catalogue" / "ns.toml"
    catalogue.parent.mkdir()
    catalogue.write_text(CATALOGUE, encoding="utf-8")
    clean, user = tmp_path / "clean", tmp_path / "user"
    clean.mkdir()
    for name, text in HOSTILE.items():
        (user / name).parent.mkdir(parents=True, exist_ok=True)
        (user / name).write_text(text, encoding="utf-8")

    expected = user_session(clean, catalogue)
    got = user_session(user, catalogue)

    returncode, outcomes = expected["pytest"]
    assert returncode == 1 and outcomes == {
        "ns/gemm/m8/fwd/f32/nn/r0": "PASSED", "ns/gemm/m8/fwd/f16/nn/r0": "PASSED",
        "ns/gemm/tight/fwd/f32/nn/r0": "FAILED", "ns/gemm/tight/fwd/f16/nn/r0": "FAILED"}, expected["log"]
    returncode, report = expected["runs"]
    assert returncode == 1 and report[0].startswith(f"{FAILING_CASE}  [FAILED: numerics outside the bound]"), report
    assert got["pytest"] == expected["pytest"], got["log"]
    assert got["runs"] == expected["runs"]
    assert got["files"] == expected["files"]  # the same bytes generated
    assert sorted(p.name for p in user.rglob("IMPORTED-*")) == []

    # The user's modules were there to be found: plain Python in that directory imports them.
    sanity = run([sys.executable, "-c", "import metrics; print(metrics.compare())"], cwd=user)
    assert sanity.stdout.strip() == "nonsense", sanity.stdout + sanity.stderr


# --- generated code -----------------------------------------------------------------------------------

def assert_names_only_e2egen(out: Path) -> None:
    """Every import of every generated Python file is e2egen.* (or pytest); so are the plugins it names."""
    files = sorted(out.glob("*.py"))
    assert any(p.name == "conftest.py" for p in files) and any(p.name.startswith("test_") for p in files)
    wrong = []
    for path in files:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = ["." * node.level + (node.module or "")]
            elif (isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "pytest_plugins"
                                                         for t in node.targets)):
                names = list(ast.literal_eval(node.value))
            wrong += [f"{path.name}:{node.lineno}: {name}" for name in names
                      if not (name.startswith("e2egen.") or name in ("pytest", "__future__"))]
    assert not wrong, "\n".join(wrong)


def test_generated_code_names_only_e2egen_modules(tmp_path):
    (tmp_path / "ns.toml").write_text(CATALOGUE, encoding="utf-8")
    for catalogue, out in ((REPO / "configs.toml", tmp_path / "shipped"), (tmp_path / "ns.toml", tmp_path / "ns")):
        result = run_cli("gen", str(catalogue), "--out", str(out))
        assert result.returncode == 0, result.stderr
        assert_names_only_e2egen(out)


STUDY = """
title = "namespace check"
catalogue = "ns.toml"
rule = { max_eps_diff = 1.0 }
metrics = ["max_eps_diff", "bound_ratio"]

[ranges]
r0 = [-1.0, 1.0]

[cases]
select = ["ns/gemm/m8/fwd/*/nn/*"]

[[variant]]
name = "original"

[[validation]]
name = "torch+cpu"
kernel = "torch"
reference = "cpu"
"""


def test_nightly_explain_and_study_ignore_a_users_modules(tmp_path):
    """The issue's other commands, from a directory holding its own metrics.py, runner/, generator/, nightly/."""
    catalogue = tmp_path / "catalogue" / "ns.toml"
    catalogue.parent.mkdir()
    catalogue.write_text(CATALOGUE, encoding="utf-8")
    (catalogue.parent / "ns-study.toml").write_text(STUDY, encoding="utf-8")
    user = tmp_path / "user"
    for name, text in HOSTILE.items():
        (user / name).parent.mkdir(parents=True, exist_ok=True)
        (user / name).write_text(text, encoding="utf-8")
    e2egen = [sys.executable, "-m", "e2egen"]  # -m: the working directory comes first on sys.path

    nightly = run([*e2egen, "nightly", "--catalogue", str(catalogue), "--out", "build/e2e", "--store", "s.sqlite",
                   "--workers", "0", "--no-progress", "--device", "cpu"], cwd=user)
    assert nightly.returncode == 1, nightly.stdout + nightly.stderr  # the two tight cases fail, as they should
    assert "Traceback" not in nightly.stderr and "2 failed" in nightly.stdout + nightly.stderr, nightly.stdout + nightly.stderr
    explain = run([*e2egen, "explain", FAILING_CASE, "--catalogue", str(catalogue), "--device", "cpu", "--no-search"],
                  cwd=user)
    assert explain.returncode == 1 and "Traceback" not in explain.stderr, explain.stdout + explain.stderr
    study = run([*e2egen, "study", str(catalogue.parent / "ns-study.toml"), "--out", "study", "--device", "cpu"], cwd=user)
    assert study.returncode == 0, study.stdout + study.stderr
    assert sorted(p.name for p in user.rglob("IMPORTED-*")) == []
