"""`wakeful session show`: a session's transcript, usage, children, state and runs."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, TypeGuard, cast

import click

from ..errors import UsageError
from ._common import (
    REDACTED,
    db_option,
    format_option,
    local_time,
    print_json,
    printable,
    store_for,
)
from ._grammar import session_first
from ._session import row_json, session

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from ..execution import Reads
    from ..runner import RunRecord
    from ..store import PlainStore, SessionRow, Store


@session.command()
@session_first(dest="session_id")
@click.option("--show-sensitive", is_flag=True, help="Print instruction text verbatim.")
@click.option(
    "--output",
    "call_id",
    metavar="CALL",
    help="Print only the whole output of tool call CALL (all of it where the model got it cut).",
)
@click.option(
    "--context",
    "context",
    is_flag=True,
    help="Show the context (what the next request carries) instead of the transcript.",
)
@format_option("text", "json")
@db_option
def show(
    session_id: str,
    show_sensitive: bool,
    call_id: str | None,
    context: bool,
    fmt: str,
    db: str | None,
) -> None:
    """A session: transcript, usage, children, state.

    Instruction text (the system messages that record a change of AGENTS.md and the like) is
    redacted unless --show-sensitive. With --context, the messages shown are the session's
    context: the active history after compactions, hidden tool output as its stub.
    """
    store = store_for(db)
    try:
        row = _found(store, session_id)
        session_id = row.id
        if call_id is not None:
            sys.stdout.write(_whole_output(store, session_id, call_id))
            return
        view = _plain_view(store, session_id) if _local(store) else _model_view(store, session_id)
        if context:
            view = (_context_view(store, session_id), *view[1:])
        children = [r.id for r in store.children(session_id)]
        work = store.work_state(session_id)
    finally:
        store.close()
    messages, pending, runs, waiting = view
    if not show_sensitive:
        from ..messages import redact_plain

        messages = [redact_plain(m, REDACTED) for m in messages]
    else:
        click.echo(
            "warning: this output contains instruction text verbatim; treat it as sensitive",
            err=True,
        )
    if fmt == "json":
        print_json(_show_json(row, messages, children, pending, work, runs, waiting))
        return
    _print_header(row, runs, children)
    _print_transcript(row, messages, pending, waiting, runs)


def _show_json(
    row: SessionRow,
    messages: Sequence[dict[str, Any]],
    children: list[str],
    pending: list[str],
    work: Mapping[str, Any],
    runs: Sequence[RunRecord],
    waiting: Sequence[dict[str, Any]],
) -> dict[str, Any]:
    """`session show --format json`: the row with its messages, children, pending inputs, work
    state, runs and the calls waiting for approval."""
    from ..events import without_defaults

    approvals = [{k: w[k] for k in ("call_id", "name", "input", "preview")} for w in waiting]
    return row_json(row) | {
        "messages": [without_defaults("Message", m) for m in messages],
        "children": children,
        "pending": pending,
        "work_state": work,
        "runs": [r.to_json() for r in runs],
        "approvals": approvals,
    }


def _print_header(row: SessionRow, runs: Sequence[RunRecord], children: Sequence[str]) -> None:
    """`session show`'s heading lines: the row, its usage and cost, its lineage."""
    click.echo(
        f"{row.id}  {printable(row.title)}\nstatus {row.status}  model {printable(row.model)}  "
        f"agent {printable(row.agent)}"
    )
    click.echo(f"location {printable(row.location or '(none)')}  {row.location_id or ''}".rstrip())
    if row.waiting_for:
        click.echo(
            f"waiting for its location {printable(row.waiting_for)}: no running worker serves it"
        )
    from ..runner import format_cost

    unpriced = sum(r.unpriced for r in runs)
    cost = format_cost(row.cost_usd if row.cost_usd or not unpriced else None, 4, unpriced)
    click.echo(f"usage {row.input_tokens} in / {row.output_tokens} out  {cost}")
    if row.cache_read_tokens or row.cache_write_tokens:
        hits = ", ".join(f"{r.cache_hit_ratio:.0%}" for r in runs if r.cache_hit_ratio is not None)
        click.echo(
            f"cache {row.cache_read_tokens} read / {row.cache_write_tokens} written  "
            f"(hit ratio per turn: {hits})"
        )
    click.echo(f"updated {local_time(row.updated_ms)}  created {local_time(row.created_ms)}")
    if row.forked_from:
        click.echo(f"⑂ fork of {row.forked_from} (through seq {row.fork_seq})")
    if row.parent_id:
        click.echo(f"↳ child of {row.parent_id}")
    if children:
        click.echo(f"child sessions: {', '.join(children)}")


def _print_transcript(
    row: SessionRow,
    messages: list[dict[str, Any]],
    pending: Sequence[str],
    waiting: Sequence[dict[str, Any]],
    runs: Sequence[RunRecord],
) -> None:
    """`session show`'s transcript (each tool call with its result under it), what waits, and
    each run with why it failed, blocked or paused."""
    from ._tools_view import transcript_lines

    calls = False
    for label, body in transcript_lines(messages):
        if label.startswith("→"):  # a tool call, its result indented under it
            click.echo(
                f"{'' if calls else chr(10)}{printable(label)}\n{printable(body, lines=True)}"
            )
            calls = True
        else:
            click.echo(f"\n[{printable(label)}] {printable(body, lines=True)}")
            calls = False
    if pending:
        click.echo(f"\npending inputs: {', '.join(pending)}")
    for w in waiting:
        click.echo(f"\nawaiting approval: {w['call_id']}  {printable(w['name'])}")
        for line in w["preview"].splitlines():
            click.echo(f"    {printable(line)}")
    if waiting:
        click.echo(f"decide with: wakeful approve {row.id} CALL [--deny | --always]")
    for r in runs:
        click.echo(
            f"run {r.id}: {r.outcome or r.status}{' (truncated)' if r.truncated else ''}, "
            f"{r.steps} steps, {r.tokens_in} in / {r.tokens_out} out, "
            f"{len(r.retries)} retries"
        )
        if r.error and (r.outcome or r.status) != "completed":  # why it failed, blocked, paused
            click.echo(f"    {printable(r.error, lines=True)}")


def _whole_output(store: Store, session_id: str, call_id: str) -> str:
    """The whole output of one tool call of the session: the blob a capped result names
    (`messages.full_output`), else the result's text; a one-line `UsageError` for no such
    call."""
    from ..messages import full_output, result_text

    messages = (
        store.plain_messages(session_id)
        if _local(store)
        else [m.model_dump(mode="json", exclude_none=True) for m in store.messages(session_id)]
    )
    for m in messages:
        for b in m["blocks"]:
            if b["type"] == "tool_result" and b["call_id"] == call_id:
                kept = full_output(b.get("metadata"))
                if kept is None:
                    return result_text(b["output"])
                blob: bytes = store.get_blob(kept[0])  # type: ignore[attr-defined]  # a local store, RemoteStore
                return blob.decode("utf-8", errors="replace")
    raise UsageError(f"no result of a tool call {call_id!r} in session {session_id}")


# What `show` prints besides the session row: the transcript (plain message dumps), the
# pending input ids, the run records and the calls waiting for approval (plain bodies).
_View = tuple[list[dict[str, Any]], list[str], "list[RunRecord]", list[dict[str, Any]]]


def _found(store: Store, ref: str) -> SessionRow:
    """The session `ref` names; a deleted one's `NotFoundError` says when and by whom, from
    its tombstone (docs/access.md, "Who did what")."""
    from ..errors import NotFoundError
    from ..store import utc_minute

    try:
        return store.get_session(store.resolve_session_id(ref))
    except NotFoundError as err:
        access = getattr(store, "access", None)  # a local database's (a server's 404 is all)
        gone = access.deletions(ref) if access is not None else []
        if not gone:
            raise
        last = gone[-1]
        by = printable(last.actor or "someone not recorded")
        raise NotFoundError(f"{err} (deleted {utc_minute(last.deleted_ms)} UTC by {by})") from None


def _local(store: Store) -> TypeGuard[PlainStore]:
    from ..store import PlainReads

    return isinstance(store, PlainReads)


def _plain_view(store: PlainStore, session_id: str) -> _View:
    """What `show` prints, read from the stored JSON without building models where it allows
    (`PlainReads.plain_messages`, `plain_events`): the cold start of issue 25 (docs/cli.md)."""
    from ..runner import APPROVAL_TYPES, run_records, waiting_requests

    events = store.plain_events(session_id, types=APPROVAL_TYPES)
    waiting = waiting_requests(
        [(e.seq, e.data) for e in events],
        lambda: {c.message_id for c in store.tool_calls(session_id)},
    )
    return (
        store.plain_messages(session_id),
        store.pending_ids(session_id),
        run_records(store, session_id),
        waiting,
    )


def _context_view(store: Store, session_id: str) -> list[dict[str, Any]]:
    """The session's context as plain message dumps (`execution.session_context`; through the
    server's `/context` for a remote store)."""
    from ..execution import session_context

    if _local(store):  # a local database, whose store is also `Reads`
        found = session_context(cast("Reads", store), session_id)
        return [m.model_dump(mode="json", exclude_none=True) for m in found]
    client = getattr(store, "client", None)
    if client is None:
        raise UsageError("--context needs a local database or a server")
    messages: list[dict[str, Any]] = client.context(session_id)["messages"]
    return messages


def _model_view(store: Store, session_id: str) -> _View:
    """`_plain_view` of any `Store` (a server's), through the models."""
    from ..execution import pending_approvals
    from ..runner import run_records

    messages = [m.model_dump(mode="json", exclude_none=True) for m in store.messages(session_id)]
    waiting = [w.model_dump(mode="json") for w in pending_approvals(store, session_id)]
    return (
        messages,
        [p.input_id for p in store.pending(session_id)],
        run_records(store, session_id),
        waiting,
    )
