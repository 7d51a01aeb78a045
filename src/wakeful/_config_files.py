"""Which files the configuration is read from (`wakeful.config`), found with one `stat` each.

A driver stamps its configuration's files at every step boundary (`execution/_place.py`, so an
edit is seen before the next step), so finding them is on every step's path: it works on
strings with `os` (not `pathlib`), asks `platformdirs` once per value of the variables it reads,
and hands back the `stat` that found each file instead of taking it again. Imports nothing of
wakeful (the configuration module imports it, and only `wakeful.errors` and `_defaults` beside).
"""

from __future__ import annotations

import functools
import os
import stat
from pathlib import Path

import platformdirs

FILENAME = "wakeful.toml"
ENV_VAR = "WAKEFUL_CONFIG"


def _regular(path: str) -> os.stat_result | None:
    """`path`'s `stat` when it is a regular file (or a link to one), else None."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st if stat.S_ISREG(st.st_mode) else None


@functools.lru_cache(maxsize=64)
def _resolved(cwd: str) -> str:
    """`cwd` with its symbolic links resolved, once per process and directory: a driver
    stamps its place's files before every step, from the same few roots (each already
    resolved when its session was created), and `realpath` is a `lstat` per component."""
    return os.path.realpath(cwd)


def _project_found(cwd: str) -> tuple[str, os.stat_result] | None:
    """The nearest `wakeful.toml` from `cwd` (resolved, `_resolved`) upwards, with its `stat`,
    stopping at the directory holding `.git` (the project root) or at the filesystem root."""
    folder = _resolved(cwd)
    while True:
        candidate = os.path.join(folder, FILENAME)
        if (st := _regular(candidate)) is not None:
            return candidate, st
        parent = os.path.dirname(folder)
        if parent == folder or os.path.exists(os.path.join(folder, ".git")):
            return None
        folder = parent


def project_file(cwd: Path) -> Path | None:
    """The nearest `wakeful.toml` from `cwd` upwards, stopping at the directory holding `.git`
    (the project root) or at the filesystem root."""
    found = _project_found(str(cwd))
    return None if found is None else Path(found[0])


@functools.lru_cache(maxsize=8)
def _user_dir(xdg: str | None, home: str | None) -> str:
    """`platformdirs.user_config_dir("wakeful")` for these variables (what it reads on Linux;
    elsewhere the process's own constants), asked once per pair."""
    return platformdirs.user_config_dir("wakeful")


def user_file(user_dir: Path | None = None) -> Path:
    """The user's `wakeful.toml` (in `platformdirs.user_config_dir("wakeful")` by default)."""
    return Path(_user_path(user_dir))


def _user_path(user_dir: Path | None) -> str:
    if user_dir is not None:
        return os.path.join(user_dir, FILENAME)
    return os.path.join(
        _user_dir(os.environ.get("XDG_CONFIG_HOME"), os.environ.get("HOME")), FILENAME
    )


def config_file_stats(
    cwd: Path | None = None, user_dir: Path | None = None
) -> list[tuple[str, os.stat_result | None]]:
    """The files `load_config` reads, lowest precedence first, each with the `stat` that found
    it (None: `$WAKEFUL_CONFIG` names a file that is not there). One `stat` per candidate, on
    strings: a driver stamps its configuration at every step boundary (`execution/_place.py`)."""
    explicit = os.environ.get(ENV_VAR)
    if explicit:
        try:
            return [(explicit, os.stat(explicit))]
        except OSError:
            return [(explicit, None)]
    out: list[tuple[str, os.stat_result | None]] = []
    user = _user_path(user_dir)
    if (st := _regular(user)) is not None:
        out.append((user, st))
    if (project := _project_found(str(cwd) if cwd is not None else os.getcwd())) is not None:
        out.append(project)
    return out


def config_files(cwd: Path | None = None, user_dir: Path | None = None) -> list[Path]:
    """The files `load_config` reads, lowest precedence first."""
    return [Path(path) for path, _ in config_file_stats(cwd, user_dir)]
