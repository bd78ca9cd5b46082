"""The documentation site builds with mkdocs --strict (every page in the nav, every link and anchor found), and
docs/reference/ops.md's ops table is the op registry's own rendering, listing every registered op."""
from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import HANG_LIMIT, REPO
from e2egen import reference_tables
from e2egen.runner.ops import OPS

OPS_PAGE = REPO / "docs" / "reference" / "ops.md"


def test_mkdocs_build_strict_has_no_warning(tmp_path):
    pytest.importorskip("mkdocs", reason="mkdocs is in the dev and docs extras: pip install -e '.[dev]'")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(REPO / "mkdocs.yml"),
         "--site-dir", str(tmp_path / "site")],
        cwd=REPO, capture_output=True, text=True, timeout=HANG_LIMIT)
    assert done.returncode == 0, done.stderr
    assert "WARNING" not in done.stderr, done.stderr
    assert (tmp_path / "site" / "reference" / "ops" / "index.html").is_file()


def test_ops_table_is_the_registrys_rendering():
    text = OPS_PAGE.read_text(encoding="utf-8")
    assert reference_tables.difference(text) == [], "\n".join(reference_tables.difference(text))
    assert reference_tables.table_in(text) == reference_tables.ops_table()


def test_ops_table_lists_every_registered_op():
    listed = reference_tables.ops_named(reference_tables.table_in(OPS_PAGE.read_text(encoding="utf-8")))
    assert listed == list(OPS)


def test_a_registered_op_missing_from_the_page_is_named():
    text = OPS_PAGE.read_text(encoding="utf-8")
    problems = reference_tables.difference(text, {**OPS, "my_exp": OPS["exp"]})
    assert problems[0] == "ops registered but not in the table: my_exp"


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "e2egen.reference_tables", *map(str, args)],
                          capture_output=True, text=True, timeout=HANG_LIMIT)


def test_check_fails_on_a_stale_page_and_write_fixes_it(tmp_path):
    page = tmp_path / "ops.md"
    current = OPS_PAGE.read_text(encoding="utf-8")
    stale_row = next(line for line in reference_tables.table_in(current).splitlines() if line.startswith("| `gemm` |"))
    page.write_text(current.replace(stale_row + "\n", ""), encoding="utf-8")
    done = _cli("--check", "--file", page)
    assert done.returncode == 1
    assert "ops registered but not in the table: gemm" in done.stderr
    assert "-" + stale_row not in done.stderr and "+" + stale_row in done.stderr  # the diff names the row
    assert _cli("--write", "--file", page).returncode == 0
    assert page.read_text(encoding="utf-8") == current
    assert _cli("--check", "--file", page).returncode == 0


def test_a_page_without_the_markers_is_a_user_error(tmp_path):
    page = tmp_path / "ops.md"
    page.write_text("# Ops\n\nno table here\n", encoding="utf-8")
    done = _cli("--check", "--file", page)
    assert done.returncode == 2
    assert "<!-- ops-table:start -->" in done.stderr and "Traceback" not in done.stderr


def test_rendering_the_table_imports_no_torch():
    done = subprocess.run([sys.executable, "-c", "import sys; from e2egen import reference_tables as r; r.ops_table(); "
                           "print('torch' in sys.modules)"], capture_output=True, text=True, timeout=HANG_LIMIT)
    assert done.stdout.strip() == "False", done.stderr
