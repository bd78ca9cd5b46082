"""Element-wise evidence (studies/elementwise_evidence.py) and the guide's error table as an `e2egen study`."""
from __future__ import annotations

import subprocess
import sys

import pytest

from e2egen.generator.errors import CatalogueError


pytestmark = pytest.mark.usefixtures("fresh_profiles")  # tests/conftest.py


def test_the_evidence_passes_every_correct_kernel_and_catches_every_planted_bug(tmp_path):
    from studies import elementwise_evidence as evidence

    rows = evidence.evaluate(seeds=1)
    for kernel in evidence.KERNELS:
        for dtype, expected in kernel.expected.items():
            row = rows[(kernel.name, dtype)]
            assert row.runs > 0
            if expected == "inside":
                assert row.failed == 0, f"false failure: {kernel.name} {dtype} in {row.failing_ranges}"
            elif expected == "bug":
                assert row.failed == row.runs, f"planted bug missed: {kernel.name} {dtype}"
    # the fast forms said to be outside are caught where the analysis says, in f32 at least
    outside = {kernel.name: rows[(kernel.name, "f32")] for kernel in evidence.KERNELS if kernel.expected.get("f32") == "outside"}
    assert outside and all(row.failed > 0 for row in outside.values())
    text = evidence.render(rows, 1, 0.0)
    assert "Correct kernels: 0 false failures" in text


def study_file(tmp_path, body: str):
    path = tmp_path / "guide.toml"
    path.write_text('kind = "function_errors"\n' + body)
    return path


SUBSAMPLE = """
conversion_samples = 65536
[[group]]
name = "sqrt/rsqrt"
functions = ["sqrt", "rsqrt"]
guide = ["0.031227~0.062485", "0.000488", "0.002071~0.004158", "0.000172~0.000179"]
[[group]]
name = "exp"
functions = ["exp"]
[[conversion]]
name = "normal only"
range = [6.103515625e-05, 65504.0]
"""


def test_the_guide_study_reproduces_sqrt_rsqrt_and_the_conversion_error(tmp_path):
    from e2egen.diagnose.study import run_study, write_study
    from e2egen.diagnose.study_config import load_study

    result = run_study(load_study(study_file(tmp_path, SUBSAMPLE)), progress=None)
    by_name = {record.function: record for record in result.functions}
    # the guide: sqrt max abs 0.062485, mean abs 0.004158; rsqrt max abs 0.031227, mean abs 0.002071
    assert by_name["sqrt"].statistics["mean abs"] == pytest.approx(0.004158, rel=2e-3)
    assert by_name["rsqrt"].statistics["mean abs"] == pytest.approx(0.002071, rel=2e-3)
    assert by_name["rsqrt"].statistics["max abs"] == pytest.approx(0.031227, rel=1e-3)
    assert by_name["sqrt"].statistics["max rel"] == pytest.approx(2.0 ** -11, rel=1e-3)
    # torch's f16 kernels compute in f32: inside e2egen's interval; exp with its argument rounded to f16 is not
    assert by_name["exp"].outside_torch == 0 and by_name["exp"].outside_in_f16 > 0
    (conversion,) = result.conversions
    assert conversion.statistics["max abs"] == pytest.approx(16.0, rel=1e-3)  # half an ulp at 32768..65504
    assert conversion.statistics["max rel"] == pytest.approx(2.0 ** -11, rel=1e-2)  # a subsample: near the worst
    files = write_study(result, tmp_path / "out")
    text = files[0].read_text()
    assert "| sqrt/rsqrt | guide | 0.031227~0.062485 |" in text and "e2egen study" in text


@pytest.mark.parametrize("body, key, message", [
    ('kind = "tables"\n', "kind", "unknown study kind 'tables'"),
    ('[[group]]\nname = "g"\nfunctions = ["sinn"]\n', "group[0].functions[0]", "unknown function 'sinn'; valid: sin, cos"),
    ('[[conversion]]\nname = "c"\nrange = [1.0, 70000.0]\n', "conversion[0].range", "0 < low < high <= 65504"),
    ('inputs = "all"\n[[group]]\nname = "g"\nfunctions = ["sin"]\n', "inputs", "valid: normal, finite"),
])
def test_a_bad_study_names_the_key_the_value_and_the_choices(tmp_path, body, key, message):
    from e2egen.diagnose.study_config import load_study

    path = tmp_path / "bad.toml"
    path.write_text(body if body.startswith("kind") else 'kind = "function_errors"\n' + body)
    with pytest.raises(CatalogueError) as err:
        load_study(path)
    text = str(err.value) + " ".join(str(p) for p in err.value.problems)
    assert key in text and message in text


def test_the_cli_reports_a_bad_study_kind_with_exit_2_and_no_traceback(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text('kind = "tables"\n')
    done = subprocess.run([sys.executable, "-m", "e2egen", "study", str(path)], capture_output=True, text=True)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr and "unknown study kind 'tables'" in done.stderr + done.stdout
