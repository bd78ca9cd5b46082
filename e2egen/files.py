"""Writing e2egen's output files: whole or not at all, and a failure said in one line.

    write_text_atomically(path, text)     the generated suite, manifest.json, reports, pr_selection.toml,
                                          a calibrated catalogue, arithmetic profiles
    make_directory(path)                  an output directory (and its parents)
    reading(*paths)                       while a command runs: the files it reads, which no writer may overwrite
    refuse_overwriting_input(path, what)  the check every writer makes (UsageError, exit 2, naming both files)
    refuse_special_file(path)             ... and a device, pipe, socket or directory at the path (OutputError)
    write_all(fd, data)                   every byte to an open file (records appends use it too)
    open_appending(path)                  a file appended to in place (records, run locks, the sweep's log),
                                          created if missing, never through a symbolic link
    OutputError                           a file that could not be written: disk full, no permission, ...

The text goes to a temporary file in the same directory, is flushed to the disk
(fsync), and is renamed over the target (os.replace, atomic on POSIX): readers,
a crash or a full disk see the old file or the new one, never half of one, and
a failed write leaves no temporary file behind. A new file gets the usual mode
(0o666 less the umask), a replaced one keeps its mode. A symbolic link at the
path is never followed: the rename replaces the link itself, so a link planted
at an output path cannot make e2egen write to the file it points to.

No command overwrites a file it reads: a command declares its inputs
(`reading`), and every writer here (and the results store) refuses an output
that is one of them, however named (a relative path, a symbolic link, a hard
link: compared by device and inode), with a UsageError naming both.

A leaf module (standard library and e2egen.errors only): every layer writes through it.
"""
from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from pathlib import Path
from typing import Iterator

from e2egen.errors import UsageError, UserError

_REASONS = {
    errno.ENOSPC: "disk full (no space left on the device)",
    errno.EDQUOT: "disk quota exceeded",
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
    errno.EROFS: "read-only file system",
    errno.EISDIR: "it is a directory",
    errno.ENOTDIR: "a part of the path is a file, not a directory",
    errno.ENAMETOOLONG: "file name too long",
    errno.EEXIST: "a part of the path is a file, not a directory",
    errno.ENOENT: "no such directory",
    errno.EFBIG: "file too large",
}


class OutputError(UserError, OSError):
    """A file e2egen could not write; the message names it and says why, and the old file (if any) is unchanged.

    Also an OSError, so code that handles failed writes as OSErrors still does.
    """

    def __init__(self, path: str | Path, reason: str, *, errno_: int | None = None):
        UserError.__init__(self, f"cannot write: {reason}", where=str(path))
        self.errno, self.filename = errno_, str(path)  # OSError's fields

    def __str__(self) -> str:
        return UserError.__str__(self)


def describe_os_error(err: OSError) -> str:
    """The cause of a failed file operation in a few words ("disk full (…)", "permission denied", ...)."""
    reason = _REASONS.get(err.errno or 0)
    if reason is None:
        reason = err.strerror or str(err) or type(err).__name__
    return reason


def output_error(path: str | Path, err: OSError, what: str = "") -> OutputError:
    """The OutputError for an OSError met while writing `path` (`what`: a few words after the reason)."""
    if isinstance(err, OutputError):
        return err
    reason = describe_os_error(err)
    return OutputError(path, f"{reason}{f'; {what}' if what else ''}", errno_=err.errno)


# (st_dev, st_ino) -> how the command named the input, while a command runs (`reading`).
_INPUTS: dict[tuple[int, int], str] = {}


def _identity(path: str | Path) -> tuple[int, int] | None:
    for name in (path, os.path.normpath(path)):  # `missing/../in.toml` names in.toml too, before missing/ exists
        try:
            st = os.stat(name)  # follows links: a link to an input is the input
        except (OSError, ValueError):
            continue
        return st.st_dev, st.st_ino
    return None


@contextlib.contextmanager
def reading(*paths: str | Path | None) -> Iterator[None]:
    """While the block runs, the existing files among `paths` are inputs no writer may overwrite."""
    added = []
    for path in paths:
        key = _identity(path) if path else None
        if key is not None and key not in _INPUTS:
            _INPUTS[key] = str(path)
            added.append(key)
    try:
        yield
    finally:
        for key in added:
            _INPUTS.pop(key, None)


def same_file(a: str | Path, b: str | Path) -> bool:
    """Whether two existing paths are one file (links followed, hard links the same inode)."""
    key = _identity(a)
    return key is not None and key == _identity(b)


def input_named(path: str | Path) -> str | None:
    """How the running command named the input `path` is (same device and inode), or None."""
    key = _identity(path)
    return _INPUTS.get(key) if key is not None else None


def refuse_overwriting_input(path: str | Path, what: str = "the output") -> None:
    """UsageError (exit 2) naming both when writing `path` would overwrite a file the command reads."""
    source = input_named(path)
    if source is not None:
        raise UsageError(f"{what} {path} is {source}, a file this command reads; writing it would overwrite "
                         "that input: give another output path")


def open_appending(path: str | Path, flags: int = os.O_RDWR | os.O_APPEND) -> int:
    """A file descriptor of `path` (created, mode 0o644 less the umask, when missing) opened with `flags`, never
    through a symbolic link: a link at the path (planted or not) is an OutputError, so an append cannot be sent
    to the file a link points to."""
    refuse_special_file(path)  # opening a FIFO to write would wait for a reader
    try:
        return os.open(path, flags | os.O_CREAT | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0), 0o644)
    except OSError as err:
        if err.errno == errno.ELOOP or (os.path.islink(path) and err.errno in (errno.EEXIST, errno.ENOENT)):
            raise OutputError(path, "it is a symbolic link, and e2egen appends to files only where they are "
                                    "(remove the link, or give another path)", errno_=err.errno) from None
        raise output_error(path, err) from None


def make_directory(path: str | Path) -> Path:
    """Create a directory and its parents (nothing when it exists); OutputError naming it when that fails."""
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError as err:  # a file where a directory should be
        raise OutputError(path, "a file is in the way, not a directory", errno_=err.errno) from None
    except OSError as err:
        raise output_error(path, err) from None
    return path


def write_text_atomically(path: str | Path, text: str, *, encoding: str = "utf-8", make_parents: bool = True) -> Path:
    """Write `text` to `path` whole or not at all (see the module's docstring); returns the path written.

    OutputError (one line naming the file: disk full, permission denied, ...) when it cannot.
    """
    return write_bytes_atomically(path, text.encode(encoding), make_parents=make_parents)


def write_bytes_atomically(path: str | Path, data: bytes, *, make_parents: bool = True) -> Path:
    """write_text_atomically for bytes."""
    path = Path(path)
    refuse_overwriting_input(path)
    target = path  # a link at the path is replaced, never written through
    if make_parents:
        try:
            make_directory(target.parent)
        except OutputError as err:  # name the file asked for, and the directory at fault
            raise OutputError(path, f"its directory {err.where}: {err.message.removeprefix('cannot write: ')}",
                              errno_=err.errno) from None
    refuse_special_file(target)
    mode = _existing_mode(target)
    temporary, fd = _create_temporary(target)
    try:
        try:
            write_all(fd, data)
            if mode is not None:
                os.fchmod(fd, mode)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, target)
    except OSError as err:
        _remove_quietly(temporary)
        raise output_error(path, err, "the file was left as it was") from None
    except BaseException:  # interrupted: no temporary file left behind either
        _remove_quietly(temporary)
        raise
    _sync_directory(target.parent)
    return path


_SPECIAL_FILES = ((stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"),
                  (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISSOCK, "a socket"))


def refuse_special_file(path: str | Path) -> None:
    """OutputError when `path` is there and is neither a regular file nor a link (which is replaced): renaming
    over a device or a pipe would replace it for every other user of it (`-o /dev/null` run as root)."""
    mode = _lstat_mode(Path(path))
    for test, what in _SPECIAL_FILES:
        if mode and test(mode):
            raise OutputError(path, f"it is {what}, not a regular file; e2egen writes its outputs to regular files "
                                    "only (give a file path)", errno_=errno.EISDIR if what == "a directory" else None)


def write_all(fd: int, data: bytes) -> None:
    """Write every byte of `data` to `fd` (one os.write may take fewer): what both writers here and records appends use."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _lstat_mode(path: Path) -> int:
    try:
        return os.lstat(path).st_mode
    except OSError:
        return 0


def _existing_mode(path: Path) -> int | None:
    try:
        st = os.lstat(path)  # a link's target's mode is not the output's
    except OSError:
        return None
    return stat.S_IMODE(st.st_mode) if stat.S_ISREG(st.st_mode) else None


def _create_temporary(target: Path) -> tuple[Path, int]:
    """A new file beside `target` (the same file system, so the rename is atomic), opened for writing."""
    stem = target.name[:100]  # the temporary name must fit where the target's does
    for _ in range(100):
        temporary = target.with_name(f".{stem}.{secrets.token_hex(4)}.tmp")
        try:
            # 0o666: the umask applies, as for any new file (mkstemp would make it 0o600).
            return temporary, os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
        except FileExistsError:
            continue
        except OSError as err:
            raise output_error(target, err, "the file was left as it was") from None
    raise OutputError(target, "could not create a temporary file beside it")


def _remove_quietly(path: Path) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _sync_directory(directory: Path) -> None:
    """Make the rename itself durable (best effort: some file systems cannot open or sync a directory)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
