"""The root `wakeful` command group and the entry point that turns errors into one line."""

from __future__ import annotations

import sys

import click

from .. import __version__
from ..errors import WakefulError


@click.group()
@click.version_option(__version__, prog_name="wakeful")
def cli() -> None:
    """wakeful: durable sessions for LLM agents."""


def main(argv: list[str] | None = None) -> None:
    """Run the CLI; a wakeful error prints one line on stderr and exits 2, never a traceback."""
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
        sys.exit(2)
    except click.exceptions.Exit as err:
        sys.exit(err.exit_code)
