"""Session endpoints: list, create, show, fork, archive, unarchive, delete.

Listing is answered from the sessions index alone (keyset pages, newest first); a search (`q`)
from the store's full-text index (ranked, paged by offset), or by the session's id.
"""

from __future__ import annotations

from typing import Any

from ..errors import ConflictError, UsageError
from ..execution import existing_location, off_loop
from ..runner import resolve_agent
from ..store import Page, SearchPage, new_session_id
from ._api import SESSION_ID, ApiError, Call, Registry, respond
from ._auth import Principal
from ._models import (
    ClaimOut,
    CountsOut,
    CreatedOut,
    CreateSessionIn,
    ForkIn,
    ListQuery,
    MatchOut,
    SessionDetailOut,
    SessionOut,
    SessionPageOut,
)
from ._owned import Found, owned_listing, owned_roots, owned_search
from ._routes_inputs import admit_prompt
from ._state import ServerState

ops = Registry()


async def search_sessions(
    state: ServerState, q: ListQuery, archived: bool | None, principal: Principal | None = None
) -> Found:
    """A page of sessions: the listing without `q.q`; with it, a full-text search (a session
    id finds that session). A search's cursor is the number of hits already returned. A
    non-admin `principal` sees only the sessions they own (`_owned.py`)."""
    needle = (q.q or "").strip()
    owned = (
        None if principal is None or principal.admin else await owned_roots(state, principal.user)
    )
    if not needle:

        def listing(cursor: str | None, limit: int) -> Page:
            return state.reads.list_sessions(
                roots_only=q.roots,
                archived=archived,
                limit=limit,
                cursor=cursor,
                agent=q.agent,
                location=state.location(q.location),
            )

        if owned is not None:
            return await owned_listing(listing, owned, q.cursor, q.limit)
        page = await off_loop(listing, q.cursor, q.limit)
        return Found(page.sessions, page.next_cursor)
    if q.agent is not None or q.location != "any":
        raise UsageError("`agent` and `location` filter the listing, not a search (`q`)")
    if needle.startswith("ses_") and SESSION_ID.match(needle):
        row = await off_loop(state.reads.find_session, needle)
        seen = row is not None and (owned is None or row.root_id in owned)
        return Found([row] if row is not None and seen else [], None)
    if q.cursor is not None and not q.cursor.isdigit():
        raise UsageError("a search continues from the cursor it answered (a number)")

    def search(offset: int, limit: int) -> SearchPage:
        return state.reads.search(
            needle, roots_only=q.roots, archived=archived, limit=limit, offset=offset
        )

    if owned is not None:
        return await owned_search(search, owned, int(q.cursor or 0), q.limit)
    hits = await off_loop(search, int(q.cursor or 0), q.limit)
    more = None if hits.next_offset is None else str(hits.next_offset)
    return Found([h.session for h in hits.hits], more, {h.session.id: h for h in hits.hits})


@ops.op(
    "GET", "/sessions", tag="sessions", query=ListQuery, response=SessionPageOut, errors=(401, 422)
)
async def list_sessions(call: Call[ListQuery, Any]) -> SessionPageOut:
    """List sessions, newest first, with filters and keyset paging; or search them (`q`)."""
    state: ServerState = call.state
    archived = {"false": False, "true": True, "all": None}[call.query.archived]
    found = await search_sessions(state, call.query, archived, call.principal)
    active = set(state.runtime.active())
    summaries = await off_loop(state.reads.session_summaries, [r.id for r in found.sessions])
    out = []
    for row in found.sessions:
        item = state.session_out(row, active, summaries.get(row.id))
        if (hit := found.matches.get(row.id)) is not None:
            item = item.model_copy(update={"match": MatchOut(seq=hit.seq, snippet=hit.snippet)})
        out.append(item)
    return SessionPageOut(sessions=out, next_cursor=found.next_cursor)


@ops.op(
    "POST",
    "/sessions",
    tag="sessions",
    body=CreateSessionIn,
    status=201,
    response=CreatedOut,
    errors=(400, 401, 409, 413, 422),
)
async def create_session(call: Call[Any, CreateSessionIn]) -> Any:
    """Create a session, optionally admitting its first prompt (and waking it)."""
    state: ServerState = call.state
    body = call.body
    rt = state.runtime
    agent = body.agent or rt.agent_name
    where = str(rt.workspace)
    if body.location is not None:
        try:
            where = existing_location(body.location, "location")
        except UsageError as err:
            raise ApiError(400, "bad_location", str(err)) from None
    place = await off_loop(rt.place, where)
    resolve_agent(agent, place.config)  # UsageError (422): unknown agent
    model = body.model or rt.model
    await off_loop(
        rt.check_model, model, place
    )  # UsageError (422): a bad spec, file or missing key
    metadata = {"workspace": where} | (body.metadata or {})
    sid = body.id or new_session_id()  # a taken id: the store's ConflictError (409)
    row = await off_loop(
        rt.create_session,
        session_id=sid,
        title=body.title,
        agent=agent,
        model=model,
        metadata=metadata,
        location=where,
        owner=call.principal.user,  # in the session's own transaction (docs/access.md)
    )
    admission = None
    if body.prompt is not None:
        admission = await admit_prompt(state, sid, body.prompt, actor=call.principal.name)
        row = await off_loop(state.reads.get_session, sid)
    state.hub.nudge()
    out = CreatedOut(session=state.session_out(row), admission=admission)
    response = respond(out, 201)
    response.headers["Location"] = f"{call.request.scope.get('root_path', '')}/sessions/{sid}"
    return response


@ops.op(
    "GET",
    "/sessions/{session_id}",
    tag="sessions",
    query=None,
    response=SessionDetailOut,
    errors=(401, 404),
)
async def get_session(call: Call[Any, Any]) -> SessionDetailOut:
    """One session: its row, children, pending count and work state."""
    state: ServerState = call.state
    sid = call.path["session_id"]
    row = await off_loop(state.reads.get_session, sid)
    children = await off_loop(state.reads.children, sid)
    pending = await off_loop(state.reads.pending, sid)
    work = await off_loop(state.reads.work_state, sid)
    claim = await off_loop(state.reads.current_claim, sid)
    summary = (await off_loop(state.reads.session_summaries, [sid]))[sid]
    base = state.session_out(row, summary=summary).model_dump()
    return SessionDetailOut(
        **base,
        children=[r.id for r in children],
        pending=len(pending),
        work_state=work,
        claim=None
        if claim is None
        else ClaimOut(
            owner=claim.owner,
            epoch=claim.epoch,
            lease_until_ms=claim.lease_until_ms,
            attempts=claim.attempts,
        ),
    )


@ops.op(
    "POST",
    "/sessions/{session_id}/fork",
    tag="sessions",
    body=ForkIn,
    status=201,
    response=SessionOut,
    errors=(400, 401, 404, 413, 422),
)
async def fork_session(call: Call[Any, ForkIn]) -> Any:
    """Fork: copy the transcript through `through_seq` into a new session (parent untouched)."""
    state: ServerState = call.state
    body, rt = call.body, state.runtime
    fields: dict[str, Any] = {}
    if body.title is not None:
        fields["title"] = body.title
    if body.agent is not None:
        resolve_agent(body.agent, rt.config)  # 422 before anything is written
    if body.model is not None:
        await off_loop(rt.check_model, body.model)
    # The fork belongs to the forked tree's owner, written with it (`SqlStore.fork`).
    row = await off_loop(state.runtime.fork, call.path["session_id"], body.through_seq, **fields)
    if await off_loop(rt.set_identity, row.id, agent=body.agent, model=body.model):
        row = await off_loop(state.reads.get_session, row.id)
    state.hub.nudge()
    response = respond(state.session_out(row), 201)
    response.headers["Location"] = f"{call.request.scope.get('root_path', '')}/sessions/{row.id}"
    return response


async def _set_archived(call: Call[Any, Any], value: bool) -> SessionOut:
    state: ServerState = call.state
    sid = call.path["session_id"]
    await off_loop(state.runtime.set_archived, sid, value)
    state.hub.nudge()
    return state.session_out(await off_loop(state.reads.get_session, sid))


@ops.op(
    "POST", "/sessions/{session_id}/archive", tag="sessions", response=SessionOut, errors=(401, 404)
)
async def archive_session(call: Call[Any, Any]) -> SessionOut:
    """Set the reversible archive marker."""
    return await _set_archived(call, True)


@ops.op(
    "POST",
    "/sessions/{session_id}/unarchive",
    tag="sessions",
    response=SessionOut,
    errors=(401, 404),
)
async def unarchive_session(call: Call[Any, Any]) -> SessionOut:
    """Clear the archive marker."""
    return await _set_archived(call, False)


@ops.op(
    "DELETE", "/sessions/{session_id}", tag="sessions", response=CountsOut, errors=(401, 404, 409)
)
async def delete_session(call: Call[Any, Any]) -> CountsOut:
    """Delete a session and its children for good (not while this server drives it)."""
    state: ServerState = call.state
    sid = call.path["session_id"]
    if state.is_active(sid):
        raise ConflictError(f"session {sid} is running here; interrupt it first")
    counts = await off_loop(state.runtime.delete, sid, actor=call.principal.name)
    return CountsOut.model_validate(counts.to_json())
