"""`wakeful chat`: an interactive session over the runtime.

Nothing is written until the first model-bound submission (lazy materialization): a new chat
holds a prepared session id only. `--session ID` or `--continue` resumes a stored session, and so
does `/resume` (a picker over recent sessions, or a search). Typing while the agent works sends a
steer; `/queue TEXT` queues. Ctrl-C interrupts the running turn; a second Ctrl-C, or Ctrl-D on an
empty line, leaves; Ctrl-C with text typed clears it. `/quit` while a turn runs asks first. On
leaving, the session id is printed. A call whose permission is `ask` is asked about inline (the
command or diff, then y once, a always for this session, n deny); `/approve`, `/always` and
`/deny` decide on one a session paused for earlier. Works over a plain pipe too (see `_chat_view`).
"""

from __future__ import annotations

import asyncio
import signal
import sys
import time
from collections.abc import Awaitable, Callable

import click
from prompt_toolkit.utils import is_dumb_terminal

from ..errors import UsageError, WakefulError
from ..events import Decision, Delivery
from ..execution import Runtime, off_loop
from ..messages import speaker
from ..runner import AskResult, LiveEvent, preview, resolve_agent
from ..store import SessionRow, new_session_id
from ._approve import ANSWERS
from ._chat_view import PipeView, TtyView, View
from ._common import checked_config, db_option, max_output_option
from ._grammar import session_first
from ._run import _target_session

HELP = (
    "Enter sends · Alt-Enter or a trailing \\ adds a line · typing while it works steers\n"
    "/resume [ID|WORDS]  pick a session   /sessions  list   /new  another   /fork  fork this one\n"
    "/queue TEXT  after the turn   /compact  compact now   /help   /quit  (Ctrl-C stops a turn)\n"
    "/approve [CALL]  /always [CALL]  /deny [CALL]  decide on a call the session waits on\n"
    "/model [SPEC]  /agent [NAME]  show or switch (from the next turn)\n"
    "/mcp  list MCP servers   /mcp on NAME  /mcp off NAME  switch one (from the next turn)"
)
PICK_LIMIT = 15
SWITCHING = ("/new", "/fork", "/resume")  # commands a running turn refuses
SETTLE_S = 2.0  # how long such a command waits for a turn that is just ending


def _local(ms: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(ms / 1000))


def _plain(text: str) -> str:
    """One line without control characters (session content never drives the terminal)."""
    return "".join(c if c.isprintable() else " " for c in text)


class Chat:
    """The chat's state: the runtime, the current (maybe only prepared) session, the view."""

    def __init__(self, rt: Runtime, view: View, session_id: str | None = None) -> None:
        self.rt = rt
        self.view = view
        self.sid = session_id or new_session_id()
        self.choices: list[str] = []  # the session ids last listed, for `/resume N`
        self.picking = False  # the next line answers the picker
        self.armed = False  # the next Ctrl-C on an empty line leaves
        self.question: asyncio.Future[Decision | None] | None = None  # the next line answers it
        self.mcp_pending: dict[str, bool] = {}  # `/mcp` switches of a session not stored yet
        self.interrupting: asyncio.Task[bool] | None = None  # Ctrl-C's durable interrupt

    # -- state -------------------------------------------------------------------------------

    def busy(self) -> bool:
        """Whether this process is driving the current session."""
        return self.sid in self.rt.active()

    async def materialized(self) -> bool:
        """Whether the current session exists in the store."""
        return await off_loop(self.rt.reads.find_session, self.sid) is not None

    def listener(self, ev: LiveEvent) -> None:
        """The runtime's live events: only the current session's reach the view."""
        if ev.session_id != self.sid:
            return
        self.view.show(ev)
        if ev.kind == "turn_end" and self.armed:
            self.view.notice("press Ctrl-C again or Ctrl-D to leave")

    def ctrl_c(self, typed: bool = False) -> bool:
        """Ctrl-C: with text typed, the view clears it (and this disarms); on an empty line,
        interrupt a running turn, else arm; armed, leave (True)."""
        if typed:
            self.armed = False
            self.view.notice(None)
            return False
        if self.question is not None and not self.question.done():
            # Leaving the question leaves the call waiting (the turn pauses); nothing else stops.
            self.question.set_result(None)
            self.view.say("left waiting: /approve, /always or /deny decides it later")
            return False
        if self.armed:
            return True
        self.armed = True
        if self.busy():  # the durable request is written off the loop; the drain stops now
            self.interrupting = asyncio.ensure_future(self.rt.ainterrupt(self.sid))
            self.view.notice("interrupting… (Ctrl-C again or Ctrl-D to leave)")
        else:
            self.view.notice("press Ctrl-C again or Ctrl-D to leave")
        return False

    # -- input -------------------------------------------------------------------------------

    async def handle(self, line: str) -> bool:
        """Act on one input; return False to leave."""
        self.armed = False
        self.view.notice(None)
        text = line.strip()
        if text:
            self.view.echo(text)
        if self.question is not None and not self.question.done():
            answer = ANSWERS.get(text.lower())
            if answer is None:
                self.view.notice("answer y (once), a (always, this session) or n (deny)")
            else:
                self.question.set_result(answer)
            return True
        if self.picking:  # a number or an id answers the picker; anything else goes on as usual
            self.picking = False
            if text.isdigit() or text.startswith("ses_"):
                if not await self._pick(text):
                    self.view.say(f"no session {_plain(text)}")
                return True
        if not text:
            return True
        command, _, rest = text.partition(" ")
        if not command.startswith("/") or command == "/":
            await self._send(text)
            return True
        if command in ("/quit", "/exit"):
            return await self._may_leave()
        if command == "/compact":  # waited for: its result is printed before the next command
            await self._compact()
            return True
        actions: dict[str, Callable[[str], Awaitable[object]]] = {
            "/help": self._help,
            "/new": self._new,
            "/fork": self._fork,
            "/sessions": self._sessions,
            "/resume": self._resume,
            "/queue": self._queue,
            "/approve": lambda r: self._decide(r, "allow"),
            "/always": lambda r: self._decide(r, "always"),
            "/deny": lambda r: self._decide(r, "deny"),
            "/model": lambda r: self._switch_to("model", r),
            "/agent": lambda r: self._switch_to("agent", r),
            "/mcp": self._mcp,
        }
        action = actions.get(command)
        if action is None:
            self.view.say(f"unknown command {command}; /help lists them")
            return True
        if command in SWITCHING:
            await self._settle()
        await action(rest.strip())  # each command's store calls leave the loop (`off_loop`)
        return True

    async def _help(self, _rest: str) -> None:
        self.view.say(HELP)

    async def _settle(self) -> None:
        """Give a turn whose answer is already on screen a moment to end (its last commit) before
        a command that switches sessions, which a running turn refuses, or before Ctrl-D
        leaves (which interrupts a turn still running: the answer shown would not be kept)."""
        deadline = asyncio.get_running_loop().time() + SETTLE_S
        while self.busy() and asyncio.get_running_loop().time() < deadline:  # noqa: ASYNC110 (the coordinator has no event for a drain ending; bounded by SETTLE_S)
            await asyncio.sleep(0.02)

    async def ask(self, name: str, args: dict[str, object]) -> AskResult:
        """The runtime's approval callback: show the command or diff, and let the next line
        answer (y once, a always for this session, n deny); Ctrl-C leaves it waiting."""
        loop = asyncio.get_running_loop()
        self.question = loop.create_future()
        self.view.end_text()  # the reply's words before the call come before the question
        self.view.say(f"? {_plain(name)} wants to run:")
        for line in preview(name, args, self.rt.workspace).splitlines():  # type: ignore[arg-type]  # a tool call's args are JSON
            self.view.say(f"  {_plain(line)}")
        self.view.notice("allow? y once · a always (this session) · n deny")
        try:
            return await self.question
        finally:
            self.question = None
            self.view.notice(None)

    async def _switch_to(self, what: str, value: str) -> None:
        """`/model [SPEC]`, `/agent [NAME]`: without a value, say which one the session runs
        with; with one, switch to it from the next turn (`Runtime.switch`; a session not
        stored yet is created with it). A turn running now finishes as it began."""
        row = await off_loop(self.rt.reads.find_session, self.sid)
        current = (row.model if what == "model" else row.agent) if row is not None else None
        current = current or (self.rt.model if what == "model" else self.rt.agent_name)
        if not value:
            self.view.say(f"{what}: {_plain(current)}")
            return
        try:
            if row is not None:
                await off_loop(self.rt.switch, self.sid, **{what: value})
            elif what == "model":
                self.rt.check_model(value)
                self.rt.model = value
            else:
                resolve_agent(value, self.rt.config, list(self.rt.toolbox.registered))
                self.rt.agent_name = value
        except WakefulError as err:
            self.view.say(str(err))
            return
        later = " (from the next turn)" if self.busy() else ""
        self.view.say(f"{what}: {_plain(current)} → {_plain(value)}{later}")

    async def _send(self, text: str, delivery: Delivery = "steer") -> None:
        """Send a prompt (admitted off the loop, then its drain woken here). The first one
        stores the session: `/mcp` switches made before it are written before its drain
        starts, so its first request has them."""
        pending = self.mcp_pending if self.mcp_pending and not await self.materialized() else {}
        await off_loop(self.rt.send, text, session_id=self.sid, delivery=delivery, resume=False)
        for name, on in pending.items():
            await off_loop(self.rt.switch_mcp, self.sid, name, on)
        self.rt.wake(self.sid)
        self.mcp_pending = {}

    async def _mcp(self, rest: str) -> None:
        """`/mcp`: the MCP servers configured here, on or off in this session; `/mcp on|off
        NAME` switches one from the next turn (`Runtime.switch_mcp`: durable, its tools stay
        in the request so the provider's cached prefix holds; `execution/_mcp_switch.py`). A
        session not stored yet keeps the switch until its first prompt stores it."""
        how, _, name = rest.partition(" ")
        name = name.strip()
        if how and (how not in ("on", "off") or not name):
            self.view.say("usage: /mcp · /mcp on NAME · /mcp off NAME")
            return
        stored = await self.materialized()
        if stored:
            switches = await off_loop(self.rt.mcp_switches, self.sid)
        else:
            servers = self.rt.place(None).config.mcp.servers
            switches = {n: self.mcp_pending.get(n, True) for n in sorted(servers)}
        if not how:
            listed = "  ".join(f"{_plain(n)} {'on' if on else 'off'}" for n, on in switches.items())
            self.view.say(f"mcp: {listed}" if listed else "mcp: no servers ([mcp.servers])")
            return
        if name not in switches:
            known = ", ".join(switches) or "none is configured"
            self.view.say(f"no MCP server {_plain(name)} here ({_plain(known)})")
            return
        if stored:
            await off_loop(self.rt.switch_mcp, self.sid, name, how == "on")
        else:
            self.mcp_pending[name] = how == "on"
        later = " (from the next turn)" if self.busy() else ""
        self.view.say(f"mcp {_plain(name)}: {how}{later}")

    async def _decide(self, rest: str, decision: str) -> None:
        """`/approve`, `/always`, `/deny` [CALL]: decide on a call the session waits on (one
        paused earlier, where nobody could answer); without CALL, the only one waiting."""
        stored = await self.materialized()
        waiting = await off_loop(self.rt.approvals, self.sid) if stored else []
        if not waiting:
            self.view.say("nothing awaits approval here")
            return
        if not rest and len(waiting) > 1:
            self.view.say("several calls wait; name one: " + ", ".join(r.call_id for r in waiting))
            return
        try:
            call = rest or waiting[0].call_id
            await off_loop(self.rt.approve, self.sid, call, decision, resume=False)
        except WakefulError as err:
            self.view.say(str(err))
            return
        self.rt.wake(self.sid)
        self.view.say(f"{decision}: {rest or waiting[0].call_id}")

    async def _may_leave(self) -> bool:
        """Leave now when idle; while a turn runs, ask whether to interrupt it, wait, or stay."""
        if not self.busy():
            return False
        answer = await self.view.read(
            "a turn is running: (i)nterrupt and quit, (w)ait, (c)ancel › "
        )
        choice = (answer or "i").strip().lower()[:1]
        if choice == "i":
            await self.rt.ainterrupt(self.sid)
            return False
        if choice == "w":
            self.view.say("quitting when the turn ends…")
            await self.rt.wait_idle()
            return False
        return True

    # -- commands ----------------------------------------------------------------------------

    def _switch(self, session_id: str, how: str) -> bool:
        if self.busy():
            self.view.say("a turn is running: wait for it, or Ctrl-C it, before switching")
            return False
        self.sid = session_id
        self.mcp_pending = {}  # they were the previous session's
        self.view.say(how)
        return True

    async def _new(self, _rest: str) -> None:
        self._switch(new_session_id(), "new session (nothing stored until you send something)")

    async def _fork(self, _rest: str) -> None:
        if not await self.materialized():
            self.view.say("nothing to fork yet")
            return
        fork = (await off_loop(self.rt.fork, self.sid)).id
        self._switch(fork, f"forked into {fork}")

    def _list(self, rows: list[SessionRow], snippets: dict[str, str] | None = None) -> None:
        self.choices = [r.id for r in rows]
        for n, row in enumerate(rows, 1):
            mark = "*" if row.id == self.sid else " "
            title = _plain(row.title or "(untitled)")[:50]
            fork = f"  ⑂ fork of {row.forked_from[:12]}" if row.forked_from else ""
            model = _plain(row.model or "-")[:24]
            self.view.say(
                f"{mark}{n:>3}  {row.id}  {_local(row.updated_ms)}  {model}  {title}{fork}"
            )
            if snippets and row.id in snippets:
                self.view.say(f"        {_plain(snippets[row.id])[:100]}")

    async def _sessions(self, _rest: str) -> None:
        rows = (await off_loop(self.rt.reads.list_sessions, limit=PICK_LIMIT)).sessions
        if not rows:
            self.view.say("no sessions yet")
            return
        self._list(rows)
        self.view.say("/resume N resumes one")

    async def _resume(self, rest: str) -> None:
        """`/resume`: pick from recent sessions; `/resume N|ID`: that one; else a search."""
        if rest:
            if await self._pick(rest):
                return
            try:
                page = await off_loop(self.rt.reads.search, rest, limit=PICK_LIMIT)
            except UsageError as err:
                self.view.say(str(err))
                return
            rows = [h.session for h in page.hits]
            snippets = {h.session.id: h.snippet for h in page.hits}
        else:
            rows = (await off_loop(self.rt.reads.list_sessions, limit=PICK_LIMIT)).sessions
            snippets = {}
        if not rows:
            self.view.say("no session matches" if rest else "no sessions yet")
            return
        self._list(rows, snippets)
        self.picking = True
        self.view.notice(f"resume which? 1-{len(rows)} (Enter: none)")

    async def _pick(self, choice: str) -> bool:
        """Resume the session `choice` names (a number from the last list, or an id); False
        when it names none."""
        sid = choice
        if choice.isdigit():
            if not 1 <= int(choice) <= len(self.choices):
                return False
            sid = self.choices[int(choice) - 1]
        if not sid.startswith("ses_"):  # other words search instead
            return False
        try:
            row = await off_loop(_session_named, self.rt, sid)
        except WakefulError:  # none, or an ambiguous prefix
            return False
        try:
            self.rt.place(row.location)  # it runs at its location: that must be on this host
        except UsageError as err:
            self.view.say(_plain(str(err)))
            return True
        self._switch(row.id, await off_loop(resumed, self.rt, row))
        return True

    async def _compact(self) -> None:
        """`/compact`: compact the session now and say how it went, before the next command
        (a `/new` right after it must not see its end printed into the next session)."""
        if not await self.materialized():
            self.view.say("nothing to compact yet")
            return
        sent = await off_loop(self.rt.compact, self.sid, resume=False)
        self.rt.wake(self.sid)
        await asyncio.sleep(0)  # the drain it woke starts
        while self.busy():  # noqa: ASYNC110 (no event for a drain ending; as `_settle`)
            await asyncio.sleep(0.05)
        from ..runner import compaction_result
        from ._compact import compaction_text

        result = await off_loop(compaction_result, self.rt.reads, self.sid, sent.input_id)
        if result is None:  # another process drives the session: it runs the request
            self.view.say("compaction requested; the session's driver will run it")
        else:
            self.view.say(compaction_text(result))

    async def _queue(self, rest: str) -> None:
        if not rest:
            self.view.say("usage: /queue TEXT")
            return
        await self._send(rest, delivery="queue")
        self.view.say(f"queued: {_plain(rest)[:60]}")


def model_line(model: str, agent: str) -> str:
    """Which model and agent answer here, and what the local model cannot do."""
    line = f"model {_plain(model)} · agent {_plain(agent)}"
    if model == "local":
        line += " (SmolLM2-135M, offline: it cannot call tools; --model picks another)"
    return line


def resumed(rt: Runtime, row: SessionRow, last: int = 4) -> str:
    """What resuming shows: the session, its last few messages, and what it waits on."""
    lines = [f"resumed {row.id} · {_plain(row.title or '(untitled)')} · {row.model or ''}"]
    for message in rt.reads.messages(row.id)[-last:]:
        if message.role == "system":
            continue
        text = _plain(" ".join(message.text().split()) or ", ".join(b.type for b in message.blocks))
        who = speaker(message.role, message.metadata)
        lines.append(f"  [{who}] {text[:120]}{'…' if len(text) > 120 else ''}")
    for request in rt.approvals(row.id):
        lines.append(f"  awaiting approval: {request.call_id} {_plain(request.name)}")
        lines += [f"    {_plain(line)}" for line in request.preview.splitlines()[:20]]
        lines.append("  /approve, /always or /deny decides it")
    return "\n".join(lines)


def _session_named(rt: Runtime, sid: str) -> SessionRow:
    """The session `sid` names (an id or a unique prefix); `NotFoundError` (or an ambiguous
    prefix's `UsageError`) otherwise. Blocking: the chat calls it off the loop."""
    return rt.reads.get_session(rt.reads.resolve_session_id(sid))


def _target(rt: Runtime, session: str | None, cont: bool) -> SessionRow | None:
    """The session `--session`/`--continue` name (the rules of `run`), or None for a new one."""
    if not (session or cont):
        return None
    return rt.reads.get_session(_target_session(rt, session, cont, fork=False))


async def _loop(chat: Chat) -> None:
    """Read and handle inputs until the user leaves; Ctrl-C outside a prompt (between inputs,
    or on a pipe) arrives as SIGINT and means the same as the key."""
    loop = asyncio.get_running_loop()
    leave = asyncio.Event()

    def on_sigint() -> None:
        if chat.ctrl_c():
            leave.set()

    loop.add_signal_handler(signal.SIGINT, on_sigint)  # POSIX only, like the runtime itself
    leaving = asyncio.ensure_future(leave.wait())
    try:
        while True:
            reading = asyncio.ensure_future(chat.view.read())
            await asyncio.wait({reading, leaving}, return_when=asyncio.FIRST_COMPLETED)
            if leave.is_set():
                reading.cancel()
                await asyncio.gather(reading, return_exceptions=True)
                line = None
            else:
                line = reading.result()
            if line is None:  # Ctrl-D on an empty line, or a second Ctrl-C
                if not leave.is_set():  # Ctrl-D: an answer already on screen may be ending
                    await chat._settle()
                if chat.busy():
                    await chat.rt.ainterrupt(chat.sid)
                return
            if not await chat.handle(line):
                return
    finally:
        leaving.cancel()
        loop.remove_signal_handler(signal.SIGINT)


@click.command()
@session_first(session_required=False)
@click.option(
    "--continue", "cont", is_flag=True, help="Resume the latest session of this workspace."
)
@click.option("--agent", metavar="NAME", help="Agent profile.")
@click.option("--model", metavar="SPEC", help="Model spec.")
@max_output_option
@db_option
def chat(
    session: str | None,
    cont: bool,
    agent: str | None,
    model: str | None,
    max_output_tokens: int | None,
    db: str | None,
) -> None:
    """An interactive session, new or SESSION resumed (steer while it works; /help lists
    the commands)."""
    # A model that cannot be built: exit 2 before anything, the store included, is opened.
    config = checked_config(model) if model is not None or not (session or cont) else None
    rt = Runtime(db, model=model, agent=agent, max_output_tokens=max_output_tokens, config=config)
    tty = sys.stdin.isatty() and sys.stdout.isatty() and not is_dumb_terminal()
    holder: list[Chat] = []
    view: View = TtyView(lambda typed=False: holder[0].ctrl_c(typed)) if tty else PipeView()
    try:
        row = _target(rt, session, cont)
        if row is not None and rt.set_identity(row.id, agent=agent, model=model):
            row = rt.reads.get_session(row.id)
    except BaseException:
        rt.close()
        raise
    chat_ = Chat(rt, view, row.id if row else None)
    holder.append(chat_)
    rt.listener = chat_.listener
    rt.ask = chat_.ask  # someone is here: `ask` asks inline

    async def main() -> bool:
        view.say(HELP if row is None else f"{HELP}\n{await off_loop(resumed, rt, row)}")
        view.say(
            model_line(
                row.model if row and row.model else rt.model,
                row.agent if row and row.agent else rt.agent_name,
            )
        )
        await _loop(chat_)
        stored = await chat_.materialized()
        await rt.aclose()
        return stored

    if asyncio.run(main()):
        click.echo(f"session {chat_.sid} · resume: wakeful chat {chat_.sid}")
    else:
        click.echo("nothing stored (no message was sent)")
