"""Files and stores under faults: full disks, unwritable paths, damaged and foreign stores, broken records files,
two writers of one run, run ids that are not names. Each is one line naming the file, exit 2, nothing half-written."""
from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from e2egen import files
from e2egen.cli import main
from e2egen.files import OutputError, write_text_atomically
from e2egen.generator.sources import source_digests
from e2egen.nightly.errors import NightlyError, RecordsError, RunBusy, StoreError
from e2egen.nightly.records import RecordTail, RecordWriter, check_run_id, lock_run, new_run_id, read_records_file
from e2egen.nightly.store import Store
from conftest import HANG_LIMIT
from loop_support import damage_store_page
from loop_support import COMMENTED, cases_of, fill_store, record

CASES = cases_of(COMMENTED)


def observed(case, run):
    return {"rms": 1e-7 if case.dtype == "f32" else 1e-5, "bound_ratio": 0.3, "max_abs_diff": 1e-4}


@pytest.fixture
def project(tmp_path):
    """A catalogue and a store of two runs (run1, run2) of its cases."""
    (tmp_path / "configs.toml").write_text(COMMENTED, encoding="utf-8")
    fill_store(tmp_path / "e2e.sqlite", CASES, 2, observed)
    return tmp_path


def cli(capsys, *args: str) -> tuple[int, str, str]:
    try:
        status = main([str(a) for a in args])
    except SystemExit as exit_:  # argparse's own errors
        status = exit_.code
    out, err = capsys.readouterr()
    return status, out, err


def user_error(status: int, err: str, *needles: str) -> str:
    """Assert exit 2 with one `error:` line holding every needle and no traceback; the line."""
    assert status == 2, err
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.startswith("error:") or ": error:" in line]
    assert len(lines) == 1, err
    for needle in needles:
        assert needle in lines[0], (needle, err)
    return lines[0]


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in Path(directory).rglob("*.tmp"))


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def disk_full_on(monkeypatch, name: str = "") -> None:
    """From now on, writing a file whose name contains `name` writes half of it and then fails with ENOSPC."""
    real = files.write_all

    def write_all(fd: int, data: bytes) -> None:
        target = os.readlink(f"/proc/self/fd/{fd}")
        if name in Path(target).name:
            os.write(fd, data[:len(data) // 2])
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real(fd, data)

    monkeypatch.setattr(files, "write_all", write_all)


# -- 1. atomic writes; disk full and unwritable paths -----------------------------------------------------------
def test_an_atomic_write_is_whole_keeps_the_mode_and_replaces_a_link(tmp_path):
    target = tmp_path / "real.txt"
    target.write_text("old", encoding="utf-8")
    target.chmod(0o640)
    write_text_atomically(target, "newer")
    assert target.read_text() == "newer" and (target.stat().st_mode & 0o777) == 0o640
    link = tmp_path / "link.txt"
    link.symlink_to(target)
    write_text_atomically(link, "new")  # the link is replaced, never written through (issue 46)
    assert not link.is_symlink() and link.read_text() == "new" and target.read_text() == "newer"
    fresh = write_text_atomically(tmp_path / "a" / "b" / "new.txt", "x")  # parents made
    assert fresh.read_text() == "x" and (fresh.stat().st_mode & 0o777) == 0o666 & ~_umask()
    assert leftovers(tmp_path) == []


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_a_full_disk_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    target = tmp_path / "out.txt"
    target.write_text("the old text", encoding="utf-8")
    disk_full_on(monkeypatch)
    with pytest.raises(OutputError) as info:
        write_text_atomically(target, "x" * 100_000)
    assert str(info.value) == f"{target}: cannot write: disk full (no space left on the device); the file was left as it was"
    assert isinstance(info.value, OSError) and info.value.errno == errno.ENOSPC
    assert target.read_text(encoding="utf-8") == "the old text" and leftovers(tmp_path) == []
    with pytest.raises(OutputError, match="no-such.txt: cannot write: disk full"):
        write_text_atomically(tmp_path / "no-such.txt", "y")
    assert not (tmp_path / "no-such.txt").exists() and leftovers(tmp_path) == []


def test_gen_on_a_full_disk_keeps_the_manifest_whole(tmp_path, capsys, monkeypatch):
    catalogue, out = tmp_path / "configs.toml", tmp_path / "e2e"
    catalogue.write_text(COMMENTED, encoding="utf-8")
    assert cli(capsys, "gen", catalogue, "--out", out)[0] == 0
    manifest = out / "manifest.json"
    before = digest(manifest)
    disk_full_on(monkeypatch, "manifest.json")
    status, _, err = cli(capsys, "gen", catalogue, "--out", out, "--seed", "99")
    user_error(status, err, f"{manifest}: cannot write: disk full")
    assert digest(manifest) == before and json.loads(manifest.read_text())["global_seed"] == 7
    assert leftovers(tmp_path) == []


def test_outputs_that_cannot_be_written_are_one_line_naming_them(tmp_path, capsys):
    """Checked when the arguments are parsed (commands/arguments.py) and again when writing (e2egen.files)."""
    catalogue = tmp_path / "configs.toml"
    catalogue.write_text(COMMENTED, encoding="utf-8")
    blocker = tmp_path / "file"
    blocker.write_text("x")
    user_error(*cli(capsys, "gen", catalogue, "--out", blocker)[::2], str(blocker))
    user_error(*cli(capsys, "gen", catalogue, "--out", blocker / "sub")[::2], str(blocker))
    assert blocker.read_text() == "x"
    with pytest.raises(OutputError, match=f"{blocker}: cannot write: a file is in the way"):
        files.make_directory(blocker)
    with pytest.raises(OutputError, match=f"{blocker}/sub: cannot write: its directory {blocker}: a file is in the way"):
        write_text_atomically(blocker / "sub", "y")
    with pytest.raises(OutputError, match=f"{tmp_path}: cannot write: it is a directory"):
        write_text_atomically(tmp_path, "y")
    from e2egen.nightly.report import write_report

    fill_store(tmp_path / "e.sqlite", CASES, 1, observed)
    with Store(tmp_path / "e.sqlite") as store, pytest.raises(OutputError, match="a file is in the way"):
        write_report(store, blocker)
    assert blocker.read_text() == "x"


def test_report_on_a_full_disk_and_on_a_file(project, capsys, monkeypatch):
    reports = project / "reports"
    assert cli(capsys, "report", "--store", project / "e2e.sqlite", "--out", reports)[0] == 0
    html = reports / "report-run2.html"
    before = digest(html)
    disk_full_on(monkeypatch, ".html")
    status, _, err = cli(capsys, "report", "run1", "--store", project / "e2e.sqlite", "--out", reports)
    user_error(status, err, "report-run1.html: cannot write: disk full")
    assert not (reports / "report-run1.html").exists() and digest(html) == before and leftovers(project) == []
    status, _, err = cli(capsys, "report", "--store", project / "e2e.sqlite", "--out", project / "configs.toml")
    user_error(status, err, f"{project / 'configs.toml'}")


def test_calibrate_write_on_a_full_disk_keeps_the_catalogue(project, capsys, monkeypatch):
    catalogue = project / "configs.toml"
    disk_full_on(monkeypatch, "configs.toml")
    status, _, err = cli(capsys, "calibrate", "-c", catalogue, "--store", project / "e2e.sqlite", "--runs", "2", "--write")
    user_error(status, err, f"{catalogue}: cannot write: disk full")
    assert catalogue.read_text(encoding="utf-8") == COMMENTED and leftovers(project) == []


def test_select_output_full_disk_directory_and_under_a_file(project, capsys, monkeypatch):
    store, catalogue = project / "e2e.sqlite", project / "configs.toml"
    args = ("select", "-c", catalogue, "--store", store, "--budget", "1h")
    status, _, err = cli(capsys, *args, "--out", project)
    user_error(status, err, f"{project}")
    status, _, err = cli(capsys, *args, "--out", catalogue / "pr.toml")
    user_error(status, err, f"{catalogue}")
    disk_full_on(monkeypatch, "pr.toml")
    status, _, err = cli(capsys, *args, "--out", project / "pr.toml")
    user_error(status, err, "pr.toml: cannot write: disk full")
    assert not (project / "pr.toml").exists() and leftovers(project) == []


def test_an_arithmetic_profile_on_a_full_disk(tmp_path, monkeypatch):
    from e2egen.runner.arithmetic.model import Arithmetic
    from e2egen.runner.arithmetic.profile import DeviceKey, Profile, read_profile

    key = DeviceKey.of("cpu", "torch", {"torch": "0.0"})
    path = tmp_path / key.file_name
    Profile(key, {"gemm/fwd/f32/nn": Arithmetic(acc_bits=24)}).write(path)
    before = digest(path)
    disk_full_on(monkeypatch)
    with pytest.raises(OutputError, match="cannot write: disk full"):
        Profile(key, {"gemm/fwd/f32/nn": Arithmetic(acc_bits=11)}).write(path)
    assert digest(path) == before and read_profile(path).cells["gemm/fwd/f32/nn"].acc_bits == 24
    assert leftovers(tmp_path) == []


def test_a_records_append_on_a_full_disk_leaves_no_partial_line(tmp_path, monkeypatch, capsys):
    path = tmp_path / "r.jsonl"
    writer = RecordWriter(path)
    writer.write({"type": "run", "run_id": "r1"})
    disk_full_on(monkeypatch, "r.jsonl")
    with pytest.raises(OutputError, match="r.jsonl: cannot write: disk full"):
        writer.write({"type": "case", "case_id": "x" * 1000})
    writer.close()
    assert path.read_text() == '{"type":"run","run_id":"r1"}\n'  # cut back to its last whole line


# -- 2. stores: damaged, non-JSON records, foreign databases; records files -----------------------------------

@pytest.mark.parametrize("table", ["records", "runs"])
def test_a_damaged_store_page_is_a_message_in_every_command(project, capsys, table):
    store, catalogue = project / "e2e.sqlite", project / "configs.toml"
    damaged = project / "damaged.sqlite"
    shutil.copy(store, damaged)
    damage_store_page(damaged, table)
    expected = f"{damaged}: the results store is damaged (database disk image is malformed)"
    commands = [("runs", "--store", damaged),
                ("report", "--store", damaged, "--out", project / "reports"),
                ("calibrate", "-c", catalogue, "--store", damaged),
                ("select", "-c", catalogue, "--store", damaged, "--out", project / "pr.toml"),
                ("merge", damaged, "--store", project / "merged.sqlite"),  # a damaged input
                ("merge", "run1", "--store", damaged)]  # a damaged target
    for command in commands:
        status, _, err = cli(capsys, *command)
        user_error(status, err, expected)
    assert not (project / "pr.toml").exists()


def test_a_damaged_store_stops_nightly_with_a_message(project, capsys):
    damaged = project / "damaged.sqlite"
    shutil.copy(project / "e2e.sqlite", damaged)
    damage_store_page(damaged, "runs")
    status, _, err = cli(capsys, "nightly", "-c", project / "configs.toml", "--store", damaged, "--out", project / "e2e",
                         "--resume", "run1", "--no-gen", "--no-progress", "--device", "cpu")
    user_error(status, err, f"{damaged}: the results store is damaged")


def test_a_record_that_is_not_json_names_the_store_run_and_case(project, capsys):
    store, catalogue = project / "e2e.sqlite", project / "configs.toml"
    case_id = CASES[0].id
    with sqlite3.connect(store) as db:
        db.execute("UPDATE records SET record = '{not json' WHERE run_id = 'run2' AND case_id = ?", (case_id,))
    db.close()
    expected = f"{store}: run run2, case {case_id}: the stored record is not JSON"
    for command in [("report", "--store", store, "--out", project / "reports"),
                    ("calibrate", "-c", catalogue, "--store", store),
                    ("select", "-c", catalogue, "--store", store, "--out", project / "pr.toml"),
                    ("merge", "run2", "--store", store),
                    ("merge", f"{store}#run2", "--store", project / "other.sqlite")]:
        status, _, err = cli(capsys, *command)
        user_error(status, err, expected)
    with sqlite3.connect(store) as db:  # JSON, but not a record
        db.execute("UPDATE records SET record = '{\"type\": \"case\"}' WHERE run_id = 'run2' AND case_id = ?", (case_id,))
    db.close()
    status, _, err = cli(capsys, "report", "--store", store, "--out", project / "reports")
    user_error(status, err, f"run run2, case {case_id}: the stored record is damaged", "lacks the field")
    with sqlite3.connect(store) as db:  # a run's machine column
        db.execute("UPDATE runs SET machine = '{' WHERE run_id = 'run1'")
    db.close()
    status, _, err = cli(capsys, "runs", "--store", store)
    user_error(status, err, f"{store}: run run1: its `machine` is not a JSON dict")


def test_a_merge_is_stored_whole_or_not_at_all(project, capsys, monkeypatch):
    from e2egen.nightly.store import store_error

    store = project / "e2e.sqlite"
    before = [(r.run_id, r.merged_into, r.recorded) for r in Store(store).runs()]

    def full(self, run_id, **fields):  # the last write of a merge meets a full disk
        raise store_error(self.path, sqlite3.OperationalError("database or disk is full"))

    monkeypatch.setattr(Store, "set_run_fields", full)
    status, _, err = cli(capsys, "merge", "run1", "run2", "--store", store, "--run-id", "merged")
    user_error(status, err, f"{store}: cannot write: disk full", "nothing of it was stored")
    with Store(store) as opened:
        assert [(r.run_id, r.merged_into, r.recorded) for r in opened.runs()] == before
        assert not opened.has_run("merged")
    monkeypatch.undo()
    assert cli(capsys, "merge", "run1", "run2", "--store", store, "--run-id", "merged")[0] == 0
    with Store(store) as opened:
        assert opened.run("run1").merged_into == "merged" and opened.run("merged").recorded == len(CASES)


def foreign_database(path: Path) -> str:
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
        db.execute("INSERT INTO users (name) VALUES ('ada')")
    db.close()
    return digest(path)


def test_another_applications_database_is_refused_untouched(tmp_path, capsys):
    foreign = tmp_path / "app.sqlite"
    before = foreign_database(foreign)
    with pytest.raises(StoreError, match="not an e2egen results store .it holds users.; it was left untouched"):
        Store(foreign)
    records_file = tmp_path / "r.jsonl"
    records_file.write_text("".join(json.dumps(o) + "\n" for o in
                                    [{"type": "run", "run_id": "r1"}, record(CASES[0], "r1", observed(CASES[0], 0))]))
    for command in [("merge", records_file, "--store", foreign), ("runs", "--store", foreign),
                    ("report", "--store", foreign), ("merge", foreign, "--store", tmp_path / "new.sqlite")]:
        status, _, err = cli(capsys, *command)
        user_error(status, err, f"{foreign}: not an e2egen results store")
    assert digest(foreign) == before
    with sqlite3.connect(foreign) as db:
        assert [r[0] for r in db.execute("SELECT name FROM sqlite_master")] == ["users"]
    db.close()
    # A meta table that is not e2egen's (no schema version) is foreign too; an empty file becomes a new store.
    other = tmp_path / "meta.sqlite"
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    db.close()
    with pytest.raises(StoreError, match="not an e2egen results store"):
        Store(other)
    empty = tmp_path / "empty.sqlite"
    empty.touch()
    with Store(empty) as store:
        assert store.runs() == []


def records_file(path: Path, *lines: str) -> Path:
    path.write_text("".join(lines), encoding="utf-8")
    return path


def line(obj) -> str:
    return json.dumps(obj) + "\n"


def test_records_lines_with_missing_fields_name_file_line_and_field(tmp_path, capsys):
    case = record(CASES[0], "r1", observed(CASES[0], 0))
    path = records_file(tmp_path / "r.jsonl", line({"type": "run", "run_id": "r1"}),
                        line({k: v for k, v in case.items() if k != "status"}))
    status, _, err = cli(capsys, "merge", path, "--store", tmp_path / "e.sqlite")
    user_error(status, err, f"{path}:2: case record {CASES[0].id!r} lacks the field status")
    path = records_file(path, line({"type": "run", "run_id": "r1"}), line({**case, "metrics": [1, 2]}))
    status, _, err = cli(capsys, "merge", path, "--store", tmp_path / "e.sqlite")
    user_error(status, err, f"{path}:2: case record", "field 'metrics' must be an object, not a list")
    with Store(tmp_path / "e.sqlite") as store:  # nothing of the failed merges was stored
        assert store.runs() == []
        with pytest.raises(RecordsError, match=r"s.jsonl:1: case record lacks the fields case_id, status"):
            store.ingest_file(records_file(tmp_path / "s.jsonl", line({"type": "case", "run_id": "r1"})))


def test_a_garbage_line_in_the_middle_is_an_error_naming_file_and_line(tmp_path, capsys):
    good = [line({"type": "run", "run_id": "r1"})] + [line(record(c, "r1", observed(c, 0))) for c in CASES[:2]]
    for garbage, why in [("hello world\n", "not JSON"), ("[1, 2]\n", "not an object"),
                         ('{"type": "case"} trailing\n', "not JSON"), ("\xff\xfe\n", "not JSON")]:
        path = records_file(tmp_path / "r.jsonl", good[0], good[1], garbage, good[2])
        status, _, err = cli(capsys, "merge", path, "--store", tmp_path / "e.sqlite")
        user_error(status, err, f"{path}:3: not a record", why)
    path = tmp_path / "bin.jsonl"
    path.write_bytes(good[0].encode() + b"\x80\x81 binary\n" + good[1].encode())
    user_error(*cli(capsys, "merge", path, "--store", tmp_path / "e.sqlite")[::2], f"{path}:2: not a record", "not UTF-8")


def test_a_truncated_last_line_is_skipped_with_a_warning(tmp_path, capsys):
    lines = [line({"type": "run", "run_id": "r1"})] + [line(record(c, "r1", observed(c, 0))) for c in CASES[:3]]
    path = records_file(tmp_path / "r.jsonl", *lines[:3], lines[3][:150])  # a writer killed mid-line
    status, out, err = cli(capsys, "merge", path, "--store", tmp_path / "e.sqlite")
    assert status == 3 and "2 cases" in out and "INCOMPLETE" in out, err  # the killed run never ended (issue 46)
    assert f"warning: {path}:4: the last line is cut off" in err
    # A torn line in the middle (a killed writer, then a resume appending after it): skipped and named too.
    path = records_file(tmp_path / "t.jsonl", *lines[:2], lines[2][:99] + "\n", lines[3])
    warned: list[str] = []
    objects = list(read_records_file(path, validate=True, warn=warned.append))
    assert [o.get("case_id") for o in objects][1:] == [CASES[0].id, CASES[2].id]
    assert warned == [f"{path}:3: a torn line (a writer killed or out of disk space mid-line); skipped"]
    # The sweep's live reader is lenient (pytest may still be writing) but names what it skipped, file:line.
    tail = RecordTail(path, offset=len(lines[0].encode()))
    assert len(tail.poll()) == 2 and tail.malformed == 1 and tail.problems[0].startswith(f"{path}:3: a torn line")


# -- 3. one writer per run ----------------------------------------------------------------------------------------
def test_one_writer_per_run(tmp_path):
    records = tmp_path / "runs" / "r1.jsonl"
    lock = lock_run("r1", records)
    with pytest.raises(RunBusy) as info:
        lock_run("r1", records)
    assert str(info.value).startswith(f"run r1 is being written by another process (pid {os.getpid()})")
    lock.release()
    with lock_run("r1", records):  # free again
        pass
    # Another process holds it; when it dies, however it dies, the lock is free.
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys, time
        from e2egen.nightly.records import lock_run
        lock = lock_run("r1", {str(records)!r})
        print("locked", flush=True)
        time.sleep({HANG_LIMIT})  # holds the lock until the test kills it
        """)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(RunBusy, match=rf"run r1 is being written by another process \(pid {holder.pid}\)"):
            lock_run("r1", records)
    finally:
        holder.kill()
        holder.wait()
    lock_run("r1", records).release()


def _sweep_takes_the_run_lock() -> bool:
    from e2egen.nightly import sweep

    return "lock_run" in Path(sweep.__file__).read_text(encoding="utf-8")


@pytest.mark.skipif(not _sweep_takes_the_run_lock(), reason="the sweep does not take the run lock yet (nightly/sweep.py)")
def test_a_second_resume_of_a_run_being_written_exits_2(tmp_path, capsys):
    out, records = tmp_path / "e2e", tmp_path / "runs" / "r1.jsonl"
    out.mkdir()
    (tmp_path / "c.toml").write_text("# the catalogue of an empty suite\n", encoding="utf-8")
    current = {"catalogue": "../c.toml", "sources": source_digests(tmp_path / "c.toml", None)}  # not stale
    (out / "manifest.json").write_text(json.dumps({**current, "cases": []}), encoding="utf-8")
    with Store(tmp_path / "e.sqlite") as store:
        store.upsert_run({"run_id": "r1", "global_seed": 1, "started": "2025-01-01T00:00:00Z",
                          "records_path": str(records), "selected": 0})
    with lock_run("r1", records):
        status, _, err = cli(capsys, "nightly", "--store", tmp_path / "e.sqlite", "--out", out, "--resume", "r1",
                             "--no-gen", "--no-report", "--no-progress", "--device", "cpu", "--workers", "0")
    user_error(status, err, f"run r1 is being written by another process (pid {os.getpid()})")


# -- 4. run ids are names -------------------------------------------------------------------------------------------
BAD_IDS = ["a/b<script>", "../x", "", "-r", "x y", "é", "a" * 65, ".hidden"]


@pytest.mark.parametrize("bad", BAD_IDS)
def test_bad_run_ids_are_refused(bad):
    with pytest.raises(NightlyError, match="expected a name of 1 to 64 letters"):
        check_run_id(bad)


def test_good_run_ids():
    for good in [new_run_id(), "20261124-003111-2e42", "r1", "nightly.2025-01-14_a", "a" * 64]:
        assert check_run_id(good) == good


def test_run_ids_are_checked_wherever_they_are_accepted(project, capsys):
    store, catalogue = project / "e2e.sqlite", project / "configs.toml"
    records_path = records_file(project / "r.jsonl", line({"type": "run", "run_id": "r1"}),
                                line(record(CASES[0], "r1", observed(CASES[0], 0))))
    valid_form = "expected a name of 1 to 64 letters"
    for command in [("merge", records_path, "--store", store, "--run-id", "a/b<script>"),
                    ("report", "a/b", "--store", store), ("report", "--against", "../x", "--store", store),
                    ("calibrate", "-c", catalogue, "--store", store, "x y")]:
        status, _, err = cli(capsys, *command)
        assert status == 2 and valid_form in err and "Traceback" not in err, err
    status, _, err = cli(capsys, "nightly", "-c", catalogue, "--store", store, "--out", project / "e2e",
                         "--resume", "../x", "--no-gen", "--no-progress", "--device", "cpu")
    user_error(status, err, "run id '../x' is not valid", valid_form)
    bad_header = records_file(project / "bad.jsonl", line({"type": "run", "run_id": "a/b<script>"}))
    status, _, err = cli(capsys, "merge", bad_header, "--store", store)
    user_error(status, err, f"{bad_header}:1: run record: run id 'a/b<script>' is not valid")
    with Store(store) as opened:
        with pytest.raises(NightlyError, match=valid_form):
            opened.upsert_run({"run_id": "a/b"})
        assert "a/b" not in [r.run_id for r in opened.runs()]
    # A run stored before ids were checked is still found, and its report gets a safe file name.
    with sqlite3.connect(store) as db:
        db.execute("INSERT INTO runs (run_id, started) VALUES ('a/b<x>', '2099-01-01T00:00:00Z')")
    db.close()
    status, out, err = cli(capsys, "report", "--store", store, "--out", project / "reports")
    assert status == 0 and (project / "reports" / "report-a_b_x_.html").exists(), err
