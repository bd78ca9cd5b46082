"""The README is a front page that stays true: short, its two set-up commands first, its links alive, and its
"test your own kernel" catalogue and kernel work when copied as printed."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from conftest import REPO

README = REPO / "README.md"
FRONT_PAGE_LIMIT = 10 * 1024  # bytes: a front page, not a manual (issue 44)


def _readme() -> str:
    return README.read_text(encoding="utf-8")


def _blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", text, re.S)


def test_the_readme_is_a_front_page_that_starts_with_the_two_commands():
    text = _readme()
    assert len(text.encode("utf-8")) <= FRONT_PAGE_LIMIT
    first = _blocks(text, "sh")[0].splitlines()
    assert [line.split("#")[0].strip() for line in first] == ["make setup pr", "make setup test"]
    assert text.index("make setup pr") < text.index("\n## ")


def test_every_relative_link_of_the_readme_names_a_file_that_exists():
    targets = re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", _readme())
    assert targets
    missing = [target for target in targets if not (REPO / target).exists()]
    assert not missing


def test_the_own_kernel_example_runs_as_printed(tmp_path):
    section = _readme().split("## Test your own kernel", 1)[1].split("\n## ", 1)[0]
    (catalogue,) = [block for block in _blocks(section, "toml") if block.startswith("# configs.toml")]
    (kernel,) = [block for block in _blocks(section, "python") if block.startswith("# my_kernels.py")]
    (tmp_path / "configs.toml").write_text(catalogue, encoding="utf-8")
    (tmp_path / "my_kernels.py").write_text(kernel, encoding="utf-8")
    environment = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}

    def run(*command: str) -> subprocess.CompletedProcess:
        return subprocess.run(command, cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=600)

    assert run("e2egen", "validate", "configs.toml").returncode == 0
    assert run("e2egen", "gen", "configs.toml", "--out", "build/e2e").returncode == 0
    done = run(sys.executable, "-m", "pytest", "build/e2e", "-q", "-p", "no:cacheprovider", "-n", "0")
    assert done.returncode == 0, done.stdout[-3000:]
    assert re.search(r"\b6 passed\b", done.stdout)

    # The line the README gives a kernel that accumulates in f16 on purpose is a valid catalogue line.
    (line,) = re.findall(r"`(require = \{[^`]*\})`", section)
    (tmp_path / "configs.toml").write_text(catalogue.replace("pr = true", f"pr = true\n{line}"), encoding="utf-8")
    checked = run("e2egen", "validate", "configs.toml")
    assert checked.returncode == 0, checked.stderr
