"""`wakeful run`, `send`, `interrupt`: admit input durably and drive it."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from .._defaults import WORKER_CONCURRENCY
from ..errors import LocationUnavailableError, UsageError, WakefulError
from ..events import ApprovalRequested
from ..execution import Runtime, off_loop
from ..runner import TurnResult
from ._approve import approve_hint, terminal_ask
from ._common import (
    EXIT_CODES,
    ID,
    TRUNCATED_NOTE,
    checked_config,
    db_option,
    format_option,
    max_output_option,
    no_default_store,
    print_json,
    print_jsonl,
    printable,
    require_store,
)
from ._grammar import session_first
from ._render import STOPPING, Renderer, run_summary
from ._sigterm import release

if TYPE_CHECKING:
    from ..execution import WorkerStats


def _is_server(db: str | None) -> bool:
    return bool(db) and str(db).startswith(("http://", "https://"))


def _client(db: str | None) -> Any:
    """A client of the `wakeful serve` at `db` (token: `$WAKEFUL_SERVER_TOKEN`)."""
    from ..client import Client

    return Client(str(db))


async def _drive(
    rt: Runtime, session_id: str, prompt: str | None, renderer: Renderer | None = None
) -> tuple[list[TurnResult], TurnResult | None]:
    """Admit `prompt` (if any) and drive the session; with a prompt, until its turn ended, here
    or in another process that holds the session. Ctrl-C interrupts a local turn; while only
    waiting on another process it stops waiting (the input stays admitted); a second one exits.
    Returns the turns run here and the turn that took the prompt (None without a prompt)."""
    loop = asyncio.get_running_loop()
    spinner = asyncio.ensure_future(renderer.spin()) if renderer is not None else None
    presses = 0
    work: asyncio.Future[list[TurnResult]] | None = None

    def on_sigint() -> None:
        nonlocal presses
        presses += 1
        if presses > 1:
            os._exit(130)
        try:
            local = rt.stop_local(session_id)
        except WakefulError:  # no session yet, or the store failed: nothing runs here
            local = False
        if local:  # the turn is stopping: say so until it has (a second Ctrl-C exits)
            if renderer is not None:
                renderer.stopping()
            else:
                click.echo(f"⏹ {STOPPING} (Ctrl-C again quits at once)", err=True)
        if not local and work is not None:
            work.cancel()

    loop.add_signal_handler(signal.SIGINT, on_sigint)  # POSIX only, like the runtime itself
    try:
        input_id = None
        if prompt is None:
            work = asyncio.ensure_future(rt.resume(session_id))
        else:
            sent = await off_loop(rt.send, prompt, session_id=session_id, resume=False)
            input_id = sent.input_id
            work = asyncio.ensure_future(rt.drive_input(session_id, input_id))
        try:
            turns = await work
        except asyncio.CancelledError:
            if not work.cancelled():
                raise
            raise click.exceptions.Abort from None
        if input_id is None:
            return turns, None
        mine = await off_loop(rt.input_outcome, session_id, input_id)
        return turns, next((t for t in turns if mine and t.turn_id == mine.turn_id), mine)
    finally:
        if spinner is not None and renderer is not None:
            spinner.cancel()
            await asyncio.gather(spinner, return_exceptions=True)
            renderer.clear()
        loop.remove_signal_handler(signal.SIGINT)
        await rt.aclose()


def _target_session(rt: Runtime, session: str | None, cont: bool, fork: bool) -> str:
    from ..store import new_session_id

    if fork and not (session or cont):
        raise UsageError("--fork needs a SESSION or --continue")
    if session and cont:
        raise UsageError("use either --continue or a SESSION, not both")
    if cont:
        row = rt.reads.latest_session(str(rt.workspace))
        if row is None:
            raise UsageError("--continue: no session in this workspace yet")
        session = row.id
    if session:
        session = rt.reads.resolve_session_id(session)
        rt.place(rt.reads.get_session(session).location)  # its location must be on this host
        if fork:
            return rt.fork(session).id
        return session
    return new_session_id()


@click.command()
@session_first("prompt", required=0, session_required=False, lone_is_rest=True)
@click.option("--continue", "cont", is_flag=True, help="Continue the most recent session here.")
@click.option(
    "--fork", is_flag=True, help="With SESSION or --continue: fork it, continue the fork."
)
@click.option(
    "--agent", metavar="NAME", type=ID, help="Agent profile (build, plan, or configured)."
)
@click.option(
    "--model",
    metavar="SPEC",
    type=ID,
    help="Model spec, e.g. anthropic:claude-sonnet-4-5, local.",
)
@max_output_option
@format_option("text", "json", "jsonl")
@db_option
def run(
    prompt: str | None,
    cont: bool,
    session: str | None,
    fork: bool,
    agent: str | None,
    model: str | None,
    max_output_tokens: int | None,
    fmt: str,
    db: str | None,
) -> None:
    """Admit PROMPT durably and drive the session to the end of its work: a new session, or
    SESSION (`run SESSION PROMPT`; a lone argument is the prompt), or with --continue the
    latest here. Without PROMPT, drive what SESSION has pending (`--session S`)."""
    renderer = Renderer(fmt)
    ask = None
    if fmt == "text" and sys.stdin.isatty() and sys.stderr.isatty():  # someone can answer
        ask = terminal_ask(Path.cwd().resolve(), renderer.pause)
    # A new session's model (or a --model given) is checked before the store is opened.
    config = checked_config(model) if model is not None or not (session or cont) else None
    rt = Runtime(
        db,
        model=model,
        agent=agent,
        listener=renderer,
        config=config,
        max_output_tokens=max_output_tokens,
        ask=ask,
    )
    sid = _target_session(rt, session, cont, fork)
    if rt.reads.find_session(sid) is not None:  # an existing session (or the fork) takes them
        rt.set_identity(sid, agent=agent, model=model)
    renderer.session_id = sid
    if prompt is None and rt.reads.find_session(sid) is None:
        raise UsageError(
            "nothing to run: give a PROMPT, or a SESSION (--session) or --continue with pending input"
        )
    origin = rt.reads.find_session(sid)
    forked = f" (fork of {origin.forked_from})" if origin and origin.forked_from else ""
    if ask is not None and origin is not None:
        _decide_waiting(rt, sid, ask)  # a session paused earlier: someone is here to decide now
    turns, mine = asyncio.run(_drive(rt, sid, prompt, renderer))
    summary = run_summary(sid, turns, mine)
    waiting = _approvals(db, sid, summary, held=prompt is not None and mine is None)
    _report_run(sid, forked, summary, waiting, renderer, fmt)


def _approvals(
    db: str | None, sid: str, summary: dict[str, Any], held: bool
) -> list[ApprovalRequested]:
    """The calls the run's session waits on, also listed in `summary`; `held`: the prompt was
    not delivered (the session awaits approval), which `summary` then says."""
    waiting = _waiting(db, sid) if summary["error_kind"] == "awaiting_approval" or held else []
    if held and waiting:
        summary |= {
            "turn_id": None,
            "outcome": "paused",
            "error_kind": "awaiting_approval",
            "text": "",
            "error": "the session awaits approval; the prompt waits in its "
            "inbox until the calls are decided",
        }
    if waiting:
        summary["approvals"] = [
            {"call_id": r.call_id, "name": r.name, "input": r.input, "preview": r.preview}
            for r in waiting
        ]
    return waiting


def _report_run(
    sid: str,
    forked: str,
    summary: dict[str, Any],
    waiting: list[ApprovalRequested],
    renderer: Renderer,
    fmt: str,
) -> None:
    """What `run` prints at its end (the summary; in text, what to do next on stderr), then
    exit with the outcome's status."""
    if fmt == "json":
        print_json(summary)
    elif fmt == "jsonl":
        print_jsonl({"session_id": sid, "kind": "summary", "data": summary})
    else:
        renderer.end_line()  # what streamed ends its line before the lines on stderr
        if waiting:
            click.echo(approve_hint(sid, waiting), err=True)
        elif summary["outcome"] != "completed":
            error = printable(summary["error"], lines=True)
            click.echo(f"[{summary['outcome']}] {error}".rstrip(), err=True)
        elif summary["truncated"]:
            click.echo(TRUNCATED_NOTE, err=True)
        click.echo(f"session {sid}{forked}", err=True)  # to resume or inspect it
    sys.exit(EXIT_CODES[summary["outcome"]])


def _decide_waiting(rt: Runtime, session_id: str, ask: Any) -> None:
    """Ask on this terminal about each call the session waits on and admit the decisions."""
    for request in rt.approvals(session_id):
        decision = asyncio.run(ask(request.name, dict(request.input)))
        if decision is None:  # end of input: the calls stay waiting
            return
        rt.approve(session_id, request.call_id, _decision(decision), resume=False)


def _decision(answer: object) -> str:
    """An interactive answer as a decision (anything unclear denies)."""
    if answer is True:
        return "allow"
    return str(answer) if answer in ("allow", "always") else "deny"


def _waiting(db: str | None, session_id: str) -> list[ApprovalRequested]:
    """The calls the session waits on (read after the run closed its runtime)."""
    from ..execution import pending_approvals
    from ..store import open_store

    store = open_store(db)
    try:
        return pending_approvals(store, session_id)
    finally:
        store.close()


@click.command()
@session_first("prompt")
@click.option("--queue", is_flag=True, help="Deliver at an idle boundary instead of steering.")
@click.option("--no-wake", is_flag=True, help="Only record the input; do not drive the session.")
@click.option("--input-id", metavar="ID", type=ID, help="Idempotency key: resending it is a no-op.")
@format_option("text", "json")
@db_option
def send(
    session: str,
    prompt: str,
    queue: bool,
    no_wake: bool,
    input_id: str | None,
    fmt: str,
    db: str | None,
) -> None:
    """Admit PROMPT into SESSION, which another process may be driving; print its input id."""
    if _is_server(db):
        _send_remote(str(db), session, prompt, queue, no_wake, input_id, fmt)
        return
    require_store(db)
    rt = Runtime(db)
    session = rt.reads.resolve_session_id(session)
    sent = rt.send(
        prompt,
        session_id=session,
        input_id=input_id,
        delivery="queue" if queue else "steer",
        resume=False,
    )
    driven: list[TurnResult] = []
    waiting = None
    try:
        rt.place(rt.reads.get_session(session).location)
    except LocationUnavailableError as err:  # it runs where it lives: a worker there takes it
        waiting = err.location
    if not no_wake and waiting is None:
        driven = asyncio.run(_wake_if_idle(rt, session))
    else:
        if waiting is not None:
            rt.note_waiting(session, waiting)
        rt.close()
    if fmt == "json":
        print_json(
            {
                "session_id": session,
                "input_id": sent.input_id,
                "created": sent.created,
                "message_id": sent.message_id,
                "driven_turns": len(driven),
                "waiting_for": waiting,
            }
        )
    else:
        click.echo(sent.input_id)
    if waiting is not None:
        click.echo(
            f"the session lives at {printable(waiting)}, which is not a directory on this "
            "host: the input waits for a worker there",
            err=True,
        )


def _send_remote(
    url: str, session: str, prompt: str, queue: bool, no_wake: bool, input_id: str | None, fmt: str
) -> None:
    """`send` to a server's session: the server admits the input (and, unless `no_wake`,
    drives the session)."""
    with _client(url) as client:
        out = client.prompt(
            session,
            prompt,
            input_id=input_id,
            delivery="queue" if queue else "steer",
            resume=not no_wake,
        )
    if fmt == "json":
        print_json(
            {
                "session_id": out["session_id"],
                "input_id": out["input_id"],
                "created": out["created"],
                "message_id": out.get("message_id"),
            }
        )
    else:
        click.echo(out["input_id"])


async def _wake_if_idle(rt: Runtime, session_id: str) -> list[TurnResult]:
    """Drive the session unless a live driver holds it (then it promotes the input itself)."""
    try:
        return await rt.resume(session_id)
    finally:
        await rt.aclose()


@click.command()
@session_first()
@db_option
def interrupt(session: str, db: str | None) -> None:
    """Hard-interrupt SESSION's current turn, in whichever process drives it.

    On an idle session nothing is written; it says so and exits 0.
    """
    if _is_server(db):
        with _client(db) as client:
            out = client.interrupt(session)
        if out.get("requested"):
            click.echo(f"interrupt requested for {session}")
        else:
            click.echo(f"session {session} is idle: nothing to interrupt (nothing written)")
        return
    require_store(db)
    rt = Runtime(db)
    try:
        session = rt.reads.resolve_session_id(session)
        busy = rt.busy(session)
        if busy:
            rt.interrupt(session)
    finally:
        rt.close()
    if busy:
        click.echo(f"interrupt requested for {session}")
    else:
        click.echo(f"session {session} is idle: nothing to interrupt (nothing written)")


def _served(locations: tuple[str, ...]) -> list[str] | None:
    """`worker --location`'s directories, absolute; None (every location) when none is given.
    `UsageError` for one that is not a directory."""
    from pathlib import Path

    if not locations:
        return None
    served = []
    for raw in locations:
        path = Path(raw).expanduser().resolve()
        if not path.is_dir():
            raise UsageError(f"--location {raw}: no such directory")
        served.append(str(path))
    return served


@click.command()
@click.option("--once", is_flag=True, help="Exit when no session has work left.")
@click.option(
    "--concurrency",
    default=WORKER_CONCURRENCY,
    show_default=True,
    type=click.IntRange(min=1),
    help="Sessions driven at once (most of a drain's time is a wait on its model).",
)
@click.option(
    "--location",
    "locations",
    multiple=True,
    metavar="PATH",
    help="Serve only sessions living here (repeatable; default: every location on this host).",
)
@format_option("text", "json")
@db_option
def worker(
    once: bool, concurrency: int, locations: tuple[str, ...], fmt: str, db: str | None
) -> None:
    """Drive every session with pending work or an orphaned claim (SIGTERM: clean shutdown).

    Each session runs at its own location. Sessions whose location this worker does not serve
    are left pending and shown as waiting for it (`session list/show`). A busy or lost store
    is waited out. With --once, the exit status is 1 when a session's drain failed and its
    work was left undone (the warnings above say why), else 3 when a turn ended blocked (e.g.
    the session's model can no longer be built).
    """
    from ..execution import WorkerStats, run_worker

    if once and no_default_store(db):  # before the first run nothing has work: none is made
        click.echo("worker done: no store yet, so no session has work (nothing written)", err=True)
        return

    served = _served(locations)

    async def main() -> WorkerStats:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        release()  # a SIGTERM sent while this worker started stops it now, as a running one
        rt = await _open_patiently(db, stop)
        if rt is None:  # stopped while the store could not be opened
            return WorkerStats()
        try:
            return await run_worker(
                rt, once=once, concurrency=concurrency, stop=stop, locations=served
            )
        finally:
            await rt.aclose()

    _report_worker(asyncio.run(main()), once, fmt)


async def _open_patiently(db: str | None, stop: asyncio.Event) -> Runtime | None:
    """The worker's `Runtime` on `db`, a transient store fault while opening it (another
    writer holding the store past the busy timeout, a connection the server ended) waited out
    as a running worker waits one out (`Outage`: paced, logged when it begins and ends); None
    when `stop` is set first. Anything else raises: an unreachable server or a bad URL is the
    user's to fix, not a fault to wait for."""
    import logging

    from ..store import Outage, is_transient

    outage = Outage(logging.getLogger("wakeful.worker"), "opening the store")
    while not stop.is_set():
        try:
            rt = Runtime(db)
        except WakefulError as err:
            if not is_transient(err):
                raise
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), outage.failed(err))
            continue
        outage.ok()
        return rt
    return None


def _report_worker(stats: WorkerStats, once: bool, fmt: str) -> None:
    """What `worker` prints when it stops; with `once`, exit 1 for a failed drain, else 3 for
    a blocked turn."""
    if fmt == "json":
        print_json(
            {
                "drains": stats.drains,
                "turns": stats.turns,
                "busy": stats.busy,
                "claims_lost": stats.lost,
                "taken_over": stats.taken_over,
                "reserved": stats.reserved,
                "unused": stats.unused,
                "failed": sorted(stats.failed),
                "waiting": stats.waiting,
                "blocked": sorted(stats.blocked),
            }
        )
    else:
        click.echo(f"worker done: {stats.turns} turns in {stats.drains} drains", err=True)
        for where in sorted(set(stats.waiting.values())):
            count = sum(1 for w in stats.waiting.values() if w == where)
            click.echo(f"{count} sessions wait for their location {printable(where)}", err=True)
    if once and stats.failed:
        click.echo(
            f"error: {len(stats.failed)} sessions were left with work, their drains failed "
            f"(see above): {', '.join(sorted(stats.failed))}",
            err=True,
        )
        sys.exit(EXIT_CODES["failed"])
    if once and stats.blocked:
        click.echo(
            f"error: {len(stats.blocked)} sessions had a turn blocked (`wakeful log` says why): "
            f"{', '.join(sorted(stats.blocked))}",
            err=True,
        )
        sys.exit(EXIT_CODES["blocked"])
