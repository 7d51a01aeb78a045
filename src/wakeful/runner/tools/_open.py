"""Opening workspace files for the file tools: regular files only, and only ones that have no
other name.

Invariant: a file tool reads or writes a file only through a descriptor whose `fstat` says it
is a regular file with one link. A FIFO, socket or device would block or misbehave (a FIFO
hangs a read forever); a hard link is the same file as a name that may lie outside the
workspace, so reading or overwriting it would escape the confinement that `confine` gives
paths. The checks are made on the open descriptor, so nothing can be swapped in between.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from ._base import ToolFailure

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)
_FLAGS = os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)


def refusal(st: os.stat_result, path: str) -> str | None:
    """Why a file with this status is refused (None for a regular file with one link)."""
    if not stat.S_ISREG(st.st_mode):
        kind = next((name for test, name in _KINDS if test(st.st_mode)), "not a regular file")
        return f"{path} is {kind}, not a regular file"
    if st.st_nlink > 1:
        return (
            f"{path} has {st.st_nlink} hard links: another name of it may lie outside the "
            "workspace, so the file tools leave it alone (use the shell to work on it)"
        )
    return None


def _checked(fd: int, path: str) -> int:
    """`fd` when it is a regular file with one link, else close it and raise `ToolFailure`."""
    reason = refusal(os.fstat(fd), path)
    if reason is not None:
        os.close(fd)
        raise ToolFailure(reason)
    os.set_blocking(fd, True)
    return fd


def _open_fd(target: Path, path: str, flags: int, action: str) -> int:
    try:
        return os.open(target, flags | _FLAGS, 0o666)
    except FileNotFoundError:
        raise ToolFailure(f"no such file: {path}") from None
    except OSError as err:  # ENXIO: a FIFO nobody reads; ELOOP: a symlink swapped in
        try:
            reason = refusal(os.lstat(target), path)
        except OSError:
            reason = None
        raise ToolFailure(reason or f"cannot {action} {path}: {err.strerror or err}") from None


@contextlib.contextmanager
def open_for_reading(target: Path, path: str) -> Iterator[BinaryIO]:
    """Open an existing regular, singly linked file for reading (see the module docstring)."""
    fd = _checked(_open_fd(target, path, os.O_RDONLY, "read"), path)
    with os.fdopen(fd, "rb") as f:
        yield f


def write_whole(target: Path, path: str, data: bytes) -> bool:
    """Replace the content of a regular, singly linked file with `data`, or create the file;
    return whether it existed."""
    try:
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _FLAGS, 0o666)
        existed = False
    except FileExistsError:
        fd = _open_fd(target, path, os.O_WRONLY, "write")
        existed = True
    except OSError as err:
        raise ToolFailure(f"cannot write {path}: {err.strerror or err}") from None
    fd = _checked(fd, path)
    with os.fdopen(fd, "wb") as f:
        f.truncate(0)
        f.write(data)
    return existed
