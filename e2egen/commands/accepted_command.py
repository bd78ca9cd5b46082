"""e2egen accepted: what torch's own kernels are accepted for below the default requirements, and why."""
from __future__ import annotations

import json

from e2egen.commands.arguments import EXIT_OK


def register(sub) -> None:
    p = sub.add_parser(
        "accepted", help="list the deviations accepted for torch's own kernels (and a catalogue's [[accept]] entries)",
        description="Every case must meet the default requirements (partial sums at least f32, inputs never "
                    "rounded below the case's dtype, element-wise math at least in f32) unless something accepts "
                    "the deviation. List what e2egen accepts for torch's own kernels, per device and kernel path, "
                    "with the arithmetic measured, its reason and where it was measured; with --catalogue, that "
                    "catalogue's own [[accept]] entries too. A user's kernel is never accepted by the former.")
    p.add_argument("--catalogue", "-c", default=None, metavar="FILE",
                   help="also list this catalogue's [[accept]] entries")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.set_defaults(handler=accepted)


def accepted(args) -> int:
    from e2egen.runner.arithmetic.torch_deviations import torch_deviations

    entries = list(torch_deviations())
    if args.catalogue:
        from e2egen.generator.loader import load_catalogue

        entries += list(load_catalogue(args.catalogue).accepted)
    if args.json:
        print(json.dumps([_as_json(entry) for entry in entries], indent=2))
        return EXIT_OK
    print(_paths_line())
    for entry in entries:
        source = "e2egen (torch's kernels)" if entry.shipped else f"catalogue {args.catalogue}"
        print(f"\n{entry.device}  {entry.cells}  require.{', require.'.join(entry.requirements)}"
              + (f" down to {entry.floor}" if entry.floor else "") + f"  [{source}]")
        if entry.when:
            print("  on paths: " + "; ".join(f"{name} in {', '.join(values)}" for name, values in entry.when))
        if entry.arithmetic:
            print(f"  arithmetic: {entry.arithmetic}")
        print(f"  reason: {entry.reason}")
        if entry.measured:
            print(f"  measured: {entry.measured}")
    return EXIT_OK


def _as_json(entry) -> dict:
    return {"source": "e2egen" if entry.shipped else "catalogue", "device": entry.device, "impl": entry.impl,
            "cells": entry.cells, "require": list(entry.requirements), "floor": entry.floor,
            "when": {name: list(values) for name, values in entry.when}, "arithmetic": entry.arithmetic,
            "reason": entry.reason, "measured": entry.measured}


def _paths_line() -> str:
    """The kernel paths this machine takes, which decide the CPU entries that apply here."""
    from e2egen.runner import kernel_paths

    hint = "" if kernel_paths.emulation() else f" (${kernel_paths.EMULATE_ENV}=avx2 takes AVX2's)"
    return f"this machine: {kernel_paths.describe()}{hint}"
