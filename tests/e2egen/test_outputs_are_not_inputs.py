"""Issue 46: no command overwrites a file it reads, and no writer follows a symbolic link planted at its output."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from e2egen.cli import main
from e2egen.errors import UsageError
from e2egen.files import reading, write_text_atomically

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "nightly"))
from test_select import CASES, CATALOGUE, extra, metrics  # noqa: E402  (the select tests' project)
from loop_support import fill_store  # noqa: E402


@pytest.fixture
def project(tmp_path, monkeypatch):
    (tmp_path / "configs.toml").write_text(CATALOGUE, encoding="utf-8")
    fill_store(tmp_path / "e2e.sqlite", CASES, 2, metrics, extra=extra)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _refused(capsys, argv, *names):
    before = {p: p.read_bytes() for p in Path.cwd().iterdir() if p.is_file()}
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "overwrite" in err and all(name in err for name in names), err
    assert "Traceback" not in err
    assert {p: p.read_bytes() for p in Path.cwd().iterdir() if p.is_file()} == before  # nothing written


@pytest.mark.parametrize("out", ["configs.toml", "./configs.toml", "link.toml", "hard.toml", "e2e.sqlite"])
def test_select_refuses_to_write_over_the_catalogue_or_store_however_named(project, capsys, out):
    os.symlink("configs.toml", "link.toml")
    os.link("configs.toml", "hard.toml")
    _refused(capsys, ["select", "-c", "configs.toml", "--store", "e2e.sqlite", "--out", out], out)


def test_other_writers_refuse_their_inputs(project, capsys):
    _refused(capsys, ["nightly", "-c", "configs.toml", "--store", "configs.toml"], "--store", "configs.toml")
    _refused(capsys, ["merge", "configs.toml", "--store", "configs.toml"], "configs.toml")
    Path("shard.jsonl").write_text("", encoding="utf-8")
    _refused(capsys, ["merge", "shard.jsonl", "--store", "shard.jsonl"], "shard.jsonl")
    _refused(capsys, ["import-rocmlir", "configs.toml", "--summary", "./configs.toml"], "configs.toml")


def test_the_writer_refuses_any_input_of_the_running_command(tmp_path):
    source = tmp_path / "in.toml"
    source.write_text("x", encoding="utf-8")
    os.link(source, tmp_path / "other.toml")
    with reading(str(source)):
        with pytest.raises(UsageError, match="in.toml"):
            write_text_atomically(tmp_path / "other.toml", "y")
    assert source.read_text() == "x"
    write_text_atomically(tmp_path / "other.toml", "y")  # the command is over: no longer an input
    assert source.read_text() == "x"  # the rename replaced the hard link's name, not the shared file


def test_a_symbolic_link_at_the_output_is_replaced_never_followed(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious", encoding="utf-8")
    link = tmp_path / "report.md"
    link.symlink_to(victim)
    write_text_atomically(link, "report")
    assert victim.read_text() == "precious"
    assert not link.is_symlink() and link.read_text() == "report"
    # A link to a directory, and a dangling link, are replaced the same way.
    (tmp_path / "d").mkdir()
    for name, target in (("to_dir.md", tmp_path / "d"), ("dangling.md", tmp_path / "nowhere" / "x")):
        (tmp_path / name).symlink_to(target)
        write_text_atomically(tmp_path / name, "r")
        assert not (tmp_path / name).is_symlink() and (tmp_path / name).read_text() == "r"
    assert not (tmp_path / "nowhere").exists() and list((tmp_path / "d").iterdir()) == []


def test_the_report_writer_does_not_follow_a_planted_link(project, capsys):
    victim = project / "victim.txt"
    victim.write_text("precious", encoding="utf-8")
    (project / "reports").mkdir()
    from e2egen.nightly.store import Store

    with Store(project / "e2e.sqlite", create=False) as store:
        latest = store.latest_run().run_id
    for suffix in (".html", ".md"):
        (project / "reports" / f"report-{latest}{suffix}").symlink_to(victim)
    assert main(["report", "--store", "e2e.sqlite", "--out", "reports"]) == 0
    capsys.readouterr()
    assert victim.read_text() == "precious"
    written = [p for p in (project / "reports").iterdir()]
    assert written and not any(p.is_symlink() for p in written)


def _plant_links(tmp_path, name):
    """A link at `name` to an existing victim, and one at dangling-`name` to a file that does not exist."""
    victim = tmp_path / "victim.txt"
    victim.write_text("precious", encoding="utf-8")
    (tmp_path / name).symlink_to(victim)
    (tmp_path / f"dangling-{name}").symlink_to(tmp_path / "created-through-the-link")
    return victim


def _refuses_both(tmp_path, name, open_it):
    from e2egen.files import OutputError

    victim = _plant_links(tmp_path, name)
    for path in (tmp_path / name, tmp_path / f"dangling-{name}"):
        with pytest.raises(OutputError, match="symbolic link") as refused:
            open_it(path)
        assert str(path) in str(refused.value)
    assert victim.read_text() == "precious"
    assert not (tmp_path / "created-through-the-link").exists()


def test_records_are_never_appended_through_a_symbolic_link(tmp_path):
    from e2egen.nightly.records import RecordWriter

    _refuses_both(tmp_path, "run.jsonl", lambda path: RecordWriter(path).write({"type": "case"}))
    writer = RecordWriter(tmp_path / "real.jsonl")  # a plain file is appended to as before
    writer.write({"type": "case"})
    writer.close()
    assert (tmp_path / "real.jsonl").read_text(encoding="utf-8").count("\n") == 1


def test_a_run_lock_is_never_taken_through_a_symbolic_link(tmp_path):
    from e2egen.nightly.records import lock_run

    _refuses_both(tmp_path, "run.lock", lambda path: lock_run("run", path.with_suffix(".jsonl")))


def test_a_log_is_never_appended_through_a_symbolic_link(tmp_path):
    import os

    from e2egen.files import open_appending

    _refuses_both(tmp_path, "run.log", lambda path: os.close(open_appending(path, os.O_WRONLY | os.O_APPEND)))


def test_a_store_is_never_created_through_a_dangling_link(tmp_path):
    from e2egen.nightly.store import Store, StoreError

    (tmp_path / "e2e.sqlite").symlink_to(tmp_path / "elsewhere.sqlite")
    with pytest.raises(StoreError, match="symbolic link"):
        Store(tmp_path / "e2e.sqlite")
    assert not (tmp_path / "elsewhere.sqlite").exists()


WHAT = {"fifo": r"a named pipe \(FIFO\)", "directory": "a directory", "character device": "a character device"}


@pytest.mark.parametrize("special", sorted(WHAT))
def test_an_output_that_is_not_a_regular_file_is_refused_and_left_alone(tmp_path, special):
    """Renaming over a device or a pipe replaced it with a regular file (`import-rocmlir -o /dev/null` as root
    replaced the system's /dev/null); appending to a FIFO would wait for a reader."""
    from e2egen.files import OutputError, open_appending, write_text_atomically

    path = tmp_path / "out"
    if special == "fifo":
        os.mkfifo(path)
    elif special == "directory":
        path.mkdir()
    else:
        path = Path(os.devnull)  # only looked at: both writers refuse before touching it
    before = os.lstat(path)
    for write in (lambda: write_text_atomically(path, "x"), lambda: os.close(open_appending(path))):
        with pytest.raises(OutputError, match=rf"it is {WHAT[special]}, not a regular file"):
            write()
    after = os.lstat(path)
    assert (after.st_mode, after.st_ino, after.st_rdev) == (before.st_mode, before.st_ino, before.st_rdev)
