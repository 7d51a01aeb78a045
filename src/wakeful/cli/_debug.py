"""`wakeful debug prompt`: one request as the provider received it, rebuilt from its receipt.

The receipt holds section blobs, message ids and the digest of the exact body; the body is
rebuilt through the provider's own `wire_request` and checked against that digest, so what is
printed is what was sent. Redaction happens on the printed copy only (the digest is of the
real body): instruction sections and system messages (the instruction text frozen into the
transcript) are replaced by a marker, and any secret-looking key is masked, unless
`--show-sensitive`. `--turn`/`--step`/`--attempt` pick the receipt (default: the newest step of
the newest turn); `--diff` compares the body with the previous step's.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
from pydantic import JsonValue

from ..config import load_config
from ..errors import UsageError
from ..events import ReceiptRecorded
from ..providers import make_provider
from ..replay import Step, body_diff, body_text, label, pick, step_receipts
from ..runner import rebuild_request, request_digest
from ..store import ReceiptReads
from ._common import REDACTED, db_option, format_option, local_runtime, print_json
from ._grammar import TURN, TURN_HELP, session_first, turn_number

SENSITIVE_PREFIXES = ("system.instructions", "system.agents", "system.skill", "system.memory")
SECRET_KEYS = ("api_key", "api-key", "authorization", "x-api-key", "password", "secret", "token")


@click.group()
def debug() -> None:
    """Look inside sessions."""


def _secret_key(key: str) -> bool:
    lowered = key.lower()
    return lowered in SECRET_KEYS or lowered.endswith(("_key", "_secret", "_token", "-key"))


def redact_body(value: JsonValue, hidden: list[str]) -> JsonValue:
    """A copy of a request body with every occurrence of a `hidden` text replaced by the
    marker (longest first) and the value of every secret-looking key masked."""
    if isinstance(value, str):
        for text in hidden:
            value = value.replace(text, REDACTED)
        return value
    if isinstance(value, list):
        return [redact_body(v, hidden) for v in value]
    if isinstance(value, dict):
        return {
            k: "[redacted]" if _secret_key(k) else redact_body(v, hidden) for k, v in value.items()
        }
    return value


@dataclass(frozen=True, slots=True)
class Rebuilt:
    """One receipt's request, rebuilt: sections, the body as sent, and whether it verifies."""

    sections: list[dict[str, Any]]
    body: JsonValue
    digest: str
    verified: bool


def rebuild(store: ReceiptReads, session_id: str, receipt: ReceiptRecorded, show: bool) -> Rebuilt:
    """The request of `receipt`, built as the runtime built it (the `[providers]` settings of
    this directory shape the body), redacted unless `show`."""
    try:
        options = load_config(Path.cwd().resolve()).providers.model_options(receipt.model)
        provider = make_provider(receipt.model, **options)
    except UsageError as err:
        raise UsageError(f"cannot rebuild the request for {receipt.model}: {err}") from None
    request = rebuild_request(store, session_id, receipt, provider.name)
    digest = request_digest(provider, request)
    hidden: list[str] = []
    sections = []
    for sid, source, blob in receipt.sections:
        content = store.get_blob(blob).decode()
        secret = sid.startswith(SENSITIVE_PREFIXES) and not show
        if secret and content.strip():
            hidden.append(content)
        sections.append(
            {
                "id": sid,
                "source": source,
                "digest": blob,
                "bytes": len(content.encode()),
                "content": REDACTED if secret else content,
            }
        )
    if not show:
        hidden += [m.text() for m in request.messages if m.role == "system" and m.text().strip()]
    body = provider.wire_request(request)
    shown = body if show else redact_body(body, sorted(set(hidden), key=len, reverse=True))
    return Rebuilt(sections, shown, digest, digest == receipt.request_digest)


@debug.command()
@session_first()
@click.option(
    "--turn",
    type=TURN,
    default=None,
    help=f"The turn: {TURN_HELP} (default: the newest with a request).",
)
@click.option(
    "--step", type=click.IntRange(min=1), default=None, help="Step in the turn (default: its last)."
)
@click.option("--attempt", type=click.IntRange(min=1), default=None)
@click.option("--diff", is_flag=True, help="Show what changed since the previous step's request.")
@click.option("--show-sensitive", is_flag=True, help="Print instruction content verbatim.")
@format_option("text", "json")
@db_option
def prompt(
    session: str,
    turn: str | None,
    step: int | None,
    attempt: int | None,
    diff: bool,
    show_sensitive: bool,
    fmt: str,
    db: str | None,
) -> None:
    """One request of SESSION as sent to the provider: its receipt, the body, verified
    against the digest."""
    if db and db.startswith(("http://", "https://")):  # the body is rebuilt from local blobs
        raise UsageError(
            "debug prompt reads a local store (SQLite path or postgresql:// URL); a server "
            "gives receipts at GET /sessions/ID/receipts"
        )
    rt = local_runtime(db, "debug prompt")
    store = rt.store
    try:
        session = store.resolve_session_id(session)
        steps = step_receipts(store, session)
        number = None if turn is None else turn_number(store, session, turn)
        at = pick(steps, number, step, attempt)
        chosen = steps[at]
        receipt = chosen.receipt
        now = rebuild(store, session, receipt, show_sensitive)
        before = (
            rebuild(store, session, steps[at - 1].receipt, show_sensitive) if diff and at else None
        )
    finally:
        rt.close()
    changes = (
        body_diff(before.body, now.body, label(steps[at - 1]), label(chosen)) if before else None
    )
    if show_sensitive:
        click.echo(
            "warning: this output contains instruction content verbatim; treat it as sensitive",
            err=True,
        )
    out = _prompt_json(session, chosen, now)
    if diff:
        out["diff"] = None if changes is None else "\n".join(changes)
    if fmt == "json":
        print_json(out)
        return
    _print_text(chosen, now, diff, changes)


def _prompt_json(session: str, chosen: Step, now: Rebuilt) -> dict[str, Any]:
    """`debug prompt --format json`: the receipt, the rebuilt body and whether its digest
    matches, and the OpenTelemetry trace of the request when it had one."""
    receipt = chosen.receipt
    out: dict[str, Any] = {
        "session_id": session,
        "turn": chosen.turn,
        "turn_id": receipt.turn_id,
        "step": receipt.step,
        "attempt": receipt.attempt,
        "model": receipt.model,
        "receipt_id": receipt.receipt_id,
        "request_digest": receipt.request_digest,
        "rebuilt_digest": now.digest,
        "verified": now.verified,
        "sections": now.sections,
        "message_ids": list(receipt.message_ids),
        "request": now.body,
    }
    if receipt.trace_id is not None:  # the OpenTelemetry trace of this request
        out |= {"trace_id": receipt.trace_id, "span_id": receipt.span_id}
    return out


def _print_text(chosen: Step, now: Rebuilt, diff: bool, changes: list[str] | None) -> None:
    receipt = chosen.receipt
    click.echo(f"receipt {receipt.receipt_id}  {label(chosen)}  {receipt.model}")
    for s in now.sections:
        click.echo(f"  {s['id']:<24} {s['source']:<20} {s['bytes']:>7} B  {str(s['digest'])[:16]}")
    click.echo(f"  messages: {len(receipt.message_ids)}")
    if receipt.trace_id is not None:
        click.echo(f"  trace {receipt.trace_id}  span {receipt.span_id}")
    click.echo(
        f"request digest {receipt.request_digest}  {'verified' if now.verified else 'MISMATCH'}"
    )
    if not diff:
        click.echo("request body (as sent):")
        click.echo(body_text(now.body))
    elif changes is None:
        click.echo("no previous step: this is the session's first request")
    elif not changes:
        click.echo("the request body is the same as the previous step's")
    else:
        click.echo("\n".join(changes))
