"""`wakeful config show`: the effective configuration, secrets masked."""

from __future__ import annotations

import json
from pathlib import Path

import click

from ..config import load_config
from ._common import format_option, print_json


@click.group()
def config() -> None:
    """Configuration."""


@config.command()
@format_option("text", "json")
def show(fmt: str) -> None:
    """Print the effective configuration (wakeful.toml of the workspace, then the user's):
    one `key = value` line per setting under its `[section]` (values as JSON), or one JSON
    document with --format json."""
    data = load_config(Path.cwd()).to_json()
    if fmt == "json":
        print_json(data)
        return
    for section, values in data.items():
        if not isinstance(values, dict):
            click.echo(f"{section} = {json.dumps(values)}")
    for section, values in data.items():
        if isinstance(values, dict):
            click.echo(f"\n[{section}]")
            for k, v in values.items():
                click.echo(f"{k} = {json.dumps(v, ensure_ascii=False)}")
