"""The recorder plugin and records files: cases failing outside the fixture, torn lines, safe appends."""
from __future__ import annotations

import json
import multiprocessing
import subprocess
import sys

from e2egen.nightly.records import RecordTail, RecordWriter, read_records_file
from e2egen.nightly.recorder import case_id_of
from test_nightly_support import TINY_GEMM, tiny_project


def test_cases_that_fail_outside_the_fixture_are_recorded_failed_with_the_reason(tmp_path):
    project = tiny_project(tmp_path, TINY_GEMM)
    assert project.e2egen("gen", "configs.toml", "--out", "build/e2e").returncode == 0
    suite = tmp_path / "build/e2e"
    # The gemm module no longer imports; every conv case's fixture raises in setup.
    (suite / "test_mm.py").write_text((suite / "test_mm.py").read_text() + '\nraise RuntimeError("module is broken")\n')
    (suite / "test_tiny.py").write_text((suite / "test_tiny.py").read_text()
                                        + '\n\n@pytest.fixture\ndef e2e_case():\n    raise RuntimeError("fixture exploded")\n')
    records = tmp_path / "rec.jsonl"
    result = subprocess.run([sys.executable, "-m", "pytest", "build/e2e", "-q", "-p", "no:cacheprovider",
                             "--continue-on-collection-errors", "-p", "e2egen.nightly.recorder",
                             "--record", str(records), "--record-run-id", "r1",
                             "--global-seed", "4"], cwd=tmp_path, env=project.env, capture_output=True, text=True)
    assert result.returncode == 1, result.stdout + result.stderr
    objs = list(read_records_file(records))
    assert objs[0]["type"] == "run" and objs[0]["run_id"] == "r1" and objs[0]["global_seed"] == 4
    assert objs[-1]["type"] == "run_end"
    cases = {o["case_id"]: o for o in objs if o["type"] == "case"}
    assert len(cases) == 16 and len([o for o in objs if o["type"] == "case"]) == 16
    gemm = [o for cid, o in cases.items() if cid.startswith("mm/")]
    conv = [o for cid, o in cases.items() if cid.startswith("tiny/")]
    assert len(gemm) == 4 and len(conv) == 12
    for o in gemm:
        assert o["status"] == "failed" and o["phase"] == "collect" and "module is broken" in o["reason"]
        assert o["repro"].startswith(f"e2egen run {o['case_id']} --seed ")
    for o in conv:
        assert o["status"] == "failed" and o["phase"] == "setup" and "fixture exploded" in o["reason"]
        assert o["dtype"] in ("f32", "f16") and o["run_id"] == "r1" and o["global_seed"] == 4


def test_case_id_of_node_ids():
    assert case_id_of("build/e2e/test_x.py::test_case[resnet/conv2d/3x3/fwd/f16/nhwc/r0]") == "resnet/conv2d/3x3/fwd/f16/nhwc/r0"
    assert case_id_of("build/e2e/test_x.py") is None


def test_a_torn_last_line_is_skipped_and_the_next_writer_starts_a_fresh_line(tmp_path):
    path = tmp_path / "r.jsonl"
    writer = RecordWriter(path)
    writer.write({"type": "case", "case_id": "a"})
    writer.close()
    with open(path, "ab") as f:
        f.write(b'{"type": "case", "case_id": "torn", "metr')  # a kill in the middle of a write
    tail = RecordTail(path)
    assert [o["case_id"] for o in tail.poll()] == ["a"]
    writer = RecordWriter(path)
    writer.write({"type": "case", "case_id": "b"})
    writer.close()
    assert [o["case_id"] for o in tail.poll()] == ["b"] and tail.malformed == 1
    assert [o["case_id"] for o in read_records_file(path)] == ["a", "b"]


def _append_many(path: str, tag: str) -> None:
    writer = RecordWriter(path)
    for i in range(200):
        writer.write({"type": "case", "case_id": f"{tag}{i}", "pad": "x" * (i * 50)})
    writer.close()


def test_concurrent_appends_never_interleave(tmp_path):
    path = str(tmp_path / "r.jsonl")
    workers = [multiprocessing.Process(target=_append_many, args=(path, tag)) for tag in "abcd"]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    lines = (tmp_path / "r.jsonl").read_text().splitlines()
    assert len(lines) == 800 and all(json.loads(line)["type"] == "case" for line in lines)
