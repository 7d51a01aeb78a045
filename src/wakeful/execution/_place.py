"""`Place`: a session's location as this process serves it (docs/locations.md), and its
configuration read again when its files change (issue 37 item 22)."""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TypeAlias

from ..config import Config, config_files, load_config
from ..errors import UsageError

log = logging.getLogger("wakeful.runtime")

ConfigStamp: TypeAlias = tuple[tuple[str, int, int], ...]


def config_stamp(cwd: Path) -> ConfigStamp:
    """The files `load_config` reads from `cwd` as (path, mtime ns, size), by `stat` only: a
    different stamp means a file was edited, added or removed (read the configuration again).
    The environment is not in it: a running process does not see its variables change."""
    out: list[tuple[str, int, int]] = []
    for path in config_files(cwd):
        with contextlib.suppress(OSError):  # removed since it was listed: absent
            st = path.stat()
            out.append((str(path), st.st_mtime_ns, st.st_size))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class Place:
    """A location as a driver serves it: the workspace root (the tools' root, where the
    instruction sources are read) and the configuration of that workspace. `stamp`: the
    configuration files as they were when it was read (`config_stamp`), so an edit is seen
    before the next step; None when the configuration was given, not read (never re-read)."""

    root: Path
    config: Config
    stamp: ConfigStamp | None = None


def is_current(place: Place) -> bool:
    """Whether `place`'s configuration is what its files hold now (a given one always is)."""
    return place.stamp is None or place.stamp == config_stamp(place.root)


def read_place(root: Path, output_limit: int | None, previous: Place | None = None) -> Place:
    """The place at `root`, its configuration read from its files now (`output_limit`:
    `--max-output-tokens`, over every model). When an edit left the files unreadable or
    invalid and a configuration was read before (`previous`), that one stays, under the new
    stamp, and the mistake is logged once per edit: a running drain keeps going, while a new
    process reports the mistake as it starts."""
    stamp = config_stamp(root)  # first: an edit racing the read is seen at the next look
    try:
        config = load_config(root)
    except UsageError as err:
        if previous is None:
            raise
        log.warning("%s: the configuration stays as it was: %s", root, err)
        return replace(previous, stamp=stamp)
    if output_limit is not None:
        config = config.with_output_limit(output_limit)
    return Place(root, config, stamp)
