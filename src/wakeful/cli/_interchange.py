"""`session import --from FORMAT` and `session export --to FORMAT`: other tools' session files
read into the store and written from it (the formats: `wakeful.interchange`,
`docs/interchange.md`).

Invariant: an import reads and checks every file whole before it writes anything, and what it
writes is keyed by the source (session ids and message ids derived from it), so the same file
imported twice writes nothing the second time.
"""

from __future__ import annotations

import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ..errors import UsageError
from ._common import existing_dir, local_runtime, print_json, printable, store_for

if TYPE_CHECKING:
    from collections.abc import Iterable

    from pydantic import JsonValue

    from ..events import ReceiptRecorded
    from ..execution import Reads, Runtime
    from ..interchange import ExportedSession, ImportedSession
    from ..messages import Message
    from ..providers import ModelRequest
    from ..store import Store


def _read_file(path: str) -> bytes:
    try:
        return sys.stdin.buffer.read() if path == "-" else Path(path).read_bytes()
    except OSError as err:
        raise UsageError(f"{path}: {err.strerror or err}") from None


def import_files(
    source: str, paths: tuple[str, ...], location: str | None, fmt: str, db: str | None
) -> None:
    """Read every file of format `source`, then write the sessions not yet stored and the
    messages they lack; print what was written, kept and lost."""
    from ..interchange import format_named

    spec = format_named(source)
    where = existing_dir(location, "--location") if location else None
    sessions: list[ImportedSession] = []
    for path in paths:
        if spec.read_path is not None and path != "-":
            sessions += spec.read_path(path)
        else:
            sessions += spec.read(_read_file(path), "<stdin>" if path == "-" else path)
    _check_unique(sessions)
    for s in sessions:
        _check_storable(s)
    rt = local_runtime(db, "importing a session", create=True)
    try:
        plans = [_plan(rt.reads, s) for s in sessions]
        results = [_apply(rt, plan, where) for plan in plans]
    finally:
        rt.close()
    dropped = sum((s.dropped for s in sessions), Counter[str]())
    if fmt == "json":
        print_json({"sessions": results, "kept": spec.kept, "lost": spec.lost, "dropped": dropped})
        return
    for r in results:
        click.echo(
            f"{r['id']}  {r['written']} messages written, {r['present']} already there"
            f"  ({source} {printable(str(r['source_id']))})"
        )
    click.echo(f"kept as metadata: {spec.kept}")
    click.echo(f"not imported: {_counts(dropped) or 'nothing'}")
    click.echo(f"never imported: {spec.lost}")


def _counts(counts: Counter[str]) -> str:
    return ", ".join(f"{n} {printable(kind)}{'s' if n > 1 else ''}" for kind, n in counts.items())


def _check_unique(sessions: list[ImportedSession]) -> None:
    """Two files holding the same source session: refuse before writing either."""
    seen: set[str] = set()
    for s in sessions:
        if s.session_id in seen:
            raise UsageError(f"{s.format} session {s.source_id} is in more than one file given")
        seen.add(s.session_id)


def _check_storable(session: ImportedSession) -> None:
    """Every message encodes (no lone surrogate) and is within the store's limit on one
    message; else a `UsageError` naming where the first one came from."""
    from ..messages import dump_message
    from ..store import MESSAGE_MAX_BYTES

    for k, message in enumerate(session.messages):
        try:
            size = len(dump_message(message).encode())
        except ValueError as err:
            problem = f"not a storable message: {str(err).splitlines()[0]}"
            raise UsageError(f"{session.position(k)}: {problem}") from None
        if size > MESSAGE_MAX_BYTES:
            raise UsageError(
                f"{session.position(k)}: a message of {size} bytes is over the store's limit "
                f"of {MESSAGE_MAX_BYTES}"
            )


def _place(session: ImportedSession, location: str | None) -> str:
    """Where the session lives: `--location` (checked already), else the directory the source
    ran in when it exists here, else this directory."""
    if location:
        return location
    if session.workspace and Path(session.workspace).is_dir():
        return str(Path(session.workspace).resolve())
    return str(Path.cwd().resolve())


@dataclass
class _Plan:
    """What importing one session writes: the session (unless it is there) and the messages
    it lacks."""

    session: ImportedSession
    create: bool
    new: list[Message]


def _plan(store: Reads, session: ImportedSession) -> _Plan:
    """Compare one session with the store; `UsageError` when its id is taken by a session
    that was not imported from the same source (nothing is written before every plan)."""
    row = store.find_session(session.session_id)
    if row is None:
        return _Plan(session, True, list(session.messages))
    first = store.events(row.id, limit=1)
    metadata = getattr(first[0].event, "metadata", None) if first else None
    source = (metadata or {}).get("imported_from")
    if source != {"format": session.format, "source_id": session.source_id}:
        raise UsageError(
            f"session {row.id} exists and was not imported from {session.format} "
            f"{session.source_id}; nothing was imported"
        )
    present = {m.id for m in store.messages(row.id)}
    return _Plan(session, False, [m for m in session.messages if m.id not in present])


def _apply(rt: Runtime, plan: _Plan, location: str | None) -> dict[str, object]:
    """Create the session if it is not there and append the messages it lacks."""
    from ..events import MessageAdded

    session = plan.session
    if plan.create:  # the session and its messages in one transaction
        place = _place(session, location)
        imported: dict[str, JsonValue] = {"format": session.format, "source_id": session.source_id}
        rt.create_session(
            session_id=session.session_id,
            title=session.title,
            model=session.model,
            location=place,
            metadata={**session.metadata, "imported_from": imported, "workspace": place},
            events=[MessageAdded(message=m) for m in plan.new],
        )
    elif plan.new:
        rt.append_events(session.session_id, [MessageAdded(message=m) for m in plan.new])
    return {
        "id": session.session_id,
        "source_id": session.source_id,
        "written": len(plan.new),
        "present": len(session.messages) - len(plan.new),
    }


def exported(store: Store, session_id: str) -> ExportedSession:
    """A stored session as the writers take it (messages with the time each was added)."""
    from ..events import MessageAdded
    from ..interchange import ExportedSession

    row = store.get_session(store.resolve_session_id(session_id))
    added = {
        e.event.message.id: e.at_ms
        for e in store.events(row.id, types=("message.added",))
        if isinstance(e.event, MessageAdded)
    }
    created = store.events(row.id, limit=1)
    metadata = getattr(created[0].event, "metadata", None) if created else None
    messages = tuple((m, added.get(m.id, row.created_ms)) for m in store.messages(row.id))
    return ExportedSession(
        id=row.id,
        title=row.title,
        model=row.model,
        location=row.location,
        created_ms=row.created_ms,
        metadata=dict(metadata or {}),
        messages=messages,
    )


def export_to(target: str, session_id: str, output: str | None, db: str | None) -> None:
    """Write the session in format `target` to `output` (or stdout); say on stderr what the
    format could not hold."""
    from ..interchange import format_named

    spec = format_named(target)
    if spec.binary and not output:
        raise UsageError(f"--to {target} writes a database file: give it with -o FILE")
    store = store_for(db)
    try:
        session = exported(store, session_id)
    finally:
        store.close()
    written = spec.write(session)
    if output:
        Path(output).write_bytes(written.data)
    else:
        sys.stdout.buffer.write(written.data)
        sys.stdout.flush()
    if written.dropped:
        click.echo(
            f"not exported: {_counts(written.dropped)} ({target} has no place for them)", err=True
        )


def export_otel(
    session_id: str, output: str | None, endpoint: str | None, redact: bool, db: str | None
) -> None:
    """Write the session's turns, steps and tool calls as OTLP JSON to `output` (or stdout),
    or send them to an OTLP/HTTP `endpoint` (`docs/interchange.md`, "OpenTelemetry")."""
    import json

    from .. import __version__
    from ..interchange import Recorded, otlp_request

    store = store_for(db)
    try:
        row = store.get_session(store.resolve_session_id(session_id))
        receipts = {r.receipt_id: r for r in store.receipts(row.id)}
        recorded = Recorded(
            row.id,
            row.agent,
            store.events(row.id),
            receipts,
            store.messages(row.id),
            _requests(store, row.id, receipts.values()),
        )
    finally:
        store.close()
    doc = otlp_request(recorded, redact=redact, version=__version__)
    data = json.dumps(doc, ensure_ascii=False).encode()
    count = len(doc["resourceSpans"][0]["scopeSpans"][0]["spans"])
    if endpoint:
        _send(endpoint, data)
        click.echo(f"sent {count} spans of {row.id} to {printable(endpoint)}", err=True)
    if output:
        Path(output).write_bytes(data + b"\n")
    elif not endpoint:
        sys.stdout.buffer.write(data + b"\n")
        sys.stdout.flush()


def _requests(
    store: Store, session_id: str, receipts: Iterable[ReceiptRecorded]
) -> dict[str, ModelRequest]:
    """Each step receipt's request, rebuilt from its blobs as `wakeful debug prompt` rebuilds
    it, for its system instructions and tools; none from a server's store, which does not
    serve receipt blobs (`debug prompt` refuses one too). The provider name only shapes the
    repair of the messages, which the export reads from the log instead."""
    from ..runner import rebuild_request
    from ..store import ReceiptReads

    if not isinstance(store, ReceiptReads):
        return {}
    return {
        r.receipt_id: rebuild_request(store, session_id, r, r.model.partition(":")[0])
        for r in receipts
        if r.purpose == "step"
    }


def _send(endpoint: str, data: bytes) -> None:
    """POST one OTLP/HTTP JSON request (to `/v1/traces` under `endpoint` unless it names it);
    a one-line `UsageError` when the collector is unreachable or refuses it."""
    import httpx

    url = (
        endpoint
        if endpoint.rstrip("/").endswith("/v1/traces")
        else endpoint.rstrip("/") + "/v1/traces"
    )
    try:
        response = httpx.post(
            url, content=data, headers={"Content-Type": "application/json"}, timeout=30
        )
    except httpx.HTTPError as err:
        raise UsageError(f"cannot send to {url}: {err}") from None
    if response.status_code >= 300:
        raise UsageError(f"{url} answered {response.status_code}: {response.text[:200]}")
