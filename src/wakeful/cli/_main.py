"""The root `wakeful` command group and the entry point that turns errors into one line."""

from __future__ import annotations

import sys

import click

from .. import __version__
from ..errors import WakefulError
from ._common import USAGE_EXIT


@click.group()
@click.version_option(__version__, prog_name="wakeful")
def cli() -> None:
    """wakeful: durable sessions for LLM agents."""


def _register() -> None:
    from ._chat import chat
    from ._compact import compact
    from ._config_cmd import config
    from ._log import debug, log
    from ._run import interrupt, run, send, worker
    from ._serve import serve
    from ._session import session

    for command in (run, send, interrupt, compact, worker, chat, session, log, debug, config):
        cli.add_command(command)
    cli.add_command(serve)


_register()


def main(argv: list[str] | None = None) -> None:
    """Run the CLI; a wakeful error prints one line on stderr and exits non-zero, no traceback."""
    try:
        cli.main(args=argv, standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
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
