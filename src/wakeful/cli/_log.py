"""`wakeful log` over the durable log and `wakeful debug prompt` over prompt receipts."""

from __future__ import annotations

import click

from ..errors import NotFoundError, UsageError
from ..events import StoredEvent
from ..providers import make_provider
from ..runner import rebuild_request, request_digest
from ..store import SyncMarker
from ._common import db_option, format_option, iso, print_json, print_jsonl, store_for

SENSITIVE_PREFIXES = ("system.instructions", "system.agents", "system.skill", "system.memory")


def _line(ev: StoredEvent) -> str:
    data = ev.event.model_dump(mode="json", exclude_none=True)
    data.pop("type", None)
    data.pop("v", None)
    brief = ", ".join(f"{k}={str(v)[:60]}" for k, v in data.items())
    return f"{ev.seq:>6}  {iso(ev.at_ms)}  {ev.type:<22} {brief}"


@click.command()
@click.option("--session", "session", metavar="ID", required=True)
@click.option("--after", default=0, type=click.IntRange(min=0), metavar="SEQ")
@click.option("--follow", is_flag=True, help="Keep printing new events (from any process).")
@click.option(
    "--idle-timeout",
    type=float,
    default=None,
    metavar="S",
    help="Stop following after S idle seconds.",
)
@format_option("text", "jsonl")
@db_option
def log(
    session: str, after: int, follow: bool, idle_timeout: float | None, fmt: str, db: str | None
) -> None:
    """Durable events of a session after SEQ (exclusive)."""
    store = store_for(db)
    store.get_session(session)
    try:
        for item in store.log(session, after, follow=follow, idle_timeout_s=idle_timeout):
            if isinstance(item, SyncMarker):
                if fmt == "jsonl":
                    print_jsonl({"type": "sync", "seq": item.watermark})
                continue
            if fmt == "jsonl":
                print_jsonl(item.to_json())
            else:
                click.echo(_line(item))
    except KeyboardInterrupt:
        pass
    finally:
        store.close()


@click.group()
def debug() -> None:
    """Look inside sessions."""


@debug.command()
@click.option("--session", "session", metavar="ID", required=True)
@click.option("--step", type=click.IntRange(min=1), required=True)
@click.option("--attempt", type=click.IntRange(min=1), default=None)
@click.option("--show-sensitive", is_flag=True, help="Print instruction content verbatim.")
@format_option("text", "json")
@db_option
def prompt(
    session: str, step: int, attempt: int | None, show_sensitive: bool, fmt: str, db: str | None
) -> None:
    """The receipt of one request: sections, digests, and the request rebuilt and verified."""
    store = store_for(db)
    store.get_session(session)
    receipts = [
        r
        for r in store.receipts(session)
        if r.purpose == "step" and r.step == step and (attempt is None or r.attempt == attempt)
    ]
    if not receipts:
        raise NotFoundError(f"no receipt for step {step} in {session}")
    receipt = receipts[-1] if attempt is None else receipts[0]
    sections = []
    for sid, source, digest in receipt.sections:
        content = store.get_blob(digest).decode()
        hidden = sid.startswith(SENSITIVE_PREFIXES) and not show_sensitive
        sections.append({"id": sid, "source": source, "digest": digest, "bytes": len(content.encode()),
                         "content": "[redacted: --show-sensitive]" if hidden else content})  # fmt: skip
    try:
        provider = make_provider(receipt.model)
    except UsageError as err:
        raise UsageError(f"cannot rebuild the request for {receipt.model}: {err}") from None
    rebuilt = rebuild_request(store, session, receipt, provider.name)
    digest = request_digest(provider, rebuilt)
    store.close()
    out = {
        "session_id": session, "step": receipt.step, "attempt": receipt.attempt, "model": receipt.model,
        "receipt_id": receipt.receipt_id, "request_digest": receipt.request_digest,
        "rebuilt_digest": digest, "verified": digest == receipt.request_digest,
        "sections": sections, "message_ids": list(receipt.message_ids),
    }  # fmt: skip
    if show_sensitive:
        click.echo(
            "warning: this output contains instruction content verbatim; treat it as sensitive",
            err=True,
        )
    if fmt == "json":
        print_json(out)
        return
    click.echo(
        f"receipt {receipt.receipt_id}  step {receipt.step} attempt {receipt.attempt}  {receipt.model}"
    )
    for s in sections:
        click.echo(f"  {s['id']:<24} {s['source']:<20} {s['bytes']:>7} B  {str(s['digest'])[:16]}")
    click.echo(f"  messages: {len(receipt.message_ids)}")
    click.echo(
        f"request digest {receipt.request_digest}  {'verified' if out['verified'] else 'MISMATCH'}"
    )
