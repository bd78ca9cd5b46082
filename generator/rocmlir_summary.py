"""What an import of rocMLIR catalogues covers: per file, rocMLIR's cases, those expressed, and why the rest are not.

A rocMLIR case is one test crossed with one combination of axis values that
its excludes keep (what rocMLIR's generateE2ETest.py runs). It is expressed
when the e2egen catalogue runs it (cases that differ only in a merged axis
such as schedule_version are one e2egen case; each still counts here).
`summarize` gives the JSON form (`e2egen import-rocmlir --summary`),
`to_markdown` the page docs/evidence/rocmlir-import.md is.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable, Mapping

from e2egen.generator.rocmlir import NOT_IMPORTED, Conversion

UNREADABLE = "file unreadable (invalid TOML or not a rocMLIR catalogue)"

# The page's notes: how rocMLIR's low-bit gemm flags map, read from ROCm/rocMLIR's
# mlir/tools/rocmlir-gen/rocmlir-gen.cpp (the functions named in the text).
NOTES = """\
## Notes: fp4 and scaled gemms

What rocMLIR's flags mean, from `mlir/tools/rocmlir-gen/rocmlir-gen.cpp` (ROCm/rocMLIR; the functions named), and
what they import as:

| rocmlir-gen | there | e2egen |
| --- | --- | --- |
| `-t f4E2M1FN` | A and B f4E2M1FN (`typeFromString`); the `-t` callback makes the output f32, as for the fp8 names | dtype `f4e2m1` (gemm's f32 output); gemm and scaled gemm only |
| `-out_dtype` (`-out_datatype`, `-c_dtype`, `-to`, `-tc`) | C's type; `-t` sets it only when it is not given | of an fp8/fp4 gemm or scaled gemm: f32 (the default), bf16, f16 → `out_dtype`; bf16/f16 outputs get that format's rms and no relDiff (`createVerifierFunc`: RMS 0.001, relDiff 100 for f16/bf16 outputs). Other types are left out |
| `--scaledGemm` (bool, default false) | `--operation gemm` with two more inputs, scaleA and scaleB (`getGemmTypes`); no other operation reads it | op `scaled_gemm`, `scaling = "mx"` (its default) |
| `-quantBlockSize` (default 32) | quantK = ⌈k / quantBlockSize⌉ scales along K; the CPU reference reads scale k floordiv quantBlockSize (`createCpuGemmKernelWithMlir`) | `block`, written when not 32 (mx's default) |
| `-scale_a_dtype`, `-scale_b_dtype` (default f8E8M0FNU) | the scale tensors' types. The GPU kernel converts f32 scales to E8M0 (`arith.truncf`, `createGpuGemmKernel`); the CPU reference multiplies by the f32 values | f8E8M0FNU → `e8m0` (the default), f32 → `f32`; others left out |
| `--transA`, `--transB` | A stored (g, k, m), B (g, n, k) | the first two layout letters, as gemm's |
| `--transScaleA` (default false) | scaleA stored (g, m, quantK), or (g, quantK, m) | third letter: `n`, or `t` |
| `--transScaleB` (default false) | scaleB stored (g, n, quantK), or (g, quantK, n) | fourth letter: `t`, or `n` (scale_b's logical shape is (⌈k/blk⌉, n)). `nt`, K contiguous in both, is what the two-letter layouts mean, so only other storage gets four letters |
| `--transC` | C stored (g, n, m) | merged: e2egen compares the logical output |
| `-g` | the batch; the scales get it too | `batch` (g = 1: none) |

Data. rocmlir-gen fills every input alike, scaleA and scaleB too (`populateRandomTensorFillLogic`: f32 draws stored
with `arith.truncf` to the tensor's type; `-rand none`: ones; the fixed pattern is 1, -4, 0.5, 1.5 for f4E2M1FN and
powers of two for f8E8M0FNU, `getTensorInitPattern`). e2egen's scaled_gemm quantizes real data instead (each
block's scale from its largest magnitude), which each imported config's report says. Its integers -5..4 lose -5 in
fp4 (stored as -4; fp4 holds the integers up to 4): the integer range imports as -4..4. `-rand none` becomes
scaled_gemm's pattern `ones` (A = B = 1, power-of-two scales, an exact result; rocMLIR's case is the one with every
scale 1). rocMLIR's f32-scale catalogues use `-rand none` because its GPU kernel and CPU reference disagree on f32
scales that are not powers of two (GemmScaledF4Regression.toml says so).

fp4 gemms with odd k (GemmVariantsF4's `-k 769` and `-k 1`, GemmDirectToLDSF4's `-k 1`; `getGemmTypes` has no
even-k rule) import too: e2egen packs fp4 two values a byte along K and pads an odd K with a zero nibble.
"""


@dataclass(frozen=True)
class FileSummary:
    file: str
    rocmlir_cases: int
    expressed: int
    not_expressed: Mapping[str, int] = field(default_factory=dict)  # reason -> rocMLIR cases
    suites: int = 0
    configs: int = 0
    e2egen_cases: int = 0  # the imported catalogue's cases once merged axes collapse
    items_not_imported: int = 0  # the report's "not imported" items
    error: str | None = None  # the file could not be read (its cases are unknown)

    @classmethod
    def of(cls, file: str, conversion: Conversion, e2egen_cases: int) -> "FileSummary":
        reasons = Counter(case.reason for case in conversion.cases if not case.expressed)
        return cls(
            file=file, rocmlir_cases=len(conversion.cases), expressed=sum(c.expressed for c in conversion.cases),
            not_expressed=dict(sorted(reasons.items(), key=lambda item: (-item[1], item[0]))),
            suites=len(conversion.suites), configs=sum(len(s.configs) for s in conversion.suites),
            e2egen_cases=e2egen_cases, items_not_imported=len(conversion.notes_of(NOT_IMPORTED)),
        )

    @classmethod
    def unreadable(cls, file: str, error: str) -> "FileSummary":
        return cls(file=file, rocmlir_cases=0, expressed=0, error=error)

    @property
    def imported(self) -> bool:
        return self.error is None and self.suites > 0

    def to_dict(self) -> dict:
        data = {"file": self.file, "rocmlir_cases": self.rocmlir_cases, "expressed": self.expressed,
                "not_expressed": dict(self.not_expressed), "suites": self.suites, "configs": self.configs,
                "e2egen_cases": self.e2egen_cases, "items_not_imported": self.items_not_imported}
        if self.error is not None:
            data["error"] = self.error
        return data


def summarize(files: Iterable[FileSummary]) -> dict:
    """The JSON summary: every file, then the totals (and the reasons over all files)."""
    files = list(files)
    reasons: Counter = Counter()
    for summary in files:
        reasons.update(summary.not_expressed)
    rocmlir = sum(f.rocmlir_cases for f in files)
    expressed = sum(f.expressed for f in files)
    totals = {
        "files": len(files), "files_imported": sum(f.imported for f in files),
        "files_nothing_imported": sum(f.error is None and not f.imported for f in files),
        "files_unreadable": sum(f.error is not None for f in files),
        "rocmlir_cases": rocmlir, "expressed": expressed,
        "expressed_percent": round(100.0 * expressed / rocmlir, 1) if rocmlir else 0.0,
        "e2egen_cases": sum(f.e2egen_cases for f in files),
        "not_expressed": dict(sorted(reasons.items(), key=lambda item: (-item[1], item[0]))),
    }
    return {"files": [f.to_dict() for f in files], "totals": totals}


def to_markdown(summary: Mapping, command: str) -> str:
    """docs/evidence/rocmlir-import.md: how it was made, the totals, the reasons, one row per file."""
    totals = summary["totals"]
    lines = [
        "# rocMLIR catalogues imported: coverage",
        "",
        f"Generated by `{command}` (see docs/how-to/import-rocmlir.md); do not edit by hand.",
        "",
        "A rocMLIR case is one `[[suite.test]]` crossed with one combination of `[[axis]]` values that the",
        "test's excludes keep, i.e. what rocMLIR's generateE2ETest.py runs. *Expressed*: the imported catalogue",
        "runs it (cases that differ only in a merged axis such as `schedule_version` are one e2egen case).",
        "",
        "## Totals",
        "",
        "| | |",
        "| --- | ---: |",
        f"| files | {totals['files']:,} |",
        f"| files imported | {totals['files_imported']:,} |",
        f"| files with nothing to import (exit 3) | {totals['files_nothing_imported']:,} |",
        f"| files unreadable (invalid TOML) | {totals['files_unreadable']:,} |",
        f"| rocMLIR cases (readable files) | {totals['rocmlir_cases']:,} |",
        f"| expressed | {totals['expressed']:,} ({totals['expressed_percent']} %) |",
        f"| e2egen cases written | {totals['e2egen_cases']:,} |",
        "",
        "## Not expressed, by reason",
        "",
        "| reason | rocMLIR cases |",
        "| --- | ---: |",
        *[f"| {_cell(reason)} | {count:,} |" for reason, count in totals["not_expressed"].items()],
        "",
        NOTES,
        "## Per file",
        "",
        "| file | rocMLIR cases | expressed | e2egen cases | not expressed (reason: cases) |",
        "| --- | ---: | ---: | ---: | --- |",
    ]
    for entry in summary["files"]:
        if "error" in entry:
            lines.append(f"| {entry['file']} | ? | 0 | 0 | {_cell(UNREADABLE)}: {_cell(entry['error'])} |")
            continue
        why = "; ".join(f"{_cell(reason)}: {count:,}" for reason, count in entry["not_expressed"].items()) or "—"
        lines.append(f"| {entry['file']} | {entry['rocmlir_cases']:,} | {entry['expressed']:,} | "
                     f"{entry['e2egen_cases']:,} | {why} |")
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    """Text safe in a Markdown table cell: one line, pipes escaped."""
    return " ".join(str(text).split()).replace("|", "\\|")
