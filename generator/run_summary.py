"""The summary a generated suite's run ends with: what was accepted and why, what failed and what to do next.

Each case's test attaches one user property (`case_facts`), which pytest-xdist carries from its workers to
the controller; `Summary`, registered on the controller only, collects them and writes its section after
pytest's own. The facts are plain data (strings and lists), so they cross processes as they are.
"""
from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from e2egen.generator.execute import Outcome

PROPERTY = "e2egen"
SHOWN_FAILURES = 10  # failures listed with their next step; the rest are counted


def case_facts(outcome: Outcome) -> dict[str, Any]:
    """What the summary needs of one Outcome (generator.execute)."""
    from e2egen.generator.execute import next_steps

    facts: dict[str, Any] = {"id": outcome.case.id, "status": outcome.status, "kind": outcome.failure_kind,
                             "loosened": list(outcome.loosened),
                             "accepted": [[key, entry.reason, entry.shipped, entry.cells] for key, entry in outcome.accepted],
                             "next": next_steps(outcome)[:1]}
    if outcome.device == "cpu":
        from e2egen.runner import kernel_paths

        facts["paths"] = kernel_paths.describe()
    return facts


class Summary:
    """pytest plugin object: collects case facts from the reports and writes the e2egen section."""

    def __init__(self) -> None:
        self.cases: list[dict[str, Any]] = []

    def pytest_runtest_logreport(self, report) -> None:
        if report.when != "call":
            return
        self.cases += [value for name, value in report.user_properties if name == PROPERTY and isinstance(value, dict)]

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if self.cases:
            terminalreporter.write_sep("=", "e2egen summary")
            for line in self.lines():
                terminalreporter.write_line(line)

    def lines(self) -> list[str]:
        cases = list({c["id"]: c for c in self.cases}.values())  # a rerun case counts once, as it ended
        statuses = Counter(c["status"] for c in cases)
        paths = sorted({c["paths"] for c in cases if c.get("paths")})
        lines = [f"{len(cases)} cases: " + ", ".join(f"{statuses[s]} {s}" for s in ("passed", "failed", "skipped") if statuses[s])]
        lines += paths
        lines += _accepted(cases, shipped=True, title="accepted for torch's own kernels (`e2egen accepted` lists all, "
                                                      "with where each was measured):")
        lines += _accepted(cases, shipped=False, title="accepted by the catalogue's [[accept]] entries:")
        loosened = Counter(item for c in cases for item in c["loosened"] if not item.startswith("[[accept]]"))
        if loosened:
            lines.append("run under a policy the catalogue loosened (default verdict: docs/concepts/default-verdict.md):")
            lines += [f"  {n:5d} cases  {item}" for item, n in loosened.most_common()]
        failed = [c for c in cases if c["status"] == "failed"]
        if failed:
            kinds = Counter(c["kind"] for c in failed)
            lines.append("failed: " + "; ".join(f"{n} {kind}" for kind, n in kinds.most_common()))
            for c in failed[:SHOWN_FAILURES]:
                lines.append(f"  {c['id']}: {c['kind']}")
                lines += [f"    {step}" for step in c["next"]]
            if len(failed) > SHOWN_FAILURES:
                lines.append(f"  ... and {len(failed) - SHOWN_FAILURES} more (each failure's report above ends with its next steps)")
            if any(c["kind"].startswith("requirement") for c in failed):
                lines.append("  a broken requirement's report ends with the [[accept]] entry that would accept it; "
                             "fill in its reason only if that arithmetic is acceptable for the kernel")
        return lines


def _accepted(cases: list[dict[str, Any]], shipped: bool, title: str) -> list[str]:
    counts: Counter = Counter()
    for c in cases:
        for key, text, is_shipped, cells in c["accepted"]:
            if is_shipped == shipped:
                counts[(key, cells, text)] += 1
    if not counts:
        return []
    return [title] + [f"  {n:5d} cases  require.{key}  {cells}: {text}" for (key, cells, text), n in sorted(counts.items())]
