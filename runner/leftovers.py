"""What a kernel may leave running after its case: a non-daemon thread or a child process (a multiprocessing
child, or a plain os.fork). Python waits for threads and multiprocessing children when the process ends
(threading's shutdown joins the threads, multiprocessing's atexit joins the children), so one sleeping kernel
thread would keep a finished sweep's pytest process (or xdist worker) alive until the sweep's outer time limit.
A process that runs cases notes what each case left (`Leftovers.after`) and, at its very end, once every result is
written, ends the children and, if threads are still running, ends itself with os._exit, naming what it did not
wait for (`Leftovers.end`). A fork of this very process that never came back from the kernel (it hangs on a lock
held by a thread that did not survive the fork, or would run the harness beside its parent) is ended as soon as
the case that left it is over: it can only run harness code or hang, holding as much memory as the harness.
Torch-free."""
from __future__ import annotations

import functools
import multiprocessing
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Callable


# Threads that appeared while a kernel ran (runner.isolation notes them after every call): only these are a
# kernel's leftovers. The harness starts threads of its own between calls (the metrics pool), which must be
# neither named nor cut short.
_started_by_kernels: set[int] = set()


def note_kernel_threads(idents: set[int]) -> None:
    _started_by_kernels.update(idents)


def thread_idents() -> set[int]:
    return {t.ident for t in threading.enumerate() if t.ident is not None}


def _running_threads() -> dict[int, threading.Thread]:
    return {t.ident: t for t in threading.enumerate()
            if t.ident is not None and t is not threading.main_thread() and not t.daemon and t.is_alive()}


def _children() -> dict[int, multiprocessing.process.BaseProcess]:
    try:
        return {p.pid: p for p in multiprocessing.active_children() if p.pid is not None}
    except Exception:  # multiprocessing's bookkeeping broken by the kernel: nothing to end through it
        return {}


def _has_children() -> bool:
    """Whether this process has a child at all, from Linux's per-thread lists of children: a few small reads,
    where walking /proc (descendants) reads every process's stat. True where the lists cannot be read."""
    lists = list(Path("/proc/self/task").glob("*/children"))
    try:
        return not lists or any(path.read_text().strip() for path in lists)
    except OSError:
        return True


def descendants(pid: int) -> list[int]:
    """The processes below `pid` (Linux /proc; elsewhere none)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            stat = (entry / "stat").read_text()
            ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _exited(pid: int) -> bool:
    """Whether `pid` has ended and waits to be reaped (a zombie), or is gone; reaped if it is a child of ours."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        state = stat[stat.rindex(")") + 2:].split()[0]
    except (OSError, ValueError, IndexError):
        return True
    if state not in ("Z", "X"):
        return False
    try:
        os.waitpid(pid, os.WNOHANG)
    except (OSError, ChildProcessError):
        pass
    return True


def _command_line(pid: int) -> bytes | None:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None


def _kill(pid: int) -> None:
    """SIGKILL, not SIGTERM: a fork runs this process's own handlers, which would write records beside it.
    A direct child is reaped once it is gone (up to a second), so that no zombie is left to look like a process."""
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        return
    for _ in range(100):
        try:
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                return
        except ChildProcessError:  # not our child: init reaps it
            return
        time.sleep(0.01)


class Leftovers:
    """Threads and children started while cases ran, each with the case that left it."""

    def __init__(self) -> None:
        self.known_threads = set(_running_threads())  # the harness's own, started before any case
        self.known_children = set(_children()) | set(descendants(os.getpid()))
        self.left_by: dict[tuple[str, int], str] = {}
        self.forks_ended: dict[str, int] = {}  # case -> forks of this process ended after it

    def after(self, case: str) -> None:
        """Note what is running now that was not before, as left by `case`; end the forks of this process."""
        for ident in _running_threads():
            if ident not in self.known_threads and ident in _started_by_kernels:
                self.left_by.setdefault(("thread", ident), case)
        if not _has_children():  # the usual case, after every case of a sweep: no /proc walk
            return
        for pid in _children():
            if pid not in self.known_children:
                self.left_by.setdefault(("child", pid), case)
        ours = _command_line(os.getpid())
        for pid in descendants(os.getpid()):
            if pid in self.known_children or ("child", pid) in self.left_by or _exited(pid):
                continue
            if ours is not None and _command_line(pid) == ours:
                _kill(pid)
                self.forks_ended[case] = self.forks_ended.get(case, 0) + 1
            else:  # another program the kernel started (or torch.compile's workers): ended at the very end
                self.left_by[("process", pid)] = case

    def _by(self, kind: str, key: int) -> str:
        case = self.left_by.get((kind, key))
        return f" (left by {case})" if case else ""

    def end(self, exitstatus: int, say=None) -> None:
        """At the end of the process, after every result is written: terminate (then kill) the children cases
        started; if threads that cases started still run, flush stdout and stderr and os._exit(exitstatus)."""
        say = say or (lambda text: print(text, file=sys.stderr))
        for case, count in self.forks_ended.items():
            say(f"e2egen: ended {count} fork{'s' if count > 1 else ''} of this process left running by {case}: "
                f"a kernel must not leave processes running")
        for (kind, pid), case in self.left_by.items():
            if kind == "process" and pid in descendants(os.getpid()) and not _exited(pid):
                say(f"e2egen: ending process {pid} (left by {case}): a kernel must not leave processes running")
                _kill(pid)
        children = {pid: p for pid, p in _children().items() if pid not in self.known_children}
        for pid, child in children.items():
            say(f"e2egen: ending child process {pid} ({child.name}){self._by('child', pid)}: "
                f"a kernel must not leave processes running")
            try:
                child.terminate()
                child.join(2)
                if child.is_alive():
                    child.kill()
                    child.join(2)
            except Exception:
                pass
        threads = {i: t for i, t in _running_threads().items() if ("thread", i) in self.left_by}
        if not threads:
            return
        names = ", ".join(f"{t.name!r}{self._by('thread', i)}" for i, t in threads.items())
        say(f"e2egen: not waiting for {len(threads)} thread(s) still running: {names} "
            f"(a kernel must not leave non-daemon threads running); ending the process")
        for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(exitstatus)


def ends_what_kernels_leave(handler: Callable[..., int]) -> Callable[..., int]:
    """An `e2egen` command handler that calls kernels in this process (run, explain, arithmetic): once it has
    returned its exit status, what those kernels left running is ended as at the end of a sweep."""

    @functools.wraps(handler)
    def handled(args) -> int:
        leftovers = Leftovers()
        status = handler(args)
        leftovers.after(f"e2egen {getattr(args, 'command', None) or handler.__name__}")
        leftovers.end(status)
        return status

    return handled
