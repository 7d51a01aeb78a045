"""`wakeful compact`: request a manual compaction (an inbox control item) and drive it."""

from __future__ import annotations

import asyncio
import sys

import click

from ..execution import Runtime
from ..runner import CompactionResult, compaction_result
from ._common import db_option, format_option, print_json, require_store
from ._grammar import session_first


async def _drive(rt: Runtime, session_id: str, input_id: str) -> CompactionResult | None:
    try:
        await rt.resume(session_id)
        return compaction_result(rt.store, session_id, input_id)
    finally:
        await rt.aclose()


def compaction_text(result: CompactionResult) -> str:
    """What a manual compaction did, for a person (`compact`, the chat's `/compact`)."""
    if not result.compacted:
        extra = f": {result.error}" if result.error else ""
        return f"not compacted ({result.reason}){extra}"
    if result.strategy == "tail":
        return (
            f"compacted (tail): {result.replaced} older tool results hidden, no summary\n"
            f"next request ~{result.effective_tokens} tokens"
        )
    usage = result.usage
    spent = f"{usage.input_tokens} in / {usage.output_tokens} out" if usage else "no usage"
    return (
        f"compacted: {result.replaced} messages replaced by summary {result.summary_id} "
        f"({result.dropped} left out of the summary request)\n"
        f"model {result.model}  {spent}  next request ~{result.effective_tokens} tokens"
    )


@click.command()
@session_first()
@click.option(
    "--tail-turns",
    type=click.IntRange(min=0),
    default=None,
    help="Recent turns kept word for word (default: [compaction] tail_turns).",
)
@format_option("text", "json")
@db_option
def compact(session: str, tail_turns: int | None, fmt: str, db: str | None) -> None:
    """Summarize older history of SESSION now (the full transcript stays stored)."""
    require_store(db)
    rt = Runtime(db)
    session = rt.reads.resolve_session_id(session)
    sent = rt.compact(session, tail_turns=tail_turns, resume=False)
    result = asyncio.run(_drive(rt, session, sent.input_id))
    if result is None:  # another process drives the session; it runs the request
        out: dict[str, object] = {"session_id": session, "input_id": sent.input_id}
        if fmt == "json":
            print_json(out | {"pending": True})
        else:
            click.echo(f"compaction {sent.input_id} admitted; the session's driver will run it")
        return
    if fmt == "json":
        print_json({"session_id": session, "input_id": sent.input_id} | result.to_json())
    else:
        click.echo(compaction_text(result))
    sys.exit(1 if result.reason == "failed" else 0)
