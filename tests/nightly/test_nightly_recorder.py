"""The recorder plugin and records files: cases failing outside the fixture, torn lines, safe appends."""
from __future__ import annotations

import json
import multiprocessing
import subprocess
import sys

from e2egen.invocation import e2egen_command
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
                             "--e2e-record", str(records), "--e2e-record-run-id", "r1",
                             "--e2e-global-seed", "4"], cwd=tmp_path, env=project.env, capture_output=True, text=True)
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
        assert o["repro"].startswith(f"{e2egen_command()} run {o['case_id']} --seed ")
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


# -- the arithmetic of a case's cell -------------------------------------------------------
def _measured(origin: str = "shipped profile cpu--torch.toml", **findings):
    from e2egen.runner.arithmetic.lookup import Measured
    from e2egen.runner.arithmetic.model import Arithmetic, CellKey
    from e2egen.runner.arithmetic.profile import DeviceKey

    return Measured(Arithmetic(**findings), CellKey("conv2d", "bwd_data", "f16", "nchw", "window"),
                    DeviceKey.of("NVIDIA H100", "cudnn", {"torch": "2.5.1", "cudnn": "90100"}), origin)


def _outcome(arithmetic=None):
    from types import SimpleNamespace

    from e2egen.generator.case_id import CaseId

    key = CaseId.parse("s/conv2d/c/bwd_data/f16/nchw/r0")
    case = SimpleNamespace(id=str(key), key=key, params={"n": 1}, seed=3, tolerances={"rms": 1e-3},
                           reference=SimpleNamespace(to_catalogue=lambda: {"device": "cpu"}), flops=10)
    return SimpleNamespace(case=case, status="passed", reason="", device="NVIDIA H100", repro="e2egen run x",
                           comparison=None, verdict=None, timings={"kernel": 0.5}, arithmetic=arithmetic)


def _from_outcome(outcome):
    from e2egen.nightly.records import record_from_outcome

    return record_from_outcome(outcome, run_id="r1", global_seed=1, nodeid="n", worker="gw0", duration=0.0,
                               versions={"torch": "2.5.1"}, finished="t")


def test_a_record_carries_the_arithmetic_of_its_cell_and_round_trips(tmp_path):
    from e2egen.nightly.records import CaseRecord
    from e2egen.nightly.store import Store

    record = _from_outcome(_outcome(_measured("probed now, cached in /c/nvidia-h100--cudnn.toml", acc_bits=11,
                                              rounding="toward-zero", probed_with="n=1")))
    assert record.arithmetic == {
        "cell": "conv2d/bwd_data/f16/nchw/window", "device": "NVIDIA H100", "impl": "cudnn",
        "versions": {"cudnn": "90100", "torch": "2.5.1"}, "origin": "probed now, cached in /c/nvidia-h100--cudnn.toml",
        "findings": {**_measured().arithmetic.to_table(), "acc_bits": 11, "rounding": "toward-zero", "probed_with": "n=1"}}
    # Through a records file (JSON) and the store, unchanged.
    path = tmp_path / "rec.jsonl"
    writer = RecordWriter(path)
    writer.write({"type": "run", "run_id": "r1"})
    writer.write(record.to_dict())
    writer.close()
    (obj,) = [o for o in read_records_file(path) if o["type"] == "case"]
    assert obj["arithmetic"]["findings"]["acc_bits"] == 11 and CaseRecord.from_dict(obj) == record
    with Store(tmp_path / "e.sqlite") as store:
        assert store.ingest_file(path).added == 1
        (stored,) = store.records("r1")
        assert stored == record and stored.arithmetic["origin"].startswith("probed now")


def test_records_without_arithmetic_read_as_none(tmp_path):
    from e2egen.nightly.records import CaseRecord
    from e2egen.nightly.store import Store

    record = _from_outcome(_outcome())  # an Outcome from before the runner measured arithmetic
    assert record.arithmetic is None and record.to_dict()["arithmetic"] is None
    old = record.to_dict()
    del old["arithmetic"]  # a record written before the key existed
    assert CaseRecord.from_dict(old).arithmetic is None
    with Store(tmp_path / "e.sqlite") as store:
        assert store.ingest([{"type": "run", "run_id": "r1"}, old]).added == 1
        assert store.records("r1")[0].arithmetic is None


def test_a_malformed_arithmetic_costs_the_record_only_its_arithmetic():
    import pytest

    with pytest.warns(UserWarning, match="could not record the arithmetic"):
        record = _from_outcome(_outcome(arithmetic=object()))
    assert record.arithmetic is None and record.timings == {"kernel": 0.5}
