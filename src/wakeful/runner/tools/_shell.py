"""The shell tool: one command in the workspace, with a timeout and an output cap.

On timeout the whole process group is killed, so no child outlives the call.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal

from pydantic import BaseModel, Field

from ._base import ToolContext, ToolOutcome

MAX_OUTPUT = 32 * 1024


class ShellInput(BaseModel):
    command: str = Field(min_length=1)
    timeout_s: float = Field(60.0, gt=0, le=3600)


class Shell:
    name = "shell"
    description = "Run a shell command in the workspace; returns exit code and output."
    input_model = ShellInput
    read_only = False

    async def run(self, args: ShellInput, ctx: ToolContext) -> ToolOutcome:  # type: ignore[override]
        proc = await asyncio.create_subprocess_shell(
            args.command, cwd=ctx.workspace, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT, start_new_session=True,
            env={**os.environ, **(ctx.env or {})},
        )  # fmt: skip
        timed_out = False
        try:
            out, _ = await asyncio.wait_for(proc.communicate(), args.timeout_s)
        except TimeoutError:
            timed_out = True
            _kill_group(proc.pid)
            out, _ = await proc.communicate()
        except asyncio.CancelledError:
            _kill_group(proc.pid)
            await proc.wait()
            raise
        text = out.decode("utf-8", errors="replace")
        if len(out) > MAX_OUTPUT:
            text = (
                out[:MAX_OUTPUT].decode("utf-8", errors="replace")
                + f"\n[output truncated: {len(out)} bytes]"
            )
        code = proc.returncode
        if timed_out:
            return ToolOutcome(f"{text}\n[killed after {args.timeout_s:g}s timeout]", is_error=True,
                               metadata={"exit_code": code, "timed_out": True})  # fmt: skip
        return ToolOutcome(
            f"{text}\n[exit code {code}]", is_error=code != 0, metadata={"exit_code": code}
        )


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)
