"""`wakeful approve`: list the calls a session waits on, or decide one and drive the session;
and the inline question `run` and `chat` ask on a terminal."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import threading
from pathlib import Path
from typing import Any

import click

from ..events import ApprovalRequested, Decision
from ..execution import Runtime, off_loop
from ..runner import AskResult, TurnResult, preview
from ._common import EXIT_CODES, db_option, format_option, print_json, printable
from ._grammar import session_first

ANSWERS: dict[str, Decision] = {
    "y": "allow",
    "yes": "allow",
    "a": "always",
    "always": "always",
    "n": "deny",
    "no": "deny",
}


def approve_hint(session_id: str, requests: list[ApprovalRequested]) -> str:
    """The lines `run` prints on stderr when its turn pauses for approval."""
    lines = [f"[awaiting approval] session {session_id} waits for a decision on:"]
    for r in requests:
        lines.append(f"  {r.call_id}  {printable(r.name)}")
        lines += [f"    {printable(line)}" for line in r.preview.splitlines()[:40]]
    call = requests[0].call_id if len(requests) == 1 else "CALL"
    lines.append(f"run: wakeful approve {session_id} {call}   (or --deny, --always)")
    return "\n".join(lines)


def _request_json(r: ApprovalRequested) -> dict[str, Any]:
    return {"call_id": r.call_id, "name": r.name, "input": r.input, "preview": r.preview}


def terminal_ask(workspace: Path, before: Any = None) -> Any:
    """An approval callback that asks on this terminal: the command or diff, then
    `y` (once), `a` (always, for this session) or `n` (deny). `before()` runs first (it clears
    a spinner). End of input, like Ctrl-C (an interrupt), answers nothing: the call stays
    waiting for `wakeful approve`. The answer is read by a daemon thread, so a question that
    an interrupt cancels never holds the process."""

    async def ask(name: str, args: dict[str, object]) -> AskResult:
        if before is not None:
            before()
        shown = preview(name, args, workspace)  # type: ignore[arg-type]  # a tool call's args are JSON
        click.echo(f"\n? {printable(name)} wants to run:", err=True)
        for line in shown.splitlines():
            click.echo(f"  {printable(line)}", err=True)
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[Decision | None] = loop.create_future()

        def settle(decision: Decision | None) -> None:
            if not answer.done():
                answer.set_result(decision)

        def question() -> None:
            while True:
                click.echo(
                    "allow? [y] once, [a] always this session, [n] deny: ", err=True, nl=False
                )
                line = sys.stdin.readline()
                decision = ANSWERS.get(line.strip().lower())
                if decision is not None or not line:  # an answer, or end of input (none)
                    with contextlib.suppress(RuntimeError):  # the loop ended meanwhile
                        loop.call_soon_threadsafe(settle, decision)
                    return

        threading.Thread(target=question, name="wakeful-approval", daemon=True).start()
        return await answer

    return ask


@click.command()
@session_first("call", required=0)
@click.option("--deny", is_flag=True, help="Deny the call: the model gets an error result.")
@click.option("--always", is_flag=True, help="Allow it and this tool for the rest of the session.")
@click.option(
    "--budget",
    metavar="AMOUNT",
    help="Raise SESSION's budget (+5usd, +20000tokens; 5usd: the new limit) and "
    "continue the turn it paused.",
)
@click.option("--no-wake", is_flag=True, help="Only record the decision; do not drive the session.")
@format_option("text", "json")
@db_option
def approve(
    session: str,
    call: str | None,
    deny: bool,
    always: bool,
    budget: str | None,
    no_wake: bool,
    fmt: str,
    db: str | None,
) -> None:
    """Decide on CALL, a call SESSION waits on (allow once by default), then drive the session:
    the call runs once, or the model is told it was denied. Without CALL, list what waits.
    With --budget, raise the session's budget instead (docs/spend.md)."""
    from ..errors import UsageError

    if deny and always:
        raise UsageError("use either --deny or --always, not both")
    if budget is not None and (call is not None or deny or always):
        raise UsageError("--budget raises a budget: give no CALL, --deny or --always with it")
    decision = "deny" if deny else "always" if always else "allow"
    if db and str(db).startswith(("http://", "https://")):
        if budget is not None:
            _remote_budget(str(db), session, budget, fmt)
            return
        _remote(str(db), session, call, decision, fmt)
        return
    from ._render import Renderer

    renderer = Renderer(fmt if fmt == "text" else "none")
    rt = Runtime(db, listener=renderer)
    try:
        session = rt.reads.resolve_session_id(session)  # a unique prefix will do
    except BaseException:
        rt.close()
        raise
    renderer.session_id = session
    if budget is not None:
        _budget(rt, renderer, session, budget, no_wake, fmt)
        return
    if call is None:
        try:
            _list(session, rt.approvals(session), fmt)
        finally:
            rt.close()
        return
    _decide(rt, renderer, session, call, decision, no_wake, fmt)


def _decide(
    rt: Runtime, renderer: Any, session: str, call: str, decision: str, no_wake: bool, fmt: str
) -> None:
    """Record the decision on `call`; unless `no_wake`, drive the session and exit as `run`
    does."""
    from ._render import run_summary

    sent = rt.approve(session, call, decision, resume=False)
    if no_wake:
        rt.close()
        if fmt == "json":
            print_json({"session_id": session, "input_id": sent.input_id, "decision": decision})
        else:
            click.echo(f"{decision}: recorded as {sent.input_id}")
        return
    turns, mine = asyncio.run(_drive(rt, session, sent.input_id))
    summary = run_summary(session, turns, mine) | {"decision": decision}
    if fmt == "json":
        print_json(summary)
    else:
        renderer.end_line()  # what streamed ends its line before the lines on stderr
        if summary["outcome"] != "completed":
            click.echo(f"[{summary['outcome']}] {printable(summary['error'] or '')}", err=True)
    sys.exit(EXIT_CODES[summary["outcome"]])


def _budget(rt: Runtime, renderer: Any, session: str, amount: str, no_wake: bool, fmt: str) -> None:
    """Record the raise; when the session paused for its budget, continue it (unless
    `no_wake`) and exit as `run` does."""
    from ..execution import raise_budget
    from ._render import run_summary

    try:
        raised, sent = raise_budget(rt, session, amount, resume=False)
    except BaseException:
        rt.close()
        raise
    out: dict[str, Any] = {"session_id": session, "budget": raised.model_dump(exclude={"v"})}
    if sent is None or no_wake:
        rt.close()
        out["input_id"] = None if sent is None else sent.input_id
        if fmt == "json":
            print_json(out)
        else:
            click.echo(
                f"budget raised ({amount}) for {session}"
                + ("" if sent is None else f"; continue recorded as {sent.input_id}")
            )
        return
    turns, mine = asyncio.run(_drive(rt, session, sent.input_id))
    summary = run_summary(session, turns, mine) | {"budget": out["budget"]}
    if fmt == "json":
        print_json(summary)
    else:
        renderer.end_line()
        if summary["outcome"] != "completed":
            click.echo(f"[{summary['outcome']}] {printable(summary['error'] or '')}", err=True)
    sys.exit(EXIT_CODES[summary["outcome"]])


def _remote_budget(url: str, session: str, amount: str, fmt: str) -> None:
    from ..client import Client

    with Client(url) as client:
        out = client.raise_budget(session, amount)
    if fmt == "json":
        print_json(out)
    else:
        click.echo(
            f"budget raised ({amount}) for {session}"
            + ("" if out["input_id"] is None else f"; continue sent as {out['input_id']}")
        )


async def _drive(rt: Runtime, session: str, input_id: str) -> tuple[list[TurnResult], Any]:
    try:
        turns = await rt.drive_input(session, input_id)
        mine = await off_loop(rt.input_outcome, session, input_id)
        return turns, next((t for t in turns if mine and t.turn_id == mine.turn_id), mine)
    finally:
        await rt.aclose()


def _list(session: str, requests: list[ApprovalRequested], fmt: str) -> None:
    if fmt == "json":
        print_json({"session_id": session, "approvals": [_request_json(r) for r in requests]})
        return
    if not requests:
        click.echo(f"nothing awaits approval in {session}")
        return
    for r in requests:
        click.echo(f"{r.call_id}  {printable(r.name)}")
        for line in r.preview.splitlines():
            click.echo(f"    {printable(line)}")


def _remote(url: str, session: str, call: str | None, decision: str, fmt: str) -> None:
    from ..client import Client

    with Client(url) as client:
        if call is None:
            listed = client.approvals(session)
            if fmt == "json":
                print_json({"session_id": session, "approvals": listed})
            elif not listed:
                click.echo(f"nothing awaits approval in {session}")
            for r in listed if fmt != "json" else []:
                click.echo(f"{r['call_id']}  {printable(r['name'])}")
                for line in str(r["preview"]).splitlines():
                    click.echo(f"    {printable(line)}")
            return
        out = client.approve(session, call, decision)
    if fmt == "json":
        print_json(out)
    else:
        click.echo(f"{decision}: recorded as {out['input_id']}")
