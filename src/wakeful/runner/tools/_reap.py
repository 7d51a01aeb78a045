"""Ending everything a `shell` call started: its process group, and every process that
carries the call's environment mark.

Invariant: once `kill_all` returns, no process of the call is left that could be found. The
process group alone misses a child that called `setsid` (a new session and group), and the
parent chain misses one whose parent already exited (it is re-parented to init). The environment
finds both: every process of a call inherits `WAKEFUL_TOOL_CALL=<token>`, and keeps it across
`setsid`, double forks and re-parenting. Only a process that drops its environment (`env -i`)
and also leaves the process group escapes. A cgroup per call would catch even that, but making
one needs privileges or a systemd delegation that wakeful cannot count on, so this module reads
`/proc` instead (Linux; elsewhere the process group is all there is). docs/tools.md says more.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal

MARK = "WAKEFUL_TOOL_CALL"
ROUNDS = 20  # a process may fork while others are killed: look again, a bounded number of times


def new_mark() -> str:
    """A fresh token for `MARK`, one per call."""
    return secrets.token_hex(8)


def _group(pid: int) -> int | None:
    """The process group of a live process from `/proc/PID/stat`; None when it is gone or a
    zombie (which holds nothing but its pid)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    fields = raw[raw.rfind(b")") + 2 :].split()  # the command name may hold spaces and ")"
    return None if fields[0] in (b"Z", b"X") else int(fields[2])


def _carries(pid: int, entry: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return entry in f.read().split(b"\0")
    except OSError:  # gone, or another user's process (then not one of ours)
        return False


def members(group: int | None, mark: str) -> set[int]:
    """Live processes of the call: members of its process group and carriers of `mark`."""
    entry = f"{MARK}={mark}".encode()
    found: set[int] = set()
    for pid in (int(name) for name in os.listdir("/proc") if name.isdigit()):
        pgid = _group(pid)
        if pgid is not None and (pgid == group or _carries(pid, entry)):
            found.add(pid)
    found.discard(os.getpid())
    return found


def kill_all(group: int | None, mark: str) -> None:
    """SIGKILL the process group `group` (the shell's pid; None when it is not known yet) and
    every process `members` finds, until none is left (or `ROUNDS` looks each found more)."""
    if group is not None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, signal.SIGKILL)
    if not os.path.isdir("/proc"):
        return
    for _ in range(ROUNDS):
        victims = members(group, mark)
        if not victims:
            return
        for pid in victims:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
