"""e2egen arithmetic: probe the arithmetic of the kernels a catalogue runs, and write their profiles."""
from __future__ import annotations

import sys
import time

from e2egen.commands.arguments import EXIT_FAILED, EXIT_OK, catalogue_argument
from e2egen.errors import UsageError
from e2egen.json_output import arithmetic_findings, emit, json_argument
from e2egen.runner.leftovers import ends_what_kernels_leave


def register(sub) -> None:
    p = sub.add_parser(
        "arithmetic", help="measure each kernel's arithmetic (input rounding, accumulator, rounding, subnormals) and "
                           "write its profile",
        description="For every cell (op, direction, dtype, layout, shape class) of the catalogue's cases, run the "
                    "probes on the kernel the suite names and print what they found; write one profile per kernel "
                    "(TOML) to --out, else to the profile cache that runs read. Exit 0, or 1 when the probes could "
                    "not run for some cell.")
    catalogue_argument(p, positional=False)
    p.add_argument("--filter", "-k", default="", metavar="EXPR", help="only the cases matching these `e2egen list --filter` terms")
    p.add_argument("--device", choices=("cpu", "cuda"), default=None, help="default: CUDA when present, else CPU")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="write the profiles into DIR (default: the cache, $E2EGEN_PROFILES or ~/.cache/e2egen/profiles)")
    json_argument(p)
    p.set_defaults(handler=arithmetic)


@ends_what_kernels_leave
def arithmetic(args) -> int:
    from pathlib import Path

    from e2egen import runner
    from e2egen.generator.case_filter import case_filter
    from e2egen.generator.cases import expand
    from e2egen.generator.loader import load_catalogue
    from e2egen.runner.arithmetic.lookup import cell_of, device_key, not_probed, probe_cell
    from e2egen.runner.arithmetic.profile import Profile, cache_dir, describe_key, other_writers_excluded, read_profile
    from e2egen.runner.device import tf32_mode
    from e2egen.runner.kernels import TORCH_IMPL, case_kernel

    cases = expand(load_catalogue(args.catalogue))
    if args.filter:
        keep = case_filter(args.filter, cases=cases)
        cases = [c for c in cases if keep(c)]
    if not cases:
        raise UsageError(f"no case of {args.catalogue} matches --filter {args.filter!r}")
    try:
        device = runner.select_device(args.device)
    except runner.Skip as skip:
        raise UsageError(skip.reason, key="--device", value=args.device) from None
    out_dir = Path(args.out) if args.out else cache_dir()

    cells: dict[tuple[str, object], object] = {}  # (impl, cell) -> a problem of that cell
    for case in cases:
        problem = case.problem()
        if not_probed(problem) is not None:  # integer and fp4 cells, ops without probes: their arithmetic is assumed
            continue
        cells.setdefault((case.impl or TORCH_IMPL, cell_of(problem)), problem)
    profiles: dict[str, Profile] = {}
    failed = 0
    # Under --json the lines below go into one document (e2egen.arithmetic/1) instead of stdout.
    say = (lambda text: None) if args.json else print
    cell_fields: list[dict] = []
    profile_fields: list[dict] = []
    for (impl, cell), problem in sorted(cells.items(), key=lambda item: (item[0][0], str(item[0][1]))):
        try:
            kernel = case_kernel(problem, impl)
        except runner.ImplError as err:
            raise UsageError(str(err), key="impl", value=impl) from None
        key = device_key(device, impl)
        profile = profiles.setdefault(impl, Profile(key))
        started = time.perf_counter()
        try:
            with tf32_mode(problem.dtype == "tf32"):
                findings = probe_cell(problem, kernel, device, impl)
        except (runner.KernelFailure, runner.Skip) as failure:
            failed += 1
            print(f"{cell}  not probed: {failure.reason}", file=sys.stderr)
            cell_fields.append(_cell_fields(cell, impl, None, failure.reason, time.perf_counter() - started))
            continue
        if not findings.unexplained:  # a kernel bug, not an arithmetic: never kept in a profile (profile.checked_entry)
            profile.cells[str(cell)] = findings
        seconds = time.perf_counter() - started
        cell_fields.append(_cell_fields(cell, impl, findings, None, seconds))
        say(f"{str(cell):44s} {seconds:5.1f} s  {findings.describe()}")
        for note in findings.notes:
            say(f"{'':44s}          note: {note}")
    for impl, profile in profiles.items():
        path = out_dir / (profile.key.file_name if args.out else profile.key.cache_file_name)
        changed: dict[str, list[str]] = {}
        with other_writers_excluded(path):  # runs may be adding cells to the same cache file
            before = read_profile(path)
            if before is not None and before.key == profile.key:
                for name, findings in sorted(profile.cells.items()):
                    old = before.cells.get(name)
                    if old is not None and old.differences(findings):
                        changed[name] = old.differences(findings)
                        say(f"CHANGED {name}: " + ", ".join(changed[name]))
                merged = dict(before.cells)
                merged.update(profile.cells)
                profile.cells = merged
            profile.write(path)
        say(f"profile of {describe_key(profile.key)}: {len(profile.cells)} cells -> {path}")
        profile_fields.append({"kernel": profile.key.impl, "device": profile.key.device,
                               "versions": dict(profile.key.versions), "path": str(path),
                               "cells": len(profile.cells), "changed": changed})
    if args.json:
        emit("arithmetic", catalogue=args.catalogue, device=str(device), cells=cell_fields, profiles=profile_fields,
             not_probed=failed)
    return EXIT_FAILED if failed else EXIT_OK


def _cell_fields(cell, impl: str, findings, reason: str | None, seconds: float) -> dict:
    """One probed cell of e2egen.arithmetic/1: its findings (None when the probes could not run, and why)."""
    measured = arithmetic_findings(findings) if findings is not None else {
        "description": None, "properties": None, "evidence": None}
    return {"cell": str(cell), "op": cell.op, "direction": cell.direction, "dtype": cell.dtype,
            "layout": cell.layout, "shape_class": cell.shape, "kernel": impl,
            "probed": findings is not None, "reason": reason, "seconds": seconds, **measured}
