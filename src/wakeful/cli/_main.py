"""The root `wakeful` command group and the entry point that turns errors into one line."""

from __future__ import annotations

import os
import sys

import click

from .. import __version__
from ..errors import WakefulError
from ._common import USAGE_EXIT
from ._grammar import root_db
from ._lazy import LazyGroup
from ._sigterm import hold, release

# Each command's module, loaded only when the command runs (or `--help` lists it), so a cheap
# command never pays for what another needs (provider SDKs, prompt_toolkit, the server).
_COMMANDS = {
    "acp": "._acp",
    "approve": "._approve",
    "chat": "._chat",
    "compact": "._compact",
    "config": "._config_cmd",
    "debug": "._debug",
    "interrupt": "._run",
    "eval": "._eval",
    "log": "._log",
    "replay": "._replay",
    "run": "._run",
    "schedule": "._schedule",
    "send": "._run",
    "serve": "._serve",
    "session": "._session",
    "share": "._share",
    "store": "._store_cmd",
    "token": "._token",
    "usage": "._usage",
    "worker": "._run",
}
# Commands that stop cleanly on SIGTERM: they release the signal held since `main` started once
# their handler is in place (`_sigterm`); every other command gets it released before it runs.
_TAKE_SIGTERM = {"worker"}


@click.group(cls=LazyGroup, lazy=_COMMANDS)
@click.version_option(__version__, prog_name="wakeful")
@click.option(
    "--db",
    metavar="URL",
    default=None,
    expose_value=False,
    callback=root_db,
    is_eager=True,
    help="Store of every command (as each command's own --db; that one wins).",
)
@click.pass_context
def cli(ctx: click.Context) -> None:
    """wakeful: durable sessions for LLM agents.

    A command acting on one session takes it first (`wakeful log SESSION`; an id or a unique
    prefix of one); see docs/cli.md, "One grammar"."""
    if ctx.invoked_subcommand not in _TAKE_SIGTERM:
        release()


def main(argv: list[str] | None = None) -> None:
    """Run the CLI; a wakeful error prints one line on stderr and exits non-zero, no traceback."""
    hold()  # until the command is ready for SIGTERM (`_sigterm`)
    try:
        _main(argv)
    finally:
        release()


def _main(argv: list[str] | None) -> None:
    # The store replaces connections the server ended and says so once; the pool's own
    # warning per discarded connection would only repeat it. Only a PostgreSQL URL (in the
    # arguments or `$WAKEFUL_DB`) opens the pool, and `logging` stays unloaded otherwise
    # (cold start, issue 25).
    args = sys.argv[1:] if argv is None else argv
    if any("postgres" in a for a in [*args, os.environ.get("WAKEFUL_DB", "")]):
        import logging

        logging.getLogger("psycopg.pool").setLevel(logging.ERROR)
    if any(name.startswith("OTEL_") for name in os.environ):  # traces of this process's turns
        from ..runner import configure_from_env

        configure_from_env()
    try:
        cli.main(args=argv, standalone_mode=False)
    except (click.exceptions.Abort, KeyboardInterrupt):
        # Ctrl-C outside a command's own handler (also a second one while the command shuts
        # down), or a declined prompt: every store write is a transaction, so stopping here
        # loses nothing. `os._exit`, because a normal exit would wait for any thread still
        # blocked in a system call, and a further Ctrl-C would print a traceback.
        click.echo("aborted", err=True)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(130)
    except click.ClickException as err:
        err.show()
        sys.exit(err.exit_code)
    except WakefulError as err:
        click.echo(f"error: {err}", err=True)
        sys.exit(USAGE_EXIT)
    except click.exceptions.Exit as err:
        sys.exit(err.exit_code)
    except OSError as err:  # a path the user gave that cannot be read or written
        click.echo(f"error: {err.strerror or err}: {err.filename or ''}".rstrip(": "), err=True)
        sys.exit(1)
