"""Session endpoints: list, create, show, fork, archive, unarchive, delete.

Listing is answered from the sessions index alone (keyset pages, newest first); a search scans
pages of it up to a bound and says where to continue.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import ConflictError, UsageError
from ..providers import parse_model_spec
from ..runner import resolve_agent
from ..store import SessionRow, new_session_id
from ._api import Call, Registry, respond
from ._models import (
    ClaimOut,
    CountsOut,
    CreatedOut,
    CreateSessionIn,
    ForkIn,
    ListQuery,
    SessionDetailOut,
    SessionOut,
    SessionPageOut,
)
from ._routes_inputs import admit_prompt
from ._state import ServerState, db

ops = Registry()
SEARCH_SCAN_LIMIT = 5000  # rows a search reads before it answers with a cursor


def _matches(row: SessionRow, q: str) -> bool:
    return q in row.id.lower() or q in (row.title or "").lower()


async def search_sessions(
    state: ServerState, q: ListQuery, archived: bool | None
) -> tuple[list[SessionRow], str | None]:
    """A page of sessions matching `q`, and the cursor that continues after it.

    Without a search this is one store page. With one, pages are scanned (up to a bound) until
    `q.limit` rows match; the cursor then points after the last row looked at or returned.
    """
    needle = (q.q or "").strip().lower()
    if not needle:
        page = await db(state.store.list_sessions, roots_only=q.roots, archived=archived,
                        limit=q.limit, cursor=q.cursor)  # fmt: skip
        return page.sessions, page.next_cursor
    found: list[SessionRow] = []
    cursor = q.cursor
    scanned = 0
    while cursor is not None or scanned == 0:
        page = await db(state.store.list_sessions, roots_only=q.roots, archived=archived,
                        limit=500, cursor=cursor)  # fmt: skip
        scanned += len(page.sessions) or 1
        for i, row in enumerate(page.sessions):
            if _matches(row, needle):
                found.append(row)
            if len(found) == q.limit:
                more = page.next_cursor is not None or i + 1 < len(page.sessions)
                return found, f"{row.updated_ms}:{row.id}" if more else None
        cursor = page.next_cursor
        if cursor is not None and scanned >= SEARCH_SCAN_LIMIT:
            break
    return found, cursor


@ops.op("GET", "/sessions", tag="sessions", query=ListQuery, response=SessionPageOut, errors=(401, 422))  # fmt: skip
async def list_sessions(call: Call[ListQuery, Any]) -> SessionPageOut:
    """List sessions, newest first, with filters, search (`q`) and keyset paging."""
    state: ServerState = call.state
    archived = {"false": False, "true": True, "all": None}[call.query.archived]
    rows, cursor = await search_sessions(state, call.query, archived)
    active = set(state.runtime.coordinator.active())
    return SessionPageOut(sessions=[state.session_out(r, active) for r in rows], next_cursor=cursor)


@ops.op("POST", "/sessions", tag="sessions", body=CreateSessionIn, status=201, response=CreatedOut,
        errors=(400, 401, 409, 413, 422))  # fmt: skip
async def create_session(call: Call[Any, CreateSessionIn]) -> Any:
    """Create a session, optionally admitting its first prompt (and waking it)."""
    state: ServerState = call.state
    body = call.body
    rt = state.runtime
    agent = body.agent or rt.agent_name
    resolve_agent(agent, rt.config)  # UsageError (422) on an unknown agent
    model = body.model or rt.model
    spec = parse_model_spec(model)
    if spec.family == "scripted" and not await db(Path(spec.model).is_file):
        raise UsageError(f"scripted provider: no script file at {spec.model}")
    metadata = {"workspace": str(rt.workspace)} | (body.metadata or {})
    sid = new_session_id()
    row = await db(state.store.create_session, sid, title=body.title, agent=agent, model=model,
                   metadata=metadata)  # fmt: skip
    admission = None
    if body.prompt is not None:
        admission = await admit_prompt(state, sid, body.prompt)
        row = await db(state.store.get_session, sid)
    state.hub.nudge()
    out = CreatedOut(session=state.session_out(row), admission=admission)
    response = respond(out, 201)
    response.headers["Location"] = f"/sessions/{sid}"
    return response


@ops.op("GET", "/sessions/{session_id}", tag="sessions", query=None, response=SessionDetailOut,
        errors=(401, 404))  # fmt: skip
async def get_session(call: Call[Any, Any]) -> SessionDetailOut:
    """One session: its row, children, pending count and work state."""
    state: ServerState = call.state
    sid = call.path["session_id"]
    row = await db(state.store.get_session, sid)
    everyone = await db(state.store.list_sessions, roots_only=False, archived=None, limit=1000)
    pending = await db(state.store.pending, sid)
    work = await db(state.store.work_state, sid)
    claim = await db(state.store.current_claim, sid)
    base = state.session_out(row).model_dump()
    return SessionDetailOut(
        **base, children=[r.id for r in everyone.sessions if r.parent_id == sid],
        pending=len(pending), work_state=work,
        claim=None if claim is None else ClaimOut(owner=claim.owner, epoch=claim.epoch,
                                                  lease_until_ms=claim.lease_until_ms,
                                                  attempts=claim.attempts),
    )  # fmt: skip


@ops.op("POST", "/sessions/{session_id}/fork", tag="sessions", body=ForkIn, status=201,
        response=SessionOut, errors=(400, 401, 404, 413, 422))  # fmt: skip
async def fork_session(call: Call[Any, ForkIn]) -> Any:
    """Fork: copy the transcript through `through_seq` into a new session (parent untouched)."""
    state: ServerState = call.state
    fields: dict[str, Any] = {}
    if call.body.title is not None:
        fields["title"] = call.body.title
    row = await db(state.store.fork, call.path["session_id"], call.body.through_seq, **fields)
    state.hub.nudge()
    response = respond(state.session_out(row), 201)
    response.headers["Location"] = f"/sessions/{row.id}"
    return response


async def _set_archived(call: Call[Any, Any], value: bool) -> SessionOut:
    state: ServerState = call.state
    sid = call.path["session_id"]
    await db(state.store.set_archived, sid, value)
    state.hub.nudge()
    return state.session_out(await db(state.store.get_session, sid))


@ops.op("POST", "/sessions/{session_id}/archive", tag="sessions", response=SessionOut,
        errors=(401, 404))  # fmt: skip
async def archive_session(call: Call[Any, Any]) -> SessionOut:
    """Set the reversible archive marker."""
    return await _set_archived(call, True)


@ops.op("POST", "/sessions/{session_id}/unarchive", tag="sessions", response=SessionOut,
        errors=(401, 404))  # fmt: skip
async def unarchive_session(call: Call[Any, Any]) -> SessionOut:
    """Clear the archive marker."""
    return await _set_archived(call, False)


@ops.op("DELETE", "/sessions/{session_id}", tag="sessions", response=CountsOut,
        errors=(401, 404, 409))  # fmt: skip
async def delete_session(call: Call[Any, Any]) -> CountsOut:
    """Delete a session and its children for good (not while this server drives it)."""
    state: ServerState = call.state
    sid = call.path["session_id"]
    if state.is_active(sid):
        raise ConflictError(f"session {sid} is running here; interrupt it first")
    counts = await db(state.store.delete, sid)
    return CountsOut.model_validate(counts.to_json())
