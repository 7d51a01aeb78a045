"""`Place`: a session's location as this process serves it (docs/locations.md), and its
configuration read again when its files change (issue 37 item 22)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from pathlib import Path

from ..config import Config, ConfigStamp, config_stamp, load_config
from ..errors import UsageError

log = logging.getLogger("wakeful.runtime")


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
