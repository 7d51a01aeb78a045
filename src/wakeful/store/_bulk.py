"""Decoding many rows at once without the cyclic garbage collector's pauses.

A transcript read builds a few objects per message, all of them reachable from the list being
built, none of them garbage. Every 700 new objects CPython's cyclic collector runs, and now and
then it walks every object of the process (in a new process, everything the imports made):
reading 5,000 messages in a new process spent as long in those walks as in decoding (36 ms of
CPU against 18 ms with the collector paused; docs/store.md, "Loading a transcript"). Nothing
here makes cycles, and reference counting still frees what it drops, so the collector is paused
while the rows are decoded and resumed after.

Resuming alone would not save the walk: the collector then examines every object the block
made at the next allocation (2 ms after reading 5,000 plain messages, a tenth of the read).
So on resume the young objects move to the oldest generation unexamined (`gc.freeze()` then
`gc.unfreeze()`, two list splices): the next full collection still examines them, as it would
have once they outlived two young collections. This is skipped when the process froze objects
itself (`gc.get_freeze_count()`): unfreezing would hand those back to the collector.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector for the block; resume it after, if it was running
    (nested or concurrent blocks leave it running once the first of them ends), with the
    objects made meanwhile in the oldest generation when no objects were frozen before."""
    running = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if running:
            if not gc.get_freeze_count():
                gc.freeze()
                gc.unfreeze()
            gc.enable()
