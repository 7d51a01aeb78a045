"""What `run` and `approve` print while a turn streams (`Renderer`) and when it ends
(`run_summary`)."""

from __future__ import annotations

import asyncio
import sys
import time
from typing import Any

import click

from ..runner import LiveEvent, TurnResult
from ._common import print_jsonl, printable
from ._tools_view import tool_line

STOPPING = "stopping: the turn ends as interrupted, what it wrote is kept"


class Renderer:
    """Streams a turn to the terminal: text to stdout; tool calls, retries and (on a terminal) a
    spinner while waiting on the model or a retry, with the retry's deadline, to stderr."""

    FRAMES = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"

    def __init__(self, fmt: str) -> None:
        self.fmt = fmt
        self.session_id: str | None = None  # text mode shows only this session's stream
        self.waiting: str | None = None  # what the spinner says, None when nothing is awaited
        self.spinning = fmt == "text" and sys.stderr.isatty()
        self.tty = sys.stdout.isatty()  # escape sequences in model text are shown, not run
        self._shown = False
        self._mid_line = False  # the streamed text so far ends inside a line
        self.halting = False  # Ctrl-C was pressed: the turn is stopping (`stopping`)

    def __call__(self, ev: LiveEvent) -> None:
        if self.fmt == "jsonl":
            print_jsonl({"session_id": ev.session_id, "kind": ev.kind, "data": ev.data})
        elif self.fmt == "text" and ev.session_id in (self.session_id, None):
            self._text(ev)

    def _text(self, ev: LiveEvent) -> None:
        if ev.kind in ("step", "turn_start", "turn_end"):  # a reply never runs into the next
            self.end_line()
        if ev.kind == "step":
            self.waiting = STOPPING if self.halting else "waiting for the model"
            return
        self.waiting = STOPPING if self.halting else None
        self.clear()
        if ev.kind == "text":
            text = str(ev.data.get("text", ""))
            sys.stdout.write(printable(text, lines=True) if self.tty else text)
            sys.stdout.flush()
            self._mid_line = bool(text) and not text.endswith("\n") or (self._mid_line and not text)
        elif ev.kind in ("tool_start", "tool_end"):
            if self._mid_line:  # a call starts on a line of its own
                click.echo()
                self._mid_line = False
            click.echo(tool_line(ev), err=True)
        elif ev.kind == "notice":  # a budget's notice share reached (docs/spend.md)
            self.end_line()
            click.echo(f"! {ev.data.get('text')}", err=True)
        elif ev.kind == "retry":
            delay_ms = int(str(ev.data.get("delay_ms", 0)))
            at = time.strftime("%H:%M:%S", time.localtime(time.time() + delay_ms / 1000))
            click.echo(
                f"\n… {ev.data.get('error_kind')}: retrying in {delay_ms / 1000:.1f}s", err=True
            )
            self.waiting = f"{ev.data.get('error_kind')}: retry at {at}"

    def stopping(self) -> None:
        """Ctrl-C was pressed on a turn running here: say so at once, on a line of its own on
        stderr, and keep the spinner saying it until the turn ends (issue 37 item 29)."""
        self.halting = True
        self.clear()
        if self.fmt == "text":
            self.end_line()
        click.echo(f"⏹ {STOPPING} (Ctrl-C again quits at once)", err=True)
        self.waiting = STOPPING

    def end_line(self) -> None:
        """End the streamed text's line, if it ends inside one: the next reply, or a line on
        stderr (`[interrupted]`, the session id), starts on a line of its own."""
        if self._mid_line:
            click.echo()
            self._mid_line = False

    def pause(self) -> None:
        """Stop the spinner until the next step (a question is about to be asked)."""
        self.waiting = None
        self.clear()

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


def turn_json(t: TurnResult) -> dict[str, Any]:
    """One turn as a run's JSON lists it."""
    return {"turn_id": t.turn_id, "outcome": t.outcome, "steps": t.steps, "truncated": t.truncated}


def run_summary(
    session_id: str, turns: list[TurnResult], mine: TurnResult | None = None
) -> dict[str, Any]:
    """The run's result: the turn that took its prompt (`mine`; else the last turn run), with
    every turn this process ran listed under `turns`."""
    last = mine or (turns[-1] if turns else None)
    return {
        "session_id": session_id,
        "turn_id": last.turn_id if last else None,
        "outcome": last.outcome if last else "completed",
        "text": last.final_text if last else "",
        "error": last.error if last else None,
        "error_kind": last.error_kind if last else None,
        "truncated": last.truncated if last else False,
        "usage": {
            "input_tokens": sum(t.usage.input_tokens for t in turns),
            "output_tokens": sum(t.usage.output_tokens for t in turns),
            "cache_read_tokens": sum(t.usage.cache_read_tokens for t in turns),
            "cache_write_tokens": sum(t.usage.cache_write_tokens for t in turns),
        },
        "turns": [turn_json(t) for t in turns],
    }
