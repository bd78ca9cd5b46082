"""Run a Markdown page's code blocks as a reader would: the ```sh blocks with bash -e and the ```python blocks
with the venv's python, in order, in one directory, with the venv's bin directory first on PATH.

An HTML comment on the line before a block's fence changes what is expected of it:
`<!-- expect-exit: N -->` (the block must exit with status N) or `<!-- no-run -->` (the block is not run).
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

RUN_LANGUAGES = {"sh": "sh", "bash": "sh", "python": "python"}
FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})\s*(?P<info>[^`]*)$")
EXPECT_EXIT = re.compile(r"^<!--\s*expect-exit:\s*(?P<status>\d+)\s*-->$")
NO_RUN = re.compile(r"^<!--\s*no-run\s*-->$")


@dataclass(frozen=True)
class Block:
    language: str        # "sh" or "python"
    code: str
    line: int            # 1-based line of the opening fence
    expect_exit: int = 0
    run: bool = True


def extract_blocks(text: str) -> list[Block]:
    """The page's runnable blocks (sh, bash and python fences), in order, with their directives."""
    lines = text.splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        fence, info = match.group("fence"), match.group("info").strip()
        language = info.split()[0].lower() if info else ""
        start = i
        body: list[str] = []
        i += 1
        while i < len(lines) and not re.match(rf"^ {{0,3}}{re.escape(fence[0])}{{{len(fence)},}}\s*$", lines[i]):
            body.append(lines[i])
            i += 1
        i += 1  # the closing fence (or the end of the page)
        if language not in RUN_LANGUAGES:
            continue
        expect_exit, run = 0, True
        previous = start - 1
        while previous >= 0 and not lines[previous].strip():
            previous -= 1
        directive = lines[previous].strip() if previous >= 0 else ""
        if EXPECT_EXIT.match(directive):
            expect_exit = int(EXPECT_EXIT.match(directive).group("status"))
        elif NO_RUN.match(directive):
            run = False
        blocks.append(Block(RUN_LANGUAGES[language], "\n".join(body) + "\n", start + 1, expect_exit, run))
    return blocks


@dataclass(frozen=True)
class BlockResult:
    block: Block
    status: int
    output: str

    @property
    def ok(self) -> bool:
        return self.status == self.block.expect_exit

    def describe(self, page: str) -> str:
        tail = self.output[-4000:]
        return (f"{page}:{self.block.line}: the {self.block.language} block exited with status {self.status}, "
                f"expected {self.block.expect_exit}\n--- block ---\n{self.block.code}--- output (tail) ---\n{tail}")


def run_blocks(blocks: list[Block], workdir: Path, *, timeout: float, stop_at_first_failure: bool = True,
               env: dict[str, str] | None = None) -> list[BlockResult]:
    """Run the blocks marked to run, in order, in `workdir`; each result's status and output (stdout and stderr)."""
    bin_dir = Path(sys.executable).parent
    environment = dict(os.environ if env is None else env)
    environment["PATH"] = str(bin_dir) + os.pathsep + environment.get("PATH", "")
    results = []
    for number, block in enumerate(blocks):
        if not block.run:
            continue
        if block.language == "sh":
            script = workdir.parent / f".{workdir.name}-block-{number}.sh"
            script.write_text(block.code, encoding="utf-8")
            command = ["bash", "-e", str(script)]
        else:  # as typed into `python` in that directory: the directory itself is on sys.path
            command = [sys.executable, "-c", block.code]
        try:
            done = subprocess.run(command, cwd=workdir, env=environment, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True, timeout=timeout)
            result = BlockResult(block, done.returncode, done.stdout)
        except subprocess.TimeoutExpired as expired:
            output = expired.output.decode(errors="replace") if isinstance(expired.output, bytes) else (expired.output or "")
            result = BlockResult(block, -1, output + f"\n(timed out after {timeout} s)")
        results.append(result)
        if stop_at_first_failure and not result.ok:
            break
    return results
