"""Decoding many rows at once without the cyclic garbage collector's pauses.

A transcript read builds a few pydantic objects per message, all of them reachable from the list
being built, none of them garbage. Every 700 new objects CPython's cyclic collector runs, and
now and then it walks every object of the process (in a new process, everything the imports
made): reading 5,000 messages in a new process spent as long in those walks as in decoding
(36 ms of CPU against 18 ms with the collector paused; docs/store.md, "Loading a transcript").
Nothing here makes cycles, and reference counting still frees what it drops, so the collector
is paused while the rows are decoded and resumed after.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector for the block; resume it after, if it was running
    (nested or concurrent blocks leave it running once the first of them ends)."""
    running = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if running:
            gc.enable()
