"""`wakeful session search TEXT`: find sessions by what was said in them.

Answered from the store's full-text index (`Store.search`): every word must occur in one
message (or the title), `word*` matches a prefix, and the best matching session comes first.
"""

from __future__ import annotations

import time

import click

from ..store import SearchHit
from ._common import db_option, format_option, iso, no_default_store, print_json, store_for


def _local(ms: int) -> str:
    """Epoch milliseconds as local wall time, to the minute."""
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(ms / 1000))


def _plain(text: str) -> str:
    """`text` without control characters (no terminal escape from session content)."""
    return "".join(c if c.isprintable() else " " for c in text)


def _hit_json(hit: SearchHit) -> dict[str, object]:
    row = hit.session
    return hit.to_json() | {"updated_at": iso(row.updated_ms), "created_at": iso(row.created_ms)}


@click.command("search")
@click.argument("text")
@click.option("--archived", is_flag=True, help="Only archived sessions.")
@click.option("--all", "all_", is_flag=True, help="Archived and not.")
@click.option("--limit", default=20, show_default=True, type=click.IntRange(min=1, max=500))
@format_option("text", "json")
@db_option
def search(text: str, archived: bool, all_: bool, limit: int, fmt: str, db: str | None) -> None:
    """Sessions whose messages or title hold every word of TEXT, best match first."""
    hits: list[SearchHit] = []
    if not no_default_store(db):  # before the first run there is nothing to find
        store = store_for(db)
        try:
            hits = store.search(text, archived=None if all_ else archived, limit=limit).hits
        finally:
            store.close()
    if fmt == "json":
        print_json([_hit_json(h) for h in hits])
        return
    if not hits:
        click.echo(f"no session matches {text!r}", err=True)
        return
    for hit in hits:
        row = hit.session
        title = _plain(row.title or "(untitled)")[:60]
        click.echo(f"{row.id}  {_local(row.updated_ms)}  {row.model or '':<20.20} {title}")
        click.echo(f"    {_plain(hit.snippet)}")
