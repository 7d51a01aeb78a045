"""`wakeful log`: the durable events of a session (jsonl: every value whole)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import click

from ..errors import UsageError
from ..events import PlainEvent
from ..store import PlainReads, SyncMarker
from ._common import (
    db_option,
    format_option,
    iso,
    print_json,
    print_jsonl,
    printable,
    store_for,
)
from ._grammar import session_first

if TYPE_CHECKING:
    from ..events import StoredEvent


def shorten(value: object, width: int = 60) -> str:
    """A value for a one-line log entry: whole when it fits, else cut at the last word
    boundary before `width` with `…` and the full length (`--format jsonl` prints it whole)."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    if len(text) <= width:
        return text
    cut = text[:width]
    space = cut.rfind(" ")
    if space > width // 2:
        cut = cut[:space]
    return f"{cut}… ({len(text)} chars)"


def _line(ev: StoredEvent | PlainEvent) -> str:
    if isinstance(ev, PlainEvent):
        data = dict(ev.data)
    else:
        data = ev.event.model_dump(mode="json", exclude_none=True)
    data.pop("type", None)
    data.pop("v", None)
    brief = ", ".join(f"{k}={shorten(v)}" for k, v in data.items())
    return f"{ev.seq:>6}  {iso(ev.at_ms)}  {ev.type:<22} {printable(brief)}"


@click.command()
@session_first()
@click.option("--after", default=0, type=click.IntRange(min=0), metavar="SEQ")
@click.option("--follow", is_flag=True, help="Keep printing new events (from any process).")
@click.option(
    "--idle-timeout",
    type=float,
    default=None,
    metavar="S",
    help="Stop following after S idle seconds.",
)
@format_option("text", "json", "jsonl")
@db_option
def log(
    session: str, after: int, follow: bool, idle_timeout: float | None, fmt: str, db: str | None
) -> None:
    """Durable events of SESSION after SEQ (exclusive): a line each, one JSON array
    (json), or one JSON object per line, which --follow streams (jsonl)."""
    if fmt == "json" and follow:
        raise UsageError("--follow streams: use --format jsonl (or text)")
    store = store_for(db)
    session = store.resolve_session_id(session)
    whole: list[object] = []
    # A local store hands out the bodies as plain JSON, with no model built where the stored
    # JSON allows (`PlainReads.plain_log`; issue 25, cold start); a server's, as models.
    read = store.plain_log if isinstance(store, PlainReads) else store.log
    try:
        for item in read(session, after, follow=follow, idle_timeout_s=idle_timeout):
            if isinstance(item, SyncMarker):
                if fmt == "jsonl":
                    print_jsonl({"type": "sync", "seq": item.watermark})
                continue
            if fmt == "jsonl":
                print_jsonl(item.to_json())
            elif fmt == "json":
                whole.append(item.to_json())
            else:
                click.echo(_line(item))
    except KeyboardInterrupt:
        pass
    finally:
        store.close()
    if fmt == "json":
        print_json(whole)
