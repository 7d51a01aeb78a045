"""The shell tool: one command in the workspace, with a timeout and an output cap.

Invariant: no process started by a call outlives it while still holding the call's output.
The command runs in a process group of its own and carries the call's environment mark; on
timeout or cancellation everything of the call is killed (`_reap.kill_all`: the group, and
processes that left it with `setsid`), and so is a background job that keeps the output open
after the shell exits.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
from typing import IO

from pydantic import Field, JsonValue

from ._base import ToolContext, ToolInput, ToolOutcome
from ._cap import DROPPED, MAX_KEPT_BYTES, MAX_RESULT_BYTES
from ._reap import MARK, kill_all, new_mark

TAIL_KEPT = MAX_RESULT_BYTES  # the last bytes of an output beyond MAX_KEPT_BYTES, kept in memory
DEFAULT_TIMEOUT_S = 60.0
MAX_TIMEOUT_S = 3600.0
LINGER_S = 1.0  # how long output may stay open after the shell exits
CHUNK = 64 * 1024


class ShellInput(ToolInput):
    command: str = Field(min_length=1, description="A command line for /bin/sh.")
    timeout_s: float = Field(
        DEFAULT_TIMEOUT_S,
        gt=0,
        le=MAX_TIMEOUT_S,
        description="Seconds before the command and its children are killed.",
    )


class _Spool:
    """A command's output, spooled to a temporary file while it runs (memory stays bounded):
    its first `MAX_KEPT_BYTES` there, and of the rest only the last `TAIL_KEPT` bytes (in
    memory; trimmed, yet always at least that many); the middle beyond is only counted."""

    def __init__(self) -> None:
        # closed by `close` (the call holds the spool in `contextlib.closing`)
        self.file: IO[bytes] = tempfile.TemporaryFile(prefix="wakeful-shell-")  # noqa: SIM115
        self.spooled = 0  # bytes in the file
        self.tail = bytearray()  # after the file's bytes
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = MAX_KEPT_BYTES - self.spooled
        if room > 0:
            self.file.write(chunk[:room])
            self.spooled += min(room, len(chunk))
            chunk = chunk[room:]
        self.tail += chunk
        if len(self.tail) > 2 * TAIL_KEPT:
            del self.tail[: len(self.tail) - TAIL_KEPT]

    def close(self) -> None:
        """Remove the spool (a temporary file: gone once closed)."""
        self.file.close()

    @property
    def dropped(self) -> int:
        """Bytes of the output kept nowhere (the middle of one over `MAX_KEPT_BYTES`)."""
        return self.total - self.spooled - len(self.tail)

    def text(self) -> str:
        """The output as kept: all of it, or its start and end around a line saying how much
        of the middle was dropped. Reads the file: call it off the event loop."""
        self.file.seek(0)
        data = self.file.read()
        if self.dropped:
            data += (
                f"\n[... {self.dropped} bytes of the output dropped here: the shell keeps at "
                f"most {MAX_KEPT_BYTES // (1024 * 1024)} MiB of one, its start and its end ...]\n"
            ).encode()
        return (data + bytes(self.tail)).decode("utf-8", errors="replace")


class Shell:
    name = "shell"
    description = (
        "Run a command with /bin/sh in the workspace root; stdout and stderr are combined. "
        f"Returns the output (at most {MAX_RESULT_BYTES // 1024} KiB: the start and the end) and the "
        f"exit code. The command is killed after timeout_s seconds (default {DEFAULT_TIMEOUT_S:g}). "
        "Stdin is empty. A background job that keeps the output open is killed when the command "
        "exits; redirect its output (`cmd > log 2>&1 &`) to keep it running."
    )
    input_model = ShellInput
    read_only = False

    async def run(self, args: ShellInput, ctx: ToolContext) -> ToolOutcome:
        with contextlib.closing(_Spool()) as spool:
            code, timed_out, lingered = await self._run(args, ctx, spool)
            text = await asyncio.to_thread(spool.text)
        return _outcome(text, spool, code, args.timeout_s, timed_out, lingered)

    async def _run(
        self, args: ShellInput, ctx: ToolContext, capture: _Spool
    ) -> tuple[int | None, bool, bool]:
        """Run the command, its output into `capture`: (exit code, timed out, lingered)."""
        loop = asyncio.get_running_loop()
        mark = new_mark()
        start = asyncio.ensure_future(
            loop.subprocess_shell(
                lambda: _Watch(capture, loop),
                args.command,
                cwd=ctx.workspace,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                start_new_session=True,
                env={**os.environ, **(ctx.env or {}), MARK: mark},
            )
        )
        try:
            # Shielded: cancelled inside, asyncio would kill the shell alone (after waiting for
            # it, while its children may hold the output open) and leave the children running.
            transport, protocol = await asyncio.shield(start)
        except asyncio.CancelledError:  # cancelled while starting: the shell may already run
            with contextlib.suppress(BaseException):
                transport, protocol = await start
                kill_all(transport.get_pid(), mark)
                await _within(protocol.exited, LINGER_S)
                transport.close()
            kill_all(None, mark)
            raise
        pid = transport.get_pid()
        try:
            timed_out, lingered = await _supervise(pid, mark, protocol, args.timeout_s)
        except BaseException:  # cancelled: nothing of the command may keep running
            kill_all(pid, mark)
            # Reap the killed shell before closing, so no zombie (and no "still running"
            # warning from its Popen) outlives the call; a second cancel only skips the wait.
            with contextlib.suppress(BaseException):
                await _within(protocol.exited, LINGER_S)
            raise
        finally:
            transport.close()
        return transport.get_returncode(), timed_out, lingered


class _Watch(asyncio.SubprocessProtocol):
    """Collects the output and tells apart two ends: the shell exiting and the output closing
    (a background job may hold the output open after the shell is gone)."""

    def __init__(self, capture: _Spool, loop: asyncio.AbstractEventLoop) -> None:
        self.capture = capture
        self.exited: asyncio.Future[None] = loop.create_future()
        self.output_closed: asyncio.Future[None] = loop.create_future()

    def pipe_data_received(self, fd: int, data: bytes | str) -> None:
        self.capture.add(data.encode() if isinstance(data, str) else data)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        if not self.output_closed.done():
            self.output_closed.set_result(None)

    def process_exited(self) -> None:
        if not self.exited.done():
            self.exited.set_result(None)


async def _within(future: asyncio.Future[None], seconds: float) -> bool:
    done, _ = await asyncio.wait({future}, timeout=seconds)
    return bool(done)


async def _supervise(pid: int, mark: str, watch: _Watch, timeout_s: float) -> tuple[bool, bool]:
    """Wait for the command within its timeout, then for its output to close.

    Returns (timed out, a background job held the output open and was killed).
    """
    timed_out = lingered = False
    if not await _within(watch.exited, timeout_s):
        timed_out = True
        kill_all(pid, mark)
        await watch.exited
    if not await _within(watch.output_closed, LINGER_S):
        lingered = not timed_out
        kill_all(pid, mark)
        await _within(watch.output_closed, LINGER_S)
    return timed_out, lingered


def _outcome(
    output: str, spool: _Spool, code: int | None, timeout_s: float, timed_out: bool, lingered: bool
) -> ToolOutcome:
    """The result: the whole output kept (the one cap, `_cap.py`, cuts it for the model and
    keeps it as a blob), then how the command ended."""
    text = output or "(no output)"
    if not text.endswith("\n"):
        text += "\n"
    if timed_out:
        text += f"[timed out after {timeout_s:g}s; the command and its children were killed]"
    else:
        text += f"[exit code {code}]"
    if lingered:
        text += "\n[a background job kept the output open and was killed]"
    metadata: dict[str, JsonValue] = {
        "exit_code": code,
        "timed_out": timed_out,
        "output_bytes": spool.total,
        "truncated": len(text) * 4 > MAX_RESULT_BYTES and len(text.encode()) > MAX_RESULT_BYTES,
    }
    if spool.dropped:
        metadata[DROPPED] = spool.dropped
    return ToolOutcome(text, is_error=timed_out or code != 0, metadata=metadata)
