"""`wakeful run`, `send`, `interrupt`: admit input durably and drive it."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from typing import Any

import click

from ..errors import UsageError
from ..execution import Runtime
from ..runner import LiveEvent, TurnResult
from ._common import EXIT_CODES, db_option, format_option, print_json, print_jsonl


def _is_server(db: str | None) -> bool:
    return bool(db) and str(db).startswith(("http://", "https://"))


def _client(db: str | None) -> Any:
    """A client of the `wakeful serve` at `db` (token: `$WAKEFUL_SERVER_TOKEN`)."""
    from ..client import Client

    return Client(str(db))


class _Renderer:
    """Streams a turn to the terminal: text to stdout; tool calls, retries and (on a terminal) a
    spinner while waiting on the model or a retry, with the retry's deadline, to stderr."""

    FRAMES = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"

    def __init__(self, fmt: str) -> None:
        self.fmt = fmt
        self.session_id: str | None = None  # text mode shows only this session's stream
        self.waiting: str | None = None  # what the spinner says, None when nothing is awaited
        self.spinning = fmt == "text" and sys.stderr.isatty()
        self._shown = False

    def __call__(self, ev: LiveEvent) -> None:
        if self.fmt == "jsonl":
            print_jsonl({"session_id": ev.session_id, "kind": ev.kind, "data": ev.data})
        elif self.fmt == "text" and ev.session_id in (self.session_id, None):
            self._text(ev)

    def _text(self, ev: LiveEvent) -> None:
        if ev.kind == "step":
            self.waiting = "waiting for the model"
            return
        self.waiting = None
        self.clear()
        if ev.kind == "text":
            sys.stdout.write(str(ev.data.get("text", "")))
            sys.stdout.flush()
        elif ev.kind == "tool_start":
            click.echo(f"\n→ {ev.data.get('name')}", err=True)
        elif ev.kind == "tool_end" and ev.data.get("is_error"):
            click.echo(f"  ✗ {ev.data.get('name')} failed", err=True)
        elif ev.kind == "retry":
            delay_ms = int(str(ev.data.get("delay_ms", 0)))
            at = time.strftime("%H:%M:%S", time.localtime(time.time() + delay_ms / 1000))
            click.echo(
                f"\n… {ev.data.get('error_kind')}: retrying in {delay_ms / 1000:.1f}s", err=True
            )
            self.waiting = f"{ev.data.get('error_kind')}: retry at {at}"

    def clear(self) -> None:
        """Erase the spinner line if one is shown."""
        if self._shown:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()
            self._shown = False

    async def spin(self) -> None:
        """Animate the spinner while something is awaited (terminals only)."""
        frame = 0
        while self.spinning:
            await asyncio.sleep(0.1)
            if self.waiting is not None:
                sys.stderr.write(f"\r{self.FRAMES[frame % len(self.FRAMES)]} {self.waiting}")
                sys.stderr.flush()
                self._shown = True
                frame += 1


def _summary(session_id: str, turns: list[TurnResult]) -> dict[str, Any]:
    last = turns[-1] if turns else None
    return {
        "session_id": session_id,
        "turn_id": last.turn_id if last else None,
        "outcome": last.outcome if last else "completed",
        "text": last.final_text if last else "",
        "error": last.error if last else None,
        "usage": {
            "input_tokens": sum(t.usage.input_tokens for t in turns),
            "output_tokens": sum(t.usage.output_tokens for t in turns),
        },
        "turns": [{"turn_id": t.turn_id, "outcome": t.outcome, "steps": t.steps} for t in turns],
    }


async def _drive(
    rt: Runtime, session_id: str, prompt: str | None, renderer: _Renderer | None = None
) -> list[TurnResult]:
    loop = asyncio.get_running_loop()
    spinner = asyncio.ensure_future(renderer.spin()) if renderer is not None else None
    presses = 0

    def on_sigint() -> None:
        nonlocal presses
        presses += 1
        if presses > 1:
            os._exit(130)
        rt.coordinator.interrupt(session_id)

    loop.add_signal_handler(signal.SIGINT, on_sigint)  # POSIX only, like the runtime itself
    try:
        if prompt is not None:
            rt.send(prompt, session_id=session_id, resume=False)
        return await rt.resume(session_id)
    finally:
        if spinner is not None and renderer is not None:
            spinner.cancel()
            await asyncio.gather(spinner, return_exceptions=True)
            renderer.clear()
        loop.remove_signal_handler(signal.SIGINT)
        await rt.aclose()


def _target_session(rt: Runtime, session: str | None, cont: bool, fork: bool) -> str:
    from ..store import new_session_id

    if fork and not session:
        raise UsageError("--fork needs --session ID")
    if session and cont:
        raise UsageError("use either --continue or --session, not both")
    if cont:
        row = rt.store.latest_session(str(rt.workspace))
        if row is None:
            raise UsageError("--continue: no session in this workspace yet")
        return row.id
    if session:
        rt.store.get_session(session)
        if fork:
            return rt.store.fork(session).id
        return session
    return new_session_id()


@click.command()
@click.argument("prompt", required=False)
@click.option("--continue", "cont", is_flag=True, help="Continue the most recent session here.")
@click.option("--session", "session", metavar="ID", help="Continue this session.")
@click.option("--fork", is_flag=True, help="With --session: fork it and continue the fork.")
@click.option("--agent", metavar="NAME", help="Agent profile (build, plan, or configured).")
@click.option(
    "--model", metavar="SPEC", help="Model spec, e.g. anthropic:claude-sonnet-4-5, local."
)
@format_option("text", "json", "jsonl")
@db_option
def run(prompt: str | None, cont: bool, session: str | None, fork: bool, agent: str | None,
        model: str | None, fmt: str, db: str | None) -> None:  # fmt: skip
    """Admit PROMPT durably and drive the session to the end of its work."""
    renderer = _Renderer(fmt)
    rt = Runtime(db, model=model, agent=agent, listener=renderer)
    sid = _target_session(rt, session, cont, fork)
    renderer.session_id = sid
    if prompt is None and rt.store.find_session(sid) is None:
        raise UsageError(
            "nothing to run: give a PROMPT, or --session/--continue with pending input"
        )
    turns = asyncio.run(_drive(rt, sid, prompt, renderer))
    summary = _summary(sid, turns)
    if fmt == "json":
        print_json(summary)
    elif fmt == "jsonl":
        print_jsonl({"session_id": sid, "kind": "summary", "data": summary})
    else:
        if summary["text"] and not summary["text"].endswith("\n"):
            click.echo()
        if summary["outcome"] != "completed":
            click.echo(f"[{summary['outcome']}] {summary['error'] or ''}".rstrip(), err=True)
    sys.exit(EXIT_CODES[summary["outcome"]])


@click.command()
@click.argument("prompt")
@click.option("--session", "session", metavar="ID", required=True, help="Target session.")
@click.option("--queue", is_flag=True, help="Deliver at an idle boundary instead of steering.")
@click.option("--no-wake", is_flag=True, help="Only record the input; do not drive the session.")
@click.option("--input-id", metavar="ID", help="Idempotency key: resending it is a no-op.")
@format_option("text", "json")
@db_option
def send(prompt: str, session: str, queue: bool, no_wake: bool, input_id: str | None,
         fmt: str, db: str | None) -> None:  # fmt: skip
    """Admit PROMPT into a session another process may be driving; print its input id."""
    if _is_server(db):
        with _client(db) as client:
            out = client.prompt(session, prompt, input_id=input_id,
                                delivery="queue" if queue else "steer", resume=not no_wake)  # fmt: skip
        if fmt == "json":
            print_json(
                {"session_id": session, "input_id": out["input_id"], "created": out["created"]}
            )
        else:
            click.echo(out["input_id"])
        return
    rt = Runtime(db)
    rt.store.get_session(session)
    sent = rt.send(prompt, session_id=session, input_id=input_id,
                   delivery="queue" if queue else "steer", resume=False)  # fmt: skip
    driven: list[TurnResult] = []
    if not no_wake:
        driven = asyncio.run(_wake_if_idle(rt, session))
    else:
        rt.store.close()
    if fmt == "json":
        print_json({"session_id": session, "input_id": sent.input_id, "created": sent.created,
                    "driven_turns": len(driven)})  # fmt: skip
    else:
        click.echo(sent.input_id)


async def _wake_if_idle(rt: Runtime, session_id: str) -> list[TurnResult]:
    """Drive the session unless a live driver holds it (then it promotes the input itself)."""
    try:
        return await rt.resume(session_id)
    finally:
        await rt.aclose()


@click.command()
@click.option("--session", "session", metavar="ID", required=True, help="Session to interrupt.")
@db_option
def interrupt(session: str, db: str | None) -> None:
    """Hard-interrupt the session's current turn, in whichever process drives it."""
    if _is_server(db):
        with _client(db) as client:
            client.interrupt(session)
        click.echo(f"interrupt requested for {session}")
        return
    rt = Runtime(db)
    try:
        rt.interrupt(session)
    finally:
        rt.store.close()
    click.echo(f"interrupt requested for {session}")


@click.command()
@click.option("--once", is_flag=True, help="Exit when no session has work left.")
@click.option("--concurrency", default=8, show_default=True, type=click.IntRange(min=1))
@format_option("text", "json")
@db_option
def worker(once: bool, concurrency: int, fmt: str, db: str | None) -> None:
    """Drive every session with pending work or an orphaned claim (SIGTERM: clean shutdown)."""
    from ..execution import run_worker

    async def main() -> None:
        rt = Runtime(db)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        try:
            stats = await run_worker(rt, once=once, concurrency=concurrency, stop=stop)
        finally:
            await rt.aclose()
        if fmt == "json":
            print_json({"drains": stats.drains, "turns": stats.turns, "busy": stats.busy,
                        "claims_lost": stats.lost, "taken_over": stats.taken_over})  # fmt: skip
        else:
            click.echo(f"worker done: {stats.turns} turns in {stats.drains} drains", err=True)

    asyncio.run(main())
