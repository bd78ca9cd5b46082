"""The code blocks of docs/tutorial.md run as printed, and the harness that runs them does what it says."""
from __future__ import annotations

import sys
import textwrap
from pathlib import Path

from conftest import HANG_LIMIT, REPO
from doc_blocks import Block, extract_blocks, run_blocks

TUTORIAL = REPO / "docs" / "tutorial.md"
FIXTURE = Path(__file__).parent / "fixtures" / "harness.md"


def _run_page(page: Path, workdir: Path, env_extra: dict[str, str] | None = None):
    import os

    env = dict(os.environ, **(env_extra or {}))
    return run_blocks(extract_blocks(page.read_text(encoding="utf-8")), workdir, timeout=HANG_LIMIT, env=env)


def test_every_tutorial_block_runs(tmp_path):
    """Each ```sh and ```python block of the tutorial, in order, in one fresh directory, exits as its page says."""
    workdir = tmp_path / "tutorial"
    workdir.mkdir()
    for result in _run_page(TUTORIAL, workdir, {"E2EGEN_PROFILES": str(tmp_path / "profiles")}):
        assert result.ok, result.describe("docs/tutorial.md")


def test_extract_finds_the_blocks_and_their_directives():
    blocks = extract_blocks(FIXTURE.read_text(encoding="utf-8"))
    assert [(b.language, b.expect_exit, b.run) for b in blocks] == [
        ("sh", 0, True), ("python", 0, True), ("sh", 1, True), ("sh", 0, False), ("python", 2, True), ("sh", 0, True),
    ]
    assert blocks[0].line == 9
    assert blocks[-1].code == "cat note.txt\necho '```'\n"  # a longer fence holds a shorter one


def test_harness_runs_the_fixture_in_order_in_one_directory(tmp_path):
    workdir = tmp_path / "page"
    workdir.mkdir()
    results = _run_page(FIXTURE, workdir, {"VENV_BIN": str(Path(sys.executable).parent)})
    assert [r.ok for r in results] == [True] * 5, [r.describe("harness.md") for r in results if not r.ok]
    assert [r.status for r in results] == [0, 0, 1, 2, 0]  # the no-run block is skipped
    assert (workdir / "from-python.txt").read_text() == sys.executable  # the venv's python ran the python block
    assert not (workdir / "not-written.txt").exists()  # bash -e stopped at the failing command
    assert results[-1].output == "written by sh\n```\n"


def test_harness_reports_a_block_that_exits_otherwise(tmp_path):
    page = textwrap.dedent("""\
        ```sh
        echo fine
        ```

        ```python
        raise SystemExit(4)
        ```

        <!-- expect-exit: 1 -->
        ```sh
        true
        ```
        """)
    blocks = extract_blocks(page)
    results = run_blocks(blocks, tmp_path, timeout=HANG_LIMIT)
    assert [r.status for r in results] == [0, 4]  # stops at the first block that did not exit as expected
    assert "page.md:5: the python block exited with status 4, expected 0" in results[1].describe("page.md")
    results = run_blocks(blocks, tmp_path, timeout=HANG_LIMIT, stop_at_first_failure=False)
    assert [(r.status, r.ok) for r in results] == [(0, True), (4, False), (0, False)]


def test_no_blocks_no_runs(tmp_path):
    assert extract_blocks("# Title\n\nNo code here.\n") == []
    assert run_blocks([Block("sh", "exit 1\n", 1, run=False)], tmp_path, timeout=HANG_LIMIT) == []
