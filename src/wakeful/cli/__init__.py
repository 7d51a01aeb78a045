"""The `wakeful` command line: parse, call the runtime, render. Holds no runtime logic."""

from ._main import cli, main

__all__ = ["cli", "main"]
