"""The server's state: its runtime (which drives sessions), the hub, the settings.

Handlers read through `reads` (the runtime's read model) and write through `runtime`'s
methods. The store is synchronous; handlers call it through `wakeful.execution.off_loop` (typed:
mypy checks every call's arguments) so a slow query never stalls the event loop that also runs
drains and streams.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from ..execution import Reads, Runtime
from ..store import SessionRow, SessionSummary
from ._auth import Tokens
from ._hub import Hub
from ._models import SessionOut, SummaryOut, UsageOut

if TYPE_CHECKING:
    from ._lane import AdmissionLane

T = TypeVar("T")
log = logging.getLogger("wakeful.server")

DEFAULT_MAX_BODY = 4 * 1024 * 1024


@dataclass(frozen=True)
class Settings:
    """Tunables of one server."""

    max_body_bytes: int = DEFAULT_MAX_BODY
    keepalive_s: float = 15.0
    poll_ms: int = 10
    recover: bool = False  # drive sessions with pending work or an orphaned claim at start-up
    schedules: bool = False  # fire due schedules (and drive what they admit) like a worker
    send_timeout_s: float = 30.0


@dataclass
class ServerState:
    """Everything a handler needs; one per app."""

    runtime: Runtime
    tokens: Tokens
    settings: Settings
    hub: Hub
    own_runtime: bool = False
    lane: AdmissionLane = field(init=False)  # prompts' admissions (`_lane.py`)
    _watched: weakref.WeakSet[asyncio.Task[Any]] = field(default_factory=weakref.WeakSet)

    def __post_init__(self) -> None:
        from ._lane import AdmissionLane

        self.lane = AdmissionLane(self.runtime)

    @property
    def reads(self) -> Reads:
        """The runtime's read model (writes go through `runtime`'s methods)."""
        return self.runtime.reads

    def location(self, raw: str | None) -> str | None:
        """A query's `location`: None for none or `any`, this server's workspace for `this`,
        else the absolute directory given, normalized."""
        if raw is None or raw == "any":
            return None
        return str(self.runtime.workspace) if raw == "this" else os.path.normpath(raw)

    def is_active(self, session_id: str) -> bool:
        """Whether this process drives the session now."""
        return session_id in self.runtime.active()

    def session_out(
        self,
        row: SessionRow,
        active: set[str] | None = None,
        summary: SessionSummary | None = None,
    ) -> SessionOut:
        """The API shape of a session row (with its `summary` when given)."""
        data = row.to_json()
        data["usage"] = UsageOut.model_validate(data["usage"])
        if summary is not None:
            data["summary"] = SummaryOut.model_validate(summary.to_json())
        live = active if active is not None else set(self.runtime.active())
        return SessionOut(**data, active=row.id in live)

    def wake(self, session_id: str) -> None:
        """Wake the session's drain (coalesced by the coordinator) and look for its events."""
        task = self.runtime.wake(session_id)
        if task not in self._watched:  # a coalesced wake returns the running drain's task
            self._watched.add(task)
            task.add_done_callback(functools.partial(_report, session_id))
        self.hub.nudge()


def _report(session_id: str, task: asyncio.Task[Any]) -> None:
    """Log a drain that ended in an exception (nobody awaits a woken drain)."""
    if task.cancelled():
        return
    err = task.exception()
    if err is not None:
        log.warning("the drain of %s stopped: %s: %s", session_id, type(err).__name__, err)
