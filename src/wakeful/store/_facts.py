"""What a driver must notice of its session between steps, read with a unit's session lock.

A drive keeps its context (agent, model, tools, instruction sources) while the session's
`agent`, `model` and the host's instruction entries (extension state `instructions`) stay as
they were; each changes only by an event another caller may write at any time (`session.updated`,
`extension_state.set`). Instead of a read of its own every step, a unit of work reads them in
the round trip of the session lock it takes anyway (`SessionWrite.facts`, `SessionRead
.pending_facts`): one statement more in a transaction that commits anyway, no commit more.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ._backend import Pending, Tx
from ._cipher import opened

if TYPE_CHECKING:
    from pydantic import JsonValue

HOST_NAMESPACE = "instructions"  # the extension namespace of a host's instruction entries
SWITCH_NAMESPACE = "mcp"  # the extension namespace of the session's MCP server switches (`/mcp`)

FACTS_SQL = (
    "SELECT s.agent, s.model, e.namespace, e.key, e.value FROM sessions s "
    "LEFT JOIN extension_state e ON e.session_id = s.id "
    f"AND e.namespace IN ('{HOST_NAMESPACE}', '{SWITCH_NAMESPACE}') WHERE s.id = ? ORDER BY e.key"
)


def facts_sql(where: str) -> str:
    """`FACTS_SQL` for the sessions `where` selects (over `sessions s`), each row beginning
    with the session's id, in session order (`facts_of` reads one session's rest)."""
    return (
        "SELECT s.id, s.agent, s.model, e.namespace, e.key, e.value FROM sessions s "
        "LEFT JOIN extension_state e ON e.session_id = s.id "
        f"AND e.namespace IN ('{HOST_NAMESPACE}', '{SWITCH_NAMESPACE}') WHERE {where} "
        "ORDER BY s.id, e.key"
    )


@dataclass(frozen=True, slots=True)
class SessionFacts:
    """A session's agent and model as its row says, its host's instruction entries (extension
    state `instructions`, by key) and its MCP server switches (extension state `mcp`, by
    server name), as one statement read them."""

    agent: str | None
    model: str | None
    instructions: dict[str, JsonValue] = field(default_factory=dict)
    switches: dict[str, JsonValue] = field(default_factory=dict)


def facts_query(tx: Tx, session_id: str) -> Pending:
    """Send the facts' statement (read with `facts_from`); pipelined where the backend can."""
    return tx.query(FACTS_SQL, (session_id,))


def facts_from(sent: Pending) -> SessionFacts | None:
    """The facts `facts_query` sent for (None: no such session)."""
    rows = sent.all()
    return facts_of(rows) if rows else None


def facts_of(rows: Sequence[Sequence[Any]]) -> SessionFacts:
    """One session's facts from its rows of `FACTS_SQL` (at least one; after `facts_sql`'s
    id)."""
    found: dict[str, dict[str, JsonValue]] = {HOST_NAMESPACE: {}, SWITCH_NAMESPACE: {}}
    for _agent, _model, namespace, key, value in rows:
        if namespace is not None:  # (a value is sealed when the store is encrypted)
            found[str(namespace)][str(key)] = json.loads(opened(value))
    return SessionFacts(rows[0][0], rows[0][1], found[HOST_NAMESPACE], found[SWITCH_NAMESPACE])
