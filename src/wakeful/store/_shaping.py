"""`Shaping`: the writes that shape a session after the fact (`SqlStore.shaping`).

Rewind and unrevert, history edits, metadata, extension state and artifacts: each one
transaction with its events (`_rewind.py`, `_meta.py`, `_artifacts.py`). They are an aggregate
of their own so the store's session surface does not carry them; the reads the surfaces make
(`pending_revert`, `metadata`, `extension_state`, `artifacts`, `find_artifacts`,
`live_compactions`) stay on `SqlStore`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._artifacts import ArtifactsMixin
from ._meta import MetaMixin
from ._rewind import RewindMixin

if TYPE_CHECKING:
    from ..clock import Clock
    from ._backend import Backend


class Shaping(RewindMixin, MetaMixin, ArtifactsMixin):
    """A store's shaping writes (see the module docstring)."""

    def __init__(self, backend: Backend, clock: Clock) -> None:
        self.backend = backend
        self.clock = clock
