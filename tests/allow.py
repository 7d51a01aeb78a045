"""Permissions for the suites that exercise `shell` and file writes: wakeful asks about them by
default (docs/approvals.md), and these suites test other things, so they allow them explicitly."""

from __future__ import annotations

from pathlib import Path

from wakeful.config import Permission

ALLOW_WRITES: dict[str, Permission] = {
    "shell": "allow",
    "write_file": "allow",
    "edit_file": "allow",
}
USER_TOML = '[permissions]\nshell = "allow"\nwrite_file = "allow"\nedit_file = "allow"\n'


def allow_writes(config_home: Path) -> None:
    """Write a user `wakeful.toml` under `config_home` (the `XDG_CONFIG_HOME` of a subprocess)
    that allows shell and writes; a project file still wins key by key."""
    target = config_home / "wakeful" / "wakeful.toml"
    target.parent.mkdir(parents=True, exist_ok=True)
    if not target.exists():
        target.write_text(USER_TOML)
