"""`wakeful chat`: an interactive session over the runtime.

Nothing is written until the first model-bound submission (lazy materialization): the chat holds
a prepared session id only. Typing while the agent works sends a steer; `/queue TEXT` queues;
Ctrl-C interrupts the running turn (and exits when nothing runs). Works over a plain pipe too.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Awaitable, Callable

import click

from ..execution import Runtime
from ..runner import LiveEvent
from ..store import new_session_id
from ._common import db_option

HELP = (
    "/new  another session   /fork  fork this one   /sessions  list   /compact  compact now\n"
    "/queue TEXT  deliver after the turn   /quit  leave   (text while working = steer)"
)


class Chat:
    """The chat's state: the runtime and the current (maybe only prepared) session."""

    def __init__(self, rt: Runtime, out: Callable[[str], None]) -> None:
        self.rt = rt
        self.out = out
        self.sid = new_session_id()

    def busy(self) -> bool:
        """Whether this process is driving the current session."""
        return self.sid in self.rt.coordinator.active()

    def materialized(self) -> bool:
        """Whether the current session exists in the store."""
        return self.rt.store.find_session(self.sid) is not None

    def handle(self, line: str) -> bool:
        """Act on one input line; return False to leave."""
        text = line.strip()
        if not text:
            return True
        command, _, rest = text.partition(" ")
        if not command.startswith("/"):
            self.rt.send(text, session_id=self.sid)
            return True
        actions: dict[str, Callable[[str], bool | None]] = {
            "/quit": lambda _r: False, "/exit": lambda _r: False, "/help": lambda _r: self.out(HELP),
            "/new": self._new, "/fork": self._fork, "/sessions": self._sessions,
            "/compact": self._compact, "/queue": self._queue,
        }  # fmt: skip
        action = actions.get(command)
        if action is None:
            self.out(f"unknown command {command}; /help lists them")
            return True
        return action(rest) is not False

    def _new(self, _rest: str) -> None:
        self.sid = new_session_id()
        self.out(f"new session {self.sid} (nothing stored until you send something)")

    def _fork(self, _rest: str) -> None:
        if not self.materialized():
            self.out("nothing to fork yet")
            return
        self.sid = self.rt.store.fork(self.sid).id
        self.out(f"forked into {self.sid}")

    def _sessions(self, _rest: str) -> None:
        for row in self.rt.store.list_sessions(limit=20).sessions:
            mark = "*" if row.id == self.sid else " "
            self.out(f"{mark} {row.id}  {row.status:<9} {(row.title or '')[:50]}")

    def _compact(self, _rest: str) -> None:
        if not self.materialized():
            self.out("nothing to compact yet")
            return
        self.rt.send(session_id=self.sid, kind="compaction", payload={"reason": "manual"})
        self.out("compaction requested")

    def _queue(self, rest: str) -> None:
        if not rest.strip():
            self.out("usage: /queue TEXT")
            return
        self.rt.send(rest, session_id=self.sid, delivery="queue")


def _printer(ev: LiveEvent) -> None:
    if ev.kind == "text":
        sys.stdout.write(str(ev.data.get("text", "")))
        sys.stdout.flush()
    elif ev.kind == "tool_start":
        sys.stdout.write(f"\n→ {ev.data.get('name')}\n")
    elif ev.kind == "turn_end":
        outcome = ev.data.get("outcome")
        sys.stdout.write("\n" if outcome == "completed" else f"\n[{outcome}]\n")
        sys.stdout.flush()


async def _pipe_lines() -> Callable[[], Awaitable[str | None]]:
    loop = asyncio.get_running_loop()

    async def read() -> str | None:
        line = await loop.run_in_executor(None, sys.stdin.readline)
        return line if line else None

    return read


async def _tty_lines() -> Callable[[], Awaitable[str | None]]:
    from prompt_toolkit import PromptSession

    session: PromptSession[str] = PromptSession()

    async def read() -> str | None:
        try:
            return await session.prompt_async("› ")
        except EOFError:
            return None

    return read


async def _loop(chat: Chat, tty: bool) -> None:
    read = await (_tty_lines() if tty else _pipe_lines())
    while True:
        try:
            line = await read()
        except KeyboardInterrupt:
            if chat.busy():
                chat.rt.interrupt(chat.sid)
                continue
            break
        if line is None or not chat.handle(line):
            break
    await chat.rt.coordinator.wait_idle()


@click.command()
@click.option("--agent", metavar="NAME", help="Agent profile.")
@click.option("--model", metavar="SPEC", help="Model spec.")
@db_option
def chat(agent: str | None, model: str | None, db: str | None) -> None:
    """An interactive session (steer while it works; /help for commands)."""
    rt = Runtime(db, model=model, agent=agent, listener=_printer)
    tty = sys.stdin.isatty() and sys.stdout.isatty()

    async def main() -> None:
        chat_ = Chat(rt, click.echo)
        if tty:
            from prompt_toolkit.patch_stdout import patch_stdout

            click.echo(HELP)
            with patch_stdout():
                await _loop(chat_, tty)
        else:
            await _loop(chat_, tty)
        await rt.aclose()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())
