"""`wakeful replay`: a recorded step sent to other models, side by side with the recorded
reply, and `replay --check`: sessions re-driven from their recordings (docs/replay.md).

Both read a local store (the requests are rebuilt from its blobs). A replay writes a replay run
of its own (printed as `run ses_…`), never the source session; `--check` writes nothing and
exits 1 when a session's requests differ from the recorded ones.
"""

from __future__ import annotations

import asyncio
import sys
from typing import TYPE_CHECKING, Any

import click

from ..errors import UsageError
from ..events import CaseResult
from ._common import ID, db_option, format_option, local_runtime, print_json, printable
from ._debug import redact_body
from ._grammar import TURN, TURN_HELP, turn_number

if TYPE_CHECKING:
    from ..replay import StepReplay

CHECK_FAILED_EXIT = 1


@click.command()
@click.argument("sessions", nargs=-1, type=ID, required=True, metavar="SESSION...")
@click.option(
    "--turn",
    type=TURN,
    default=None,
    help=f"The turn: {TURN_HELP} (default: the newest with a request).",
)
@click.option(
    "--step", type=click.IntRange(min=1), default=None, help="Step in the turn (default: its last)."
)
@click.option(
    "--model",
    "models",
    multiple=True,
    metavar="SPEC",
    help="A model to send the step to (repeat for several).",
)
@click.option(
    "--fork",
    is_flag=True,
    help="Re-run the step's turn from that step on each model, as a fork (tools run).",
)
@click.option(
    "--to-end",
    "to_end",
    is_flag=True,
    help="With --fork: also re-send the later turns' inputs; compare turn by turn.",
)
@click.option(
    "--check",
    is_flag=True,
    help="Re-drive each SESSION from its recording; exit 1 at a differing request.",
)
@click.option("--show-sensitive", is_flag=True, help="Print instruction content verbatim.")
@format_option("text", "json")
@db_option
def replay(
    sessions: tuple[str, ...],
    turn: str | None,
    step: int | None,
    models: tuple[str, ...],
    fork: bool,
    to_end: bool,
    check: bool,
    show_sensitive: bool,
    fmt: str,
    db: str | None,
) -> None:
    """Send a recorded step's request to other models, or check sessions against their recording."""
    if check:
        if models or turn is not None or step is not None or fork:
            raise UsageError(
                "replay --check takes sessions only (no --model, --turn, --step, --fork)"
            )
        _check(sessions, show_sensitive, fmt, db)
        return
    if len(sessions) != 1:
        raise UsageError("replay takes one session (several only with --check)")
    if to_end and not fork:
        raise UsageError("replay --to-end goes with --fork")
    if not models:
        raise UsageError("replay: give at least one --model SPEC")
    _replay(sessions[0], turn, step, models, (fork, to_end), fmt, db)


def _replay(
    session: str,
    turn: str | None,
    step: int | None,
    models: tuple[str, ...],
    forking: tuple[bool, bool],
    fmt: str,
    db: str | None,
) -> None:
    from pathlib import Path

    from ..replay import replay_step

    fork, to_end = forking
    ask = None
    if fork and fmt == "text" and sys.stdin.isatty() and sys.stderr.isatty():
        from ._approve import terminal_ask  # someone can answer the fork's approvals

        ask = terminal_ask(Path.cwd().resolve())
    runtime = local_runtime(db, "replay", ask=ask)
    try:
        session = runtime.reads.resolve_session_id(session)
        number = None if turn is None else turn_number(runtime.reads, session, turn)
    except BaseException:
        runtime.close()
        raise

    async def main() -> StepReplay:
        try:
            return await replay_step(
                runtime, session, models, turn=number, step=step, fork=fork, to_end=to_end
            )
        finally:
            await runtime.aclose()

    done = asyncio.run(main())
    _print_replay(done, fork, to_end, fmt)


def _print_replay(done: StepReplay, fork: bool, to_end: bool, fmt: str) -> None:
    """What `replay` prints: each model's reply beside the recorded one and its diff against
    it (with `to_end`, turn by turn too), or all of it as JSON."""
    from ..replay import reply_diff

    started = done.view.started
    source = started.source or {}
    answers = {m: done.view.results[(started.cases[0].id, m)] for m in started.models}
    diffs = {m: reply_diff(done.original, r, m) for m, r in answers.items()}
    if fmt == "json":
        print_json(
            {
                "run_id": done.view.run_id,
                "source": source,
                "recorded": done.original.model_dump(mode="json"),
                "models": {
                    m: r.model_dump(mode="json") | {"diff": "\n".join(diffs[m])}
                    for m, r in answers.items()
                },
            }
        )
        return
    what = "recorded turn" if fork else "recorded"
    columns = {f"{what} ({source.get('model')})": done.original, **answers}
    _side_by_side(columns)
    if to_end:
        _turn_by_turn(columns)
    for model, lines in diffs.items():
        click.echo(f"\ndiff against the recorded reply: {model}")
        click.echo(printable("\n".join(lines), lines=True) if lines else "  (the same reply)")
    click.echo(
        f"run {done.view.run_id}  (replay of {source.get('session_id')} "
        f"turn {source.get('turn')} step {source.get('step')})",
        err=True,
    )


def _cell(result: CaseResult, field: str) -> str:
    if field == "text":
        return (
            result.text if result.error is None else f"[error: {result.error_kind}] {result.error}"
        )
    if field == "tool calls":
        import json

        calls = [f"{c.name} {json.dumps(c.input, ensure_ascii=False)}" for c in result.tool_calls]
        return "\n".join(calls) or "-"
    if field == "stop":
        return str(result.finish or "-")
    if field == "session":
        return result.session_id or "-"
    if field == "tokens in/out":
        return f"{result.input_tokens}/{result.output_tokens}"
    if field == "cost":
        from ..runner import format_cost

        return "-" if result.error is not None else format_cost(result.cost_usd, 6)
    return f"{result.latency_ms} ms"


FIELDS = ("text", "tool calls", "stop", "tokens in/out", "cost", "latency")


def _side_by_side(columns: dict[str, CaseResult]) -> None:
    """The results as a table: one column per model (the recorded reply first), a row per
    field."""
    from rich.console import Console
    from rich.table import Table

    table = Table(show_lines=True)
    table.add_column("")
    for name in columns:
        table.add_column(printable(name), overflow="fold")
    fields = FIELDS + (("session",) if any(r.session_id for r in columns.values()) else ())
    for field in fields:
        table.add_row(field, *(printable(_cell(r, field), lines=True) for r in columns.values()))
    Console(soft_wrap=False, highlight=False, markup=False).print(table)


def _turn_cell(row: Any) -> str:
    calls = ", ".join(c.name for c in row.tool_calls)
    text = row.text if len(row.text) <= 200 else row.text[:200] + "…"
    lines = [
        text or "-",
        f"[tools] {calls}" if calls else "",
        f"[error] {row.error}" if row.error else "",
    ]
    return "\n".join(line for line in lines if line)


def _turn_by_turn(columns: dict[str, CaseResult]) -> None:
    """The continuation, a row per turn (the original's turns against each fork's)."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title="turn by turn", show_lines=True)
    table.add_column("turn")
    for name in columns:
        table.add_column(printable(name), overflow="fold")
    numbers = sorted({t.turn for r in columns.values() for t in r.turns})
    for n in numbers:
        cells = []
        for result in columns.values():
            row = next((t for t in result.turns if t.turn == n), None)
            cells.append("-" if row is None else printable(_turn_cell(row), lines=True))
        table.add_row(str(n), *cells)
    Console(soft_wrap=False, highlight=False, markup=False).print(table)


def _check(sessions: tuple[str, ...], show: bool, fmt: str, db: str | None) -> None:
    from ..replay import CheckResult, body_diff, check_session

    rt = local_runtime(db, "replay --check")

    async def main() -> list[CheckResult]:
        return [await check_session(rt.store, s) for s in sessions]

    try:
        results = asyncio.run(main())
    finally:
        rt.close()
    out = [_check_json(r, show, body_diff) for r in results]
    if fmt == "json":
        print_json(out if len(out) > 1 else out[0])
    else:
        for r, data in zip(results, out, strict=True):
            _print_check(r, data)
    if any(not r.ok for r in results):
        sys.exit(CHECK_FAILED_EXIT)


def _check_json(result: Any, show: bool, body_diff: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "session_id": result.session_id,
        "ok": result.ok,
        "requests": result.requests,
        "matched": result.matched,
        "exact": result.exact,
    }
    d = result.difference
    if d is None:
        return data
    before, after = d.recorded_body, d.replayed_body
    if not show:  # instruction text never printed unless asked; the sections name the change
        before, after = _redacted(before), _redacted(after)
    diff = body_diff(before, after, f"recorded {d.label}", f"today {d.label}")
    data["difference"] = {
        "request": d.index,
        "label": d.label,
        "note": d.note,
        "recorded_digest": d.recorded_digest,
        "replayed_digest": d.replayed_digest,
        "sections": [{"id": s, "recorded": a, "replayed": b} for s, a, b in d.sections],
        "diff": "\n".join(diff),
    }
    return data


def _texts(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value] if value.strip() else []
    if isinstance(value, list):
        return [t for v in value for t in _texts(v.get("text") if isinstance(v, dict) else v)]
    return []


def _redacted(body: Any) -> Any:
    """A body with its system prompt and system messages masked (as `debug prompt` masks
    instruction text); the differing sections are named beside the diff instead."""
    if not isinstance(body, dict):
        return body
    texts = _texts(body.get("system"))
    for message in body.get("messages") or []:
        if isinstance(message, dict) and message.get("role") in ("system", "developer"):
            texts += _texts(message.get("content"))
    return redact_body(body, sorted(set(texts), key=len, reverse=True))


def _print_check(result: Any, data: dict[str, Any]) -> None:
    if result.ok:
        click.echo(f"{result.session_id}: ok, {result.requests} requests reproduced")
        return
    d = data["difference"]
    click.echo(
        f"{result.session_id}: request {d['request']} ({d['label']}) differs "
        f"after {result.matched} of {result.requests} reproduced"
        + (f": {d['note']}" if d["note"] else "")
    )
    for s in d["sections"]:
        click.echo(f"  section {s['id']}: {str(s['recorded'])[:12]} -> {str(s['replayed'])[:12]}")
    if d["diff"]:
        click.echo(printable(d["diff"], lines=True))
