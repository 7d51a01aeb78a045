"""`wakeful acp`: an Agent Client Protocol agent on stdin/stdout, for editors such as Zed.

stdout carries JSON-RPC only: nothing else may print there, so diagnostics go to stderr.
"""

from __future__ import annotations

import asyncio
import logging

import click

from ..errors import UsageError
from ._common import db_option, max_output_option


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
    logging.basicConfig(level=logging.WARNING, format="wakeful acp: %(levelname)s %(message)s")
    from ..execution import Runtime

    runtime = Runtime(db, model=model, agent=agent, max_output_tokens=max_output_tokens)
    asyncio.run(serve_stdio(runtime))
