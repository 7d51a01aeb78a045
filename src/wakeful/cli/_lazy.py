"""A click group whose subcommands are imported the first time they are looked up, so a cheap
command never pays for the modules of the others (issue 25, cold start)."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

import click


class LazyGroup(click.Group):
    """A group whose commands named in `lazy` (name -> module, relative to `wakeful.cli`) are
    imported on first lookup. The module either registers the command on this group as it is
    imported (`@group.command()`) or defines it under the command's name."""

    def __init__(self, *args: Any, lazy: Mapping[str, str] | None = None, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.lazy = dict(lazy or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        """Every command name, registered or lazy, sorted (as `click.Group` lists them)."""
        return sorted(set(super().list_commands(ctx)) | set(self.lazy))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """The command named `cmd_name`, importing its module the first time."""
        if cmd_name not in self.commands and cmd_name in self.lazy:
            module = importlib.import_module(self.lazy[cmd_name], __package__)
            if cmd_name not in self.commands:  # not registered by importing it
                command = getattr(module, cmd_name)
                assert isinstance(command, click.Command)
                self.add_command(command, cmd_name)
        return super().get_command(ctx, cmd_name)
