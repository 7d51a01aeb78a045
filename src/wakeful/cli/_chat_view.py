"""The chat's terminal: streamed answers above a prompt that never overwrites them.

Invariant: only finished lines are printed to the scrollback (`print_formatted_text`, which
above a running prompt hides it, prints, and draws it again). The line being streamed, the spinner
(with a retry's deadline) and notices live in the prompt's own area above the input, redrawn by
prompt_toolkit, so a redraw can never cut a streamed line ("The capital of Japan is Tokyo." used
to show as " is Tokyo."). Off a terminal (a pipe, or `TERM=dumb`, where nothing can be
redrawn) text is written as it streams and input is read line by line.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

from ..runner import LiveEvent
from ._common import TRUNCATED_NOTE
from ._tools_view import tool_line

SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
PROMPT = "› "


def _clock(epoch_s: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(epoch_s))


class Stream:
    """One session's live events as finished lines plus what is shown while they stream.

    Pure state, no I/O: `feed` returns the lines that are now finished; `partial` is the line
    being streamed; `waiting` says what is awaited (the model, a retry, a tool), if anything.
    """

    def __init__(self) -> None:
        self.partial = ""
        self.waiting: str | None = None
        self.retry_at: float | None = None  # epoch seconds of a scheduled retry

    def feed(self, ev: LiveEvent) -> list[str]:
        """Take one live event; return the lines it finished."""
        data = ev.data
        if ev.kind == "text":
            self.waiting, self.retry_at = None, None
            *done, self.partial = (self.partial + str(data.get("text", ""))).split("\n")
            return done
        if ev.kind == "step":  # a new request: its reply starts on a line of its own
            self.waiting = "waiting for the model"
            return self.flush()
        if ev.kind == "notice":  # a budget's notice share reached (docs/spend.md)
            return [*self.flush(), f"! {data.get('text')}"]
        if ev.kind == "retry":
            delay_s = int(str(data.get("delay_ms", 0))) / 1000
            self.retry_at = time.time() + delay_s
            self.waiting = f"{data.get('error_kind')}: retry at {_clock(self.retry_at)}"
            return [*self.flush(), f"… {data.get('error_kind')}: retrying in {delay_s:.1f}s"]
        if ev.kind == "tool_start":
            self.waiting = f"running {data.get('name')}"
            return [*self.flush(), tool_line(ev)]
        if ev.kind == "tool_end":
            self.waiting = None
            return [tool_line(ev)]
        if ev.kind == "compaction":  # one line at its end; progress only moves the spinner
            phase = data.get("phase")
            if phase in ("start", "progress"):
                chars = data.get("chars")
                self.waiting = "compacting the history" + (f" ({chars} chars)" if chars else "")
                return []
            self.waiting = None
            if phase == "end":
                return ["(history compacted)"]
            return [f"(compaction {phase}{': ' + str(data['error']) if data.get('error') else ''})"]
        if ev.kind == "turn_end":
            self.waiting, self.retry_at = None, None
            outcome = data.get("outcome")
            done = self.flush()
            if outcome != "completed":
                done.append(f"[{outcome}] {data.get('error') or ''}".rstrip())
            if data.get("truncated"):
                done.append(TRUNCATED_NOTE)
            return done
        return []

    def flush(self) -> list[str]:
        """The streamed line so far, as a finished line (none when empty)."""
        line, self.partial = self.partial, ""
        return [line] if line else []

    def status(self, frame: int) -> str | None:
        """The spinner line, or None when nothing is awaited."""
        if self.waiting is None:
            return None
        left = "" if self.retry_at is None else f" (in {max(0, self.retry_at - time.time()):.0f}s)"
        return f"{SPINNER[frame % len(SPINNER)]} {self.waiting}{left}"


class View(ABC):
    """What the chat needs from a terminal or a pipe."""

    stream: Stream

    @abstractmethod
    def show(self, ev: LiveEvent) -> None:
        """Render one live event of the chat's session."""

    @abstractmethod
    def say(self, text: str) -> None:
        """Print a finished line (or several) of the chat's own."""

    @abstractmethod
    def notice(self, text: str | None) -> None:
        """A transient hint in the live area (terminal) or a line (pipe); None clears it."""

    def end_text(self) -> None:
        """End the text streamed so far as a finished line, so what the chat prints next (an
        approval question) comes after the words of the reply that led to it."""
        for line in self.stream.flush():
            self.say(line)

    def echo(self, text: str) -> None:
        """Show what the user sent, where the prompt erased it (terminal only)."""
        return None  # a pipe's input is already where the user typed it

    @abstractmethod
    async def read(self, label: str = PROMPT) -> str | None:
        """The next input (None: end of input, Ctrl-D)."""


class PipeView(View):
    """Lines from stdin; streamed text written to stdout as it arrives (a pipe, or a terminal
    that cannot redraw: its own line discipline echoes and edits the input)."""

    def __init__(self) -> None:
        self.stream = Stream()
        self._mid_line = False  # streamed text left the cursor mid-line
        self._lines: asyncio.Queue[str | None] | None = None

    def show(self, ev: LiveEvent) -> None:
        """Text as it streams; tool and outcome lines whole."""
        if ev.kind == "text":
            text = str(ev.data.get("text", ""))
            sys.stdout.write(text)
            sys.stdout.flush()
            if text:
                self._mid_line = not text.endswith("\n")
            return
        lines = self.stream.feed(ev)
        if self._mid_line and (lines or ev.kind == "turn_end"):
            sys.stdout.write("\n")
            self._mid_line = False
        for line in lines:
            sys.stdout.write(line + "\n")
        sys.stdout.flush()

    def say(self, text: str) -> None:
        """Print a line."""
        sys.stdout.write(text + "\n")
        sys.stdout.flush()

    def end_text(self) -> None:
        """Text is written as it streams: end its line, if it left one open."""
        if self._mid_line:
            self.say("")
            self._mid_line = False

    def notice(self, text: str | None) -> None:
        """Hints are lines here."""
        if text:
            self.say(text)

    async def read(self, label: str = PROMPT) -> str | None:
        """The next line of stdin (None at its end), read by a daemon thread so a pending read
        can be cancelled and never holds the process."""
        if self._lines is None:
            loop = asyncio.get_running_loop()
            lines: asyncio.Queue[str | None] = asyncio.Queue()

            def pump() -> None:
                try:
                    for line in sys.stdin:
                        loop.call_soon_threadsafe(lines.put_nowait, line.rstrip("\n"))
                    loop.call_soon_threadsafe(lines.put_nowait, None)
                except RuntimeError:  # the chat's loop closed: nobody reads these lines now
                    return

            threading.Thread(target=pump, name="chat-stdin", daemon=True).start()
            self._lines = lines
        line = await self._lines.get()
        if line is None:
            self._lines.put_nowait(None)  # the end stays the end
        return line


class TtyView(View):
    """prompt_toolkit: a multi-line input whose prompt area shows the streamed line, the
    spinner and notices; finished lines go to the scrollback above it.

    Keys: Enter sends; Alt-Enter or a trailing backslash start a new line; Ctrl-C clears
    typed text (and tells `on_ctrl_c(typed=True)`), and on an empty line asks `on_ctrl_c()`
    (True: leave); Ctrl-D on an empty line ends the input.
    """

    def __init__(self, on_ctrl_c: Callable[..., bool]) -> None:
        from prompt_toolkit import PromptSession
        from prompt_toolkit.formatted_text import FormattedText

        self.stream = Stream()
        self._notice: str | None = None
        self._label = PROMPT
        self._on_ctrl_c = on_ctrl_c
        self._text = FormattedText
        self._prompt: PromptSession[str] = PromptSession(
            message=self._message,
            multiline=True,
            key_bindings=self._keys(),
            erase_when_done=True,
            refresh_interval=0.1,
            prompt_continuation="  ",
        )

    def _keys(self) -> Any:
        from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent

        kb = KeyBindings()

        @kb.add("enter")
        @kb.add("c-j")  # what a pipe or `pexpect.sendline` sends for Enter
        def _send(event: KeyPressEvent) -> None:
            buf = event.current_buffer
            if buf.document.text_before_cursor.endswith("\\"):  # a continued line
                buf.delete_before_cursor(1)
                buf.insert_text("\n")
            else:
                buf.validate_and_handle()

        @kb.add("escape", "enter")
        def _newline(event: KeyPressEvent) -> None:
            event.current_buffer.insert_text("\n")

        @kb.add("c-c")
        def _ctrl_c(event: KeyPressEvent) -> None:
            buf = event.current_buffer
            if buf.text:
                buf.reset()
                self._on_ctrl_c(typed=True)
                return
            if self._on_ctrl_c():
                event.app.exit(exception=EOFError())

        return kb

    def _message(self) -> Any:
        parts: list[tuple[str, str]] = []
        if self.stream.partial:  # its tail: the area shows one row of it
            width = max(10, self._prompt.app.output.get_size().columns - 1)
            tail = self.stream.partial[-width:]
            parts.append(
                ("", ("…" + tail[1:] if len(self.stream.partial) > width else tail) + "\n")
            )
        status = self._notice or self.stream.status(int(time.monotonic() * 10))
        if status:
            parts.append(("fg:ansibrightblack", status + "\n"))
        parts.append(("bold", self._label))
        return self._text(parts)

    def _print(self, lines: list[str]) -> None:
        """Lines to the scrollback: above the prompt while it runs (prompt_toolkit hides the
        prompt, prints, draws it again, in order), else straight out. Escapes are neutralized."""
        from prompt_toolkit import print_formatted_text

        for line in lines:
            print_formatted_text(line)
        self._redraw()

    def _redraw(self) -> None:
        app = self._prompt.app
        if app.is_running:
            app.invalidate()

    def show(self, ev: LiveEvent) -> None:
        """Finished lines to the scrollback; the rest redraws the prompt area."""
        if ev.kind in ("text", "step", "retry", "tool_start"):
            self._notice = None
        self._print(self.stream.feed(ev))

    def say(self, text: str) -> None:
        """Print lines of the chat's own to the scrollback."""
        self._print(text.split("\n"))

    def notice(self, text: str | None) -> None:
        """Show (or clear) a hint above the input."""
        self._notice = text
        self._redraw()

    def echo(self, text: str) -> None:
        """The sent input's first line, after the prompt sign (the prompt erases itself)."""
        first = "".join(c if c.isprintable() else " " for c in text.splitlines()[0])
        self._print([PROMPT + first + (" …" if "\n" in text else "")])

    async def read(self, label: str = PROMPT) -> str | None:
        """The next input; None at Ctrl-D on an empty line (or when Ctrl-C says to leave)."""
        self._label = label
        try:
            while True:
                try:
                    # No SIGINT handler of prompt_toolkit's: the chat's own stays in place for
                    # a Ctrl-C that arrives as a signal (between two prompts).
                    return await self._prompt.prompt_async(handle_sigint=False)
                except KeyboardInterrupt:  # the dumb-terminal prompt keeps its own Ctrl-C key
                    if self._on_ctrl_c():
                        return None
                except EOFError:
                    return None
        finally:
            self._label = PROMPT
