"""The sweep's progress in a CI log (issue 44): plain lines, no carriage-return redraws; tqdm on a terminal."""
from __future__ import annotations

import io
import os
import pty

from e2egen.nightly.progress import ProgressLines, progress


def test_a_log_gets_plain_lines_at_the_interval_and_at_the_end():
    log = io.StringIO()
    lines = ProgressLines(total=200, initial=10, desc="nightly RUN", stream=log, interval_s=0.0)
    lines.set_postfix(failed=2)
    lines.update(40)
    lines.close()
    text = log.getvalue()
    assert "\r" not in text
    assert text.splitlines()[0].startswith("nightly RUN: 50/200 cases (25%), failed=2, 0m")
    assert len(text.splitlines()) == 2


def test_no_line_before_the_interval():
    log = io.StringIO()
    lines = ProgressLines(total=5, initial=0, desc="d", stream=log, interval_s=3600.0)
    for _ in range(5):
        lines.update()
    assert log.getvalue() == ""
    lines.close()
    assert log.getvalue().startswith("d: 5/5 cases (100%)")


def test_a_pipe_gets_lines_a_terminal_gets_tqdm_and_off_is_off():
    assert isinstance(progress(3, 0, "d", io.StringIO(), enabled=True), ProgressLines)
    leader, follower = pty.openpty()
    try:
        with os.fdopen(follower, "w", closefd=False) as terminal:
            bar = progress(3, 0, "d", terminal, enabled=True)
            assert not isinstance(bar, ProgressLines)
            bar.close()
    finally:
        os.close(leader)
        os.close(follower)
    off = progress(3, 0, "d", io.StringIO(), enabled=False)
    assert not isinstance(off, ProgressLines) and off.disable
