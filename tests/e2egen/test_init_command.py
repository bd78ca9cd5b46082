"""`e2egen init [DIR]`: a newcomer's starter project (catalogue, kernel stub, workflows) that validates, generates,
passes its PR subset with the stub and fails it with a bug; commented examples that validate once uncommented;
workflows whose e2egen command lines the CLI's own parser takes; no file replaced without --force."""
from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import run_e2egen
from e2egen import cli
from e2egen.commands.init_command import STARTER_FILES

WORKFLOWS = (".github/workflows/e2egen-pr.yml", ".github/workflows/e2egen-nightly.yml")
# A commented-out example line: '#' then TOML at once; prose comments have a space after the '#'.
EXAMPLE_LINE = re.compile(r"^#(?=[^\s#!])")


@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("E2EGEN_PROFILES", str(tmp_path / "profiles"))  # the stub's probes: not the shared cache
    status, out, err = run_e2egen("init", "proj")
    assert status == 0, err
    return tmp_path / "proj"


def test_init_writes_the_starter_files_and_says_what_next(project):
    for _, relative in STARTER_FILES:
        assert (project / relative).is_file()
    status, out, _ = run_e2egen("init", "other")
    assert status == 0 and out.splitlines()[0] == "wrote other/configs.toml"
    commands = [line.strip() for line in out.splitlines() if line.startswith("  ")]
    assert commands == ["e2egen validate other/configs.toml", "e2egen gen other/configs.toml --out other/build/e2e",
                        "pytest other/build/e2e -m pr"]


def run_pr_subset(project: Path, *select: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", "build/e2e", "-m", " and ".join(("pr", *select)),
                           "-p", "no:cacheprovider", "-q", "-n", "0"],
                          cwd=project, capture_output=True, text=True, timeout=600, env={**os.environ})


def test_the_starter_validates_generates_and_its_pr_subset_passes_then_catches_a_bug(project):
    status, out, err = run_e2egen("validate", str(project / "configs.toml"))
    assert status == 0 and "in the PR subset" in out, err
    pr_cases = int(re.search(r"(\d+) in the PR subset", out).group(1))
    assert 0 < pr_cases <= 24  # small: the PR run stays within seconds on a CPU
    status, _, err = run_e2egen("gen", str(project / "configs.toml"), "--out", str(project / "build/e2e"))
    assert status == 0, err
    passed = run_pr_subset(project)
    assert passed.returncode == 0 and f"{pr_cases} passed" in passed.stdout, passed.stdout + passed.stderr
    stub = project / "my_kernels.py"
    stub.write_text(stub.read_text().replace("return torch.matmul(a, b)", "return torch.matmul(a, b) * 1.01"))
    failed = run_pr_subset(project, "f32", "nn")
    assert failed.returncode == 1 and "failed" in failed.stdout, failed.stdout + failed.stderr


def example_blocks(lines: list[str]) -> list[range]:
    """The line numbers of each run of consecutive commented-out example lines."""
    blocks, start = [], None
    for i, line in enumerate([*lines, ""]):
        if EXAMPLE_LINE.match(line):
            start = i if start is None else start
        elif start is not None:
            blocks.append(range(start, i))
            start = None
    return blocks


def uncommented(lines: list[str], block: range) -> str:
    return "\n".join(line[1:] if i in block else line for i, line in enumerate(lines)) + "\n"


def test_every_commented_example_validates_once_uncommented(project):
    lines = (project / "configs.toml").read_text().splitlines()
    blocks = example_blocks(lines)
    assert len(blocks) >= 8  # timeout, ranges, tolerances, require, accept, suite keys, batch, a conv suite
    shown = "\n".join("\n".join(lines[i] for i in block) for block in blocks)
    for key in ("timeout", "[tolerances.", "[require]", "[[accept]]", "markers", "data = \"integers\"",
                "op = \"conv2d\"", "bound_ratio"):
        assert key in shown, key
    everything = range(len(lines))  # all examples at once, too
    for n, block in enumerate([*blocks, [i for i in everything if EXAMPLE_LINE.match(lines[i])]]):
        path = project / f"example{n}.toml"  # beside my_kernels.py, which the suite's impl names
        path.write_text(uncommented(lines, block), encoding="utf-8")
        status, out, err = run_e2egen("validate", str(path))
        assert status == 0, f"example lines {list(block)[:1]}...: {err}"


def workflow_commands(text: str) -> list[list[str]]:
    """Every `e2egen SUB ...` command line of a workflow, its GitHub expressions and variables given sample values,
    as the argv e2egen gets (what follows a redirection left out)."""
    found = []
    for line in text.splitlines():
        line = line.strip().removeprefix("run:").strip()
        if not line.startswith("e2egen "):
            continue
        line = re.sub(r"\$\{\{[^}]*\}\}", "1", line)
        line = re.sub(r"\$([A-Z_]+)", "2", line)
        argv = shlex.split(line)
        found.append(argv[1:argv.index(">")] if ">" in argv else argv[1:])
    return found


def test_the_workflows_parse_and_their_e2egen_commands_are_the_clis(project):
    parser = cli.build_parser()
    subcommands = set()
    for relative in WORKFLOWS:
        text = (project / relative).read_text()
        assert "make " not in text and "@E2EGEN_REQUIREMENT@" not in text
        install_torch = text.index("pip install torch --index-url https://download.pytorch.org/whl/cpu")
        assert install_torch < text.index('pip install "e2egen==')
        for argv in workflow_commands(text):
            try:
                parser.parse_args(argv)
            except SystemExit:
                pytest.fail(f"{relative}: `e2egen {shlex.join(argv)}` is not a command e2egen takes")
            subcommands.add(argv[0])
        try:
            import yaml
        except ImportError:
            continue
        document = yaml.safe_load(text)
        assert isinstance(document, dict) and document["jobs"]
    assert {"validate", "gen", "nightly", "merge", "report", "calibrate", "select"} <= subcommands
    pr = (project / WORKFLOWS[0]).read_text()
    assert "e2egen gen configs.toml --out build/e2e" in pr and "pytest build/e2e -m pr -n auto" in pr


def test_the_requirement_the_workflows_install_can_be_chosen(project, tmp_path):
    status, _, err = run_e2egen("init", "pinned", "--e2egen-requirement", "e2egen>=0.1,<0.2")
    assert status == 0, err
    for relative in WORKFLOWS:
        assert 'pip install "e2egen>=0.1,<0.2"' in (tmp_path / "pinned" / relative).read_text()
    for bad, said in [("numpy", "not e2egen"), ('e2egen"; rm -rf ~', "without quotes"), ("e2egen==", "not a pip")]:
        status, _, err = run_e2egen("init", "bad", "--e2egen-requirement", bad)
        assert status == 2 and said in err and "Traceback" not in err, err
    assert not (tmp_path / "bad").exists()


def test_init_replaces_nothing_without_force(project):
    catalogue = project / "configs.toml"
    catalogue.write_text("# mine\n")
    (project / "my_kernels.py").unlink()
    status, _, err = run_e2egen("init", str(project))
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert status == 2 and len(lines) == 1 and str(catalogue) in lines[0] and "--force" in lines[0], err
    assert catalogue.read_text() == "# mine\n" and not (project / "my_kernels.py").exists()  # nothing written
    status, out, _ = run_e2egen("init", str(project), "--force")
    assert status == 0 and f"wrote {catalogue} (replaced)" in out and (project / "my_kernels.py").is_file()
    assert catalogue.read_text().startswith("# e2egen catalogue")


@pytest.mark.parametrize("command", [["gen"], ["validate"], ["list"]])
def test_a_missing_catalogue_points_to_init(tmp_path, monkeypatch, command):
    monkeypatch.chdir(tmp_path)
    status, _, err = run_e2egen(*command)
    assert status == 2 and "configs.toml" in err and "no such file" in err and "`e2egen init`" in err, err


def test_a_directory_init_cannot_write_is_one_line_naming_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a-file").write_text("")
    long_name = "x" * 300  # longer than any file system's NAME_MAX
    for directory, said in [(long_name, "file name too long"), ("a-file/proj", "a-file is a file, not a directory")]:
        status, _, err = run_e2egen("init", directory)
        lines = [line for line in err.splitlines() if "error:" in line]
        assert status == 2 and len(lines) == 1 and said in lines[0] and "Traceback" not in err, err
