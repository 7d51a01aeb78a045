"""The command-line fixtures of `tests/cli` (`wk`: `python -m wakeful` in a workspace) and the
server fixture of `tests/server` (`make_server`)."""

from tests.cli.conftest import cli_env, spawn, wk, workdir
from tests.server.conftest import make_server

__all__ = ["cli_env", "make_server", "spawn", "wk", "workdir"]
