"""The command-line fixtures of `tests/cli` (`wk`: `python -m wakeful` in a workspace)."""

from tests.cli.conftest import cli_env, spawn, wk, workdir

__all__ = ["cli_env", "spawn", "wk", "workdir"]
