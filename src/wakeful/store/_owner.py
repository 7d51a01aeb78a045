"""Who a driver is (host, pid, process start time) and whether such an owner is still alive."""

from __future__ import annotations

import os
from functools import cache

from ..errors import UsageError


def _start_time(pid: int) -> str:
    """The kernel's start time of `pid` (clock ticks since boot), or "" when unknown."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            stat = f.read()
    except OSError:
        return ""
    # The command name may hold spaces; fields resume after the last ')'.
    return stat.rsplit(")", 1)[-1].split()[19]


@cache
def host_id() -> str:
    """A stable id of this host: `$WAKEFUL_HOST_ID` when set; else the machine id with the
    hostname (containers made from one image often share a machine id, never a hostname, and
    a process on a host sharing this id whose pid is not running here would count as dead);
    else the hostname. `UsageError` for an override holding a `/` (the owner's separator)."""
    override = os.environ.get("WAKEFUL_HOST_ID", "").strip()
    if override:
        if "/" in override:
            raise UsageError(f"WAKEFUL_HOST_ID may not contain '/': {override!r}")
        return override
    import socket  # only when an owner is named (cold start)

    name = socket.gethostname().replace("/", "_")
    try:
        with open("/etc/machine-id", encoding="ascii") as f:
            machine = f.read().strip()[:16]
    except OSError:
        machine = ""
    return f"{machine}-{name}" if machine else name


def current_owner() -> str:
    """This process as an owner string: ``host/pid/start``."""
    pid = os.getpid()
    return f"{host_id()}/{pid}/{_start_time(pid)}"


def owner_is_dead(owner: str) -> bool:
    """True only when `owner` is a process on this host that no longer runs.

    An owner on another host is never declared dead here (its lease decides); a pid that was
    reused by a new process is dead, because the start time differs.
    """
    try:
        host, pid_s, start = owner.split("/", 2)
        pid = int(pid_s)
    except ValueError:
        return False
    if host != host_id():
        return False
    now = _start_time(pid)
    return now == "" or now != start
