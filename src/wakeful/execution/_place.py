"""`Place`: a session's location as this process serves it (docs/locations.md), and its
configuration read again when its files change (issue 37 item 22). `PlacesMixin`: the
`Runtime`'s places and the providers built with each place's `[providers]` options."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TypeAlias

from .._config_files import config_file_stats
from ..config import CompactionConfig, Config, load_config
from ..errors import LocationUnavailableError, UsageError
from ..providers import Provider, check_model, make_provider

log = logging.getLogger("wakeful.runtime")

ConfigStamp: TypeAlias = tuple[tuple[str, int, int], ...]


def config_stamp(cwd: Path) -> ConfigStamp:
    """The files `load_config` reads from `cwd` as (path, mtime ns, size), by `stat` only: a
    different stamp means a file was edited, added or removed (read the configuration again).
    The environment is not in it: a running process does not see its variables change."""
    return tuple(
        (path, st.st_mtime_ns, st.st_size) for path, st in config_file_stats(cwd) if st is not None
    )


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


class PlacesMixin:
    """Where `Runtime` runs a session (`place`) and the providers it builds there."""

    workspace: Path
    config: Config
    # Which locations this process runs sessions at (a worker's `--location`); None: any
    # directory present on this host.
    serves: Callable[[str], bool] | None
    _output_limit: int | None  # `--max-output-tokens`, over every place's models
    _places: dict[str, Place]
    _providers: dict[str, Provider]
    _providers_lock: threading.Lock

    def check_model(self, spec: str, place: Place | None = None) -> None:
        """Raise `UsageError` (one line) unless `spec` can be built here, with the `[providers]`
        options of `place`'s configuration (default: this runtime's workspace): a valid spec,
        an existing scripted file, an API key. Nothing is written; no request is sent."""
        config = self.config if place is None else place.config
        check_model(spec, **config.providers.options_for(spec))

    def build_provider(self, spec: str, place: Place | None = None) -> Provider:
        """A new provider for `spec` with the `[providers]` options (API key variable, base URL,
        context windows, output limits) of `place`'s configuration (default: this runtime's
        workspace); the one builder of every model this runtime uses, the session's and a
        `[compaction] model`. The caller closes it. `UsageError` when it cannot be built
        (`check_model`)."""
        config = self.config if place is None else place.config
        options = config.providers.options_for(spec)
        check_model(spec, **options)  # a key removed since: a `UsageError`, the turn blocked
        return make_provider(spec, **options)

    def _provider(self, spec: str, place: Place) -> Provider:
        """The one provider of `spec` at `place` (built once, closed by `aclose`): the
        provider factory of that place's turns, for the session's model and a
        `[compaction] model` alike. Contexts are built in worker threads, hence the lock."""
        key = f"{place.root}\0{spec}"  # a workspace's configuration may set its options
        with self._providers_lock:
            if key not in self._providers:
                self._providers[key] = self.build_provider(spec, place)
            return self._providers[key]

    def place(self, location: str | None) -> Place:
        """Where a session at `location` runs in this process: its root and its workspace's
        configuration (`wakeful.toml` found from the root; `--max-output-tokens` applied), read
        again when its files changed since (`is_current`; issue 37 item 22). None (a session
        recorded without a location) runs at this runtime's workspace.

        Raises `LocationUnavailableError` when the location is not a directory on this host.
        """
        key = str(self.workspace) if location is None else location
        if location is not None and self.serves is not None and not self.serves(location):
            raise LocationUnavailableError(
                f"the session lives at {location}, which this process does not serve",
                location=location,
            )
        if location is not None and not Path(location).is_dir():
            raise LocationUnavailableError(
                f"the session lives at {location}, which is not a directory on this host",
                location=location,
            )
        found = self._places.get(key)
        if found is None or not is_current(found):  # new here, or its files edited since
            found = self._places[key] = read_place(Path(key), self._output_limit, found)
        return found

    def compaction_at(self, location: str | None) -> CompactionConfig:
        """The `[compaction]` settings a session at `location` runs with here: its place's
        configuration, as its drains read it (`place`; `LocationUnavailableError` likewise)."""
        return self.place(location).config.compaction
