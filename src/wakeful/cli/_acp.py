"""`wakeful acp`: an Agent Client Protocol agent on stdin/stdout, for editors such as Zed.

stdout carries JSON-RPC only: nothing else may print there, so diagnostics go to stderr.
"""

from __future__ import annotations

import asyncio
import logging
import os
import stat
import sys
from typing import Any

import click

from ..errors import UsageError
from ._common import db_option, max_output_option


class _OneLine(logging.Formatter):
    """Log lines without tracebacks: a malformed message from the editor is the editor's
    problem, logged by the SDK as one line with its reason (the editor keeps stderr as the
    agent's log)."""

    def formatException(self, ei: Any) -> str:  # noqa: N802  # logging's own name
        return f"({ei[1]!r})" if ei and ei[1] is not None else ""


@click.command()
@click.option("--model", metavar="SPEC", help="Model of new sessions (default: configured).")
@click.option("--agent", metavar="NAME", help="Agent of new sessions (default: configured).")
@max_output_option
@db_option
def acp(
    model: str | None, agent: str | None, max_output_tokens: int | None, db: str | None
) -> None:
    """Serve sessions to an editor over the Agent Client Protocol (stdio; docs/acp.md)."""
    try:
        from ..acp import serve_stdio
    except ImportError as err:  # the SDK is an optional extra
        raise UsageError(
            f"wakeful acp needs the acp extra (pip install 'wakeful[acp]'): {err}"
        ) from None
    for name, stream in (("stdin", sys.stdin), ("stdout", sys.stdout)):
        mode = os.fstat(stream.fileno()).st_mode
        if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode)):
            raise UsageError(
                f"wakeful acp speaks JSON-RPC on stdin and stdout; {name} is a regular file "
                "(start it from an editor, whose pipes it talks to)"
            )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_OneLine("wakeful acp: %(levelname)s %(message)s"))
    logging.basicConfig(level=logging.WARNING, handlers=[handler])
    from ..execution import Runtime

    runtime = Runtime(db, model=model, agent=agent, max_output_tokens=max_output_tokens)
    asyncio.run(serve_stdio(runtime))
