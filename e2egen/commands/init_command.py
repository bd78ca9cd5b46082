"""e2egen init [DIR]: write a starter project for a newcomer who pip-installed e2egen (no checkout, no Makefile).

The starter files are package data (e2egen/starter/): a commented catalogue testing a kernel stub on a gemm suite,
the stub, and GitHub workflows (PR subset; sharded nightly, report, calibrate, select) that install e2egen with pip.
"""
from __future__ import annotations

import re
import shlex
from pathlib import Path

from e2egen.commands.arguments import EXIT_OK
from e2egen.errors import UsageError

# (starter file in e2egen/starter, where init writes it under DIR)
STARTER_FILES: tuple[tuple[str, str], ...] = (
    ("configs.toml", "configs.toml"),
    ("my_kernels.py", "my_kernels.py"),
    ("e2egen-pr.yml", ".github/workflows/e2egen-pr.yml"),
    ("e2egen-nightly.yml", ".github/workflows/e2egen-nightly.yml"),
)
# Where the workflows' `pip install "..."` takes the e2egen requirement.
REQUIREMENT_PLACEHOLDER = "@E2EGEN_REQUIREMENT@"
# Characters that would break out of the workflows' double-quoted shell word or their YAML line.
_UNQUOTABLE = re.compile(r"[\"'`$\\\n\r]")


def register(sub) -> None:
    p = sub.add_parser(
        "init", help="write a starter project: configs.toml, a kernel stub, GitHub workflows",
        description="Write into DIR a commented starter catalogue (configs.toml) testing my_kernels.py's gemm stub "
                    "across f16, bf16, f32 and the four layouts, with a PR subset, and GitHub workflows for PR CI "
                    "and a sharded nightly sweep that install e2egen with pip. Existing files are left alone "
                    "unless --force. Exit 0, or 2 for a user error.")
    p.add_argument("directory", nargs="?", default=".", metavar="DIR",
                   help="the project folder, created if needed (default: the current folder)")
    p.add_argument("--force", action="store_true", help="replace starter files that already exist in DIR")
    p.add_argument("--e2egen-requirement", metavar="SPEC", default=None, type=e2egen_requirement,
                   help="what the workflows pip-install, a requirement such as 'e2egen>=0.1' or "
                        "'e2egen @ git+https://...' (default: e2egen==<this version>)")
    p.set_defaults(handler=init)


def e2egen_requirement(text: str) -> str:
    """An argparse type: a pip requirement (PEP 508) for the e2egen package, safe inside the workflows' quotes."""
    import argparse

    examples = "e.g. 'e2egen==0.1.0', 'e2egen>=0.1,<0.2' or 'e2egen @ git+https://github.com/OWNER/e2egen'"
    if not text.strip() or _UNQUOTABLE.search(text):
        raise argparse.ArgumentTypeError(f"expected a pip requirement for e2egen without quotes, '$', '`' or "
                                         f"backslashes ({examples}), got {text!r}")
    try:
        from packaging.requirements import InvalidRequirement, Requirement
    except ImportError:  # packaging comes with pip and pytest; without it the text is taken as written
        return text.strip()
    try:
        requirement = Requirement(text)
    except InvalidRequirement as err:
        raise argparse.ArgumentTypeError(f"{text!r} is not a pip requirement ({err}); {examples}") from None
    if requirement.name.lower().replace("_", "-") != "e2egen":
        raise argparse.ArgumentTypeError(f"{text!r} requires {requirement.name!r}, not e2egen; {examples}")
    return text.strip()


def default_requirement() -> str:
    """This e2egen's exact version, so CI tests with what the user ran init with; plain `e2egen` from a source tree."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"e2egen=={version('e2egen')}"
    except PackageNotFoundError:
        return "e2egen"


def starter_text(name: str, requirement: str) -> str:
    from importlib.resources import files

    text = files("e2egen.starter").joinpath(name).read_text(encoding="utf-8")
    return text.replace(REQUIREMENT_PLACEHOLDER, requirement)


def init(args) -> int:
    from e2egen.files import write_text_atomically

    root = Path(args.directory)
    targets = [(name, root / relative) for name, relative in STARTER_FILES]
    existing = [str(path) for _, path in targets if path.exists() or path.is_symlink()]
    if existing and not args.force:
        raise UsageError(f"{len(existing)} starter file(s) already exist and were left alone: {', '.join(existing)}; "
                         f"`e2egen init --force {shlex.quote(args.directory)}` replaces them")
    requirement = args.e2egen_requirement or default_requirement()
    for name, path in targets:
        write_text_atomically(path, starter_text(name, requirement))
        print(f"wrote {path}{' (replaced)' if str(path) in existing else ''}")
    print(f"\nThe workflows install {requirement!r} (--e2egen-requirement SPEC for another). Next:")
    catalogue, suite = shlex.quote(str(root / "configs.toml")), shlex.quote(str(root / "build" / "e2e"))
    print(f"  e2egen validate {catalogue}")
    print(f"  e2egen gen {catalogue} --out {suite}")
    print(f"  pytest {suite} -m pr")
    return EXIT_OK
