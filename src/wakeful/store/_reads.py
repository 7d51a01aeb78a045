"""Projection reads the runner and the CLI need: retry, work state, tool calls, turns, receipts."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pydantic import JsonValue

from ..events import ReceiptRecorded, load_event

if TYPE_CHECKING:
    from ._backend import Backend


@dataclass(frozen=True, slots=True)
class RetryState:
    """A scheduled retry: which step, which attempt comes next, and when (invariant 9)."""

    turn_id: str | None
    step: int
    attempt: int
    deadline_ms: int
    error_kind: str
    error: str


@dataclass(frozen=True, slots=True)
class ToolCallRow:
    """A tool call as its projection says: `running` until it ends."""

    message_id: str
    call_id: str
    name: str
    status: str
    started_seq: int


@dataclass(frozen=True, slots=True)
class TurnRow:
    """A turn: `running` or its terminal outcome."""

    turn_id: str
    status: str
    started_seq: int
    ended_seq: int | None
    error: str | None


class ReadsMixin:
    """Projection reads of `SqlStore`."""

    backend: Backend

    def retry_state(self, session_id: str) -> RetryState | None:
        """The session's pending retry, or None."""
        with self.backend.transaction(write=False) as tx:
            r = tx.one(
                "SELECT turn_id, step, attempt, deadline_ms, error_kind, error FROM retry_state "
                "WHERE session_id = ?",
                (session_id,),
            )
        return None if r is None else RetryState(r[0], int(r[1]), int(r[2]), int(r[3]), r[4], r[5])

    def work_state(self, session_id: str) -> dict[str, JsonValue]:
        """Current goal, plan, todos and jobs, by kind."""
        with self.backend.transaction(write=False) as tx:
            rows = tx.all(
                "SELECT kind, value FROM work_state WHERE session_id = ? ORDER BY kind",
                (session_id,),
            )
        return {kind: json.loads(value) for kind, value in rows}

    def tool_calls(self, session_id: str, status: str | None = None) -> list[ToolCallRow]:
        """Tool calls of a session in start order, optionally only those with `status`."""
        sql = "SELECT message_id, call_id, name, status, started_seq FROM tool_calls WHERE session_id = ?"
        params: list[object] = [session_id]
        if status is not None:
            sql += " AND status = ?"
            params.append(status)
        with self.backend.transaction(write=False) as tx:
            rows = tx.all(sql + " ORDER BY started_seq", params)
        return [ToolCallRow(r[0], r[1], r[2], r[3], int(r[4])) for r in rows]

    def turns(self, session_id: str) -> list[TurnRow]:
        """Turns of a session in start order."""
        with self.backend.transaction(write=False) as tx:
            rows = tx.all(
                "SELECT turn_id, status, started_seq, ended_seq, error FROM turns "
                "WHERE session_id = ? ORDER BY started_seq",
                (session_id,),
            )
        return [
            TurnRow(r[0], r[1], int(r[2]), None if r[3] is None else int(r[3]), r[4]) for r in rows
        ]

    def receipts(self, session_id: str) -> list[ReceiptRecorded]:
        """Every prompt receipt of a session, in order."""
        with self.backend.transaction(write=False) as tx:
            rows = tx.all(
                "SELECT e.data FROM receipts r JOIN events e ON e.session_id = r.session_id "
                "AND e.seq = r.seq WHERE r.session_id = ? ORDER BY r.seq",
                (session_id,),
            )
        out: list[ReceiptRecorded] = []
        for (data,) in rows:
            event = load_event(data)
            assert isinstance(event, ReceiptRecorded)
            out.append(event)
        return out

    def sessions_with_work(self, limit: int = 1000) -> list[str]:
        """Sessions with pending inbox items or an unreleased claim (what a worker drives)."""
        with self.backend.transaction(write=False) as tx:
            rows = tx.all(
                "SELECT session_id FROM inbox WHERE status = 'pending' "
                "UNION SELECT session_id FROM claims WHERE released = 0 ORDER BY 1 LIMIT ?",
                (limit,),
            )
        return [r[0] for r in rows]

    def instruction_values(self, session_id: str) -> dict[str, str]:
        """Current instruction digests by source key."""
        with self.backend.transaction(write=False) as tx:
            rows = tx.all(
                "SELECT source_key, digest FROM instruction_state WHERE session_id = ?",
                (session_id,),
            )
        return dict(rows)
