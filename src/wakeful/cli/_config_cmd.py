"""`wakeful config show`: the effective configuration, secrets masked."""

from __future__ import annotations

from pathlib import Path

import click

from ..config import load_config
from ._common import format_option, print_json


@click.group()
def config() -> None:
    """Configuration."""


@config.command()
@format_option("text", "json", default="json")
def show(fmt: str) -> None:
    """Print the effective configuration (wakeful.toml of the workspace, then the user's)."""
    data = load_config(Path.cwd()).to_json()
    if fmt == "json":
        print_json(data)
        return
    for section, values in data.items():
        click.echo(f"[{section}]")
        if isinstance(values, dict):
            for k, v in values.items():
                click.echo(f"{k} = {v!r}")
        else:
            click.echo(repr(values))
