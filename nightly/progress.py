"""The sweep's progress on stderr: tqdm's bar on a terminal; in a log or a pipe (a CI job), plain lines instead,
one every LINE_INTERVAL_S and one at the end, since every tqdm redraw there is a carriage return the log keeps."""
from __future__ import annotations

import time
from typing import Any, TextIO

LINE_INTERVAL_S = 30.0


class ProgressLines:
    """What the sweep asks of its bar (update, set_postfix, close), said as lines:
    `nightly RUN: 120/1854 cases (6%), failed=3, 2m10s`."""

    def __init__(self, total: int, initial: int, desc: str, stream: TextIO, interval_s: float = LINE_INTERVAL_S):
        self.total, self.n, self.desc, self.stream, self.interval_s = total, initial, desc, stream, interval_s
        self.postfix: dict[str, Any] = {}
        self.started = self.said = time.monotonic()

    def update(self, n: int = 1) -> None:
        self.n += n
        if time.monotonic() - self.said >= self.interval_s:
            self._say()

    def set_postfix(self, refresh: bool = True, **fields: Any) -> None:
        self.postfix = fields

    def close(self) -> None:
        self._say()

    def _say(self) -> None:
        self.said = time.monotonic()
        elapsed = int(self.said - self.started)
        share = f" ({100 * self.n // self.total}%)" if self.total else ""
        fields = "".join(f", {k}={v}" for k, v in self.postfix.items())
        print(f"{self.desc}: {self.n}/{self.total} cases{share}{fields}, {elapsed // 60}m{elapsed % 60:02d}s",
              file=self.stream, flush=True)


def progress(total: int, initial: int, desc: str, stream: TextIO, enabled: bool):
    """tqdm's bar where `stream` is a terminal, ProgressLines elsewhere; a disabled tqdm when not `enabled`."""
    from tqdm import tqdm

    if enabled and not _is_terminal(stream):
        return ProgressLines(total, initial, desc, stream)
    return tqdm(total=total, initial=initial, unit="case", desc=desc, disable=not enabled, file=stream,
                dynamic_ncols=True, smoothing=0.1, mininterval=0.1)


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
