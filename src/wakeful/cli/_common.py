"""Shared CLI plumbing: the store option, output formats, exit codes, JSON printing, and the
two text rules every command follows: text from the user must be storable (`TEXT`,
`check_text`), and stored text reaches a terminal only as `printable` (no escape sequences).
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from ..errors import UsageError

if TYPE_CHECKING:  # the store loads when a command opens one, not when the CLI starts
    from ..config import Config
    from ..execution import Runtime
    from ..runner import Ask
    from ..store import Store

# Exit codes per turn outcome (documented in docs/cli.md).
EXIT_CODES = {"completed": 0, "failed": 1, "blocked": 3, "paused": 4, "interrupted": 130}
USAGE_EXIT = 2
# What stands in for instruction text unless --show-sensitive (`session show`, `debug prompt`).
REDACTED = "[redacted: --show-sensitive]"
# What the terminal says after a reply the output limit cut (`run`, `chat`).
TRUNCATED_NOTE = "[truncated] the reply stopped at the output limit (--max-output-tokens)"

db_option = click.option(
    "--db",
    "db",
    envvar="WAKEFUL_DB",
    default=None,
    metavar="URL",
    help="Store: a SQLite path or postgresql:// URL (default: sessions.db in the user data dir).",
)


max_output_option = click.option(
    "--max-output-tokens",
    "max_output_tokens",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="Output limit of every model request (overrides the configured one).",
)


# A command callback a click decorator returns unchanged (typed, so `mypy --strict` keeps it typed).
_F = TypeVar("_F", bound=Callable[..., Any])


# Every `--format` choice any command offers (`jsonl` where output is a stream), `text` first;
# older spellings still accepted but not shown: `table` was the listings' name for `text`.
FORMATS = ("text", "json", "jsonl", "csv")  # csv: a table to export (`usage`)
FORMAT_ALIASES = {"table": "text"}


class _Format(click.Choice):  # type: ignore[type-arg]  # (generic since click 8.3)
    """A `--format` choice; an old spelling (`FORMAT_ALIASES`) reads as its new one."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        """The choice `value` names (an alias mapped to its choice)."""
        return super().convert(FORMAT_ALIASES.get(value, value), param, ctx)


def format_option(*choices: str, default: str = "text") -> Callable[[_F], _F]:
    """A `--format` option offering `choices`: `text` first, each one of `FORMATS`."""
    assert choices[0] == "text" and set(choices) <= set(FORMATS), choices
    return click.option(
        "--format",
        "fmt",
        type=_Format(choices),
        default=default,
        show_default=True,
        help="Output format.",
    )


def require_store(db: str | None) -> None:
    """Raise a one-line `UsageError` (`no store at PATH`) when `--db` / `WAKEFUL_DB` / the
    default names a SQLite file that does not exist: only commands that write create a store,
    so a mistyped path is an error, never a new empty database. URLs pass unchecked."""
    from ..store import resolve_db_url

    target = resolve_db_url(db)
    scheme, sep, _ = target.partition("://")
    if sep and scheme != "sqlite":  # a server, PostgreSQL, or an installed store backend
        return
    path = target.removeprefix("sqlite:///").removeprefix("sqlite://")
    if path != ":memory:" and not os.path.exists(path):
        raise UsageError(f"no store at {path}")


def checked_config(model: str | None) -> Config:
    """This directory's configuration, after checking that the model a new session here would
    take (`model`, else the configured default) can be built: a one-line `UsageError` saying
    what to do otherwise, raised before any store is opened, so a command that cannot run
    writes nothing (not even an empty database). Pass the result to `Runtime(config=...)`."""
    from pathlib import Path

    from ..config import load_config
    from ..execution import default_model
    from ..providers import check_model

    config = load_config(Path.cwd().resolve())
    spec = model or default_model(config)
    check_model(spec, **config.providers.options_for(spec))
    return config


def no_default_store(db: str | None) -> bool:
    """Whether no store was named (`--db`, `$WAKEFUL_DB`) and none exists at the default
    location yet: before the first run, a listing lists nothing (it is not an error)."""
    if db:
        return False
    from ..store import resolve_db_url

    path = resolve_db_url(None).removeprefix("sqlite:///").removeprefix("sqlite://")
    return not os.path.exists(path)


def _server_url(db: str | None) -> bool:
    return bool(db) and str(db).startswith(("http://", "https://"))


def store_for(db: str | None, *, create: bool = False) -> Store:
    """Open the store named by `--db` / `WAKEFUL_DB` / the default; a SQLite file that does
    not exist is created only with `create` (else `require_store`'s error).

    An `http(s)://` URL names a `wakeful serve` server (token: `$WAKEFUL_SERVER_TOKEN`): its
    `RemoteStore` implements the same `Store` protocol, so a command written against `Store`
    works against either. A command that needs what only a local database does uses
    `local_runtime`.
    """
    if db and _server_url(db):
        from ..client import RemoteStore

        return RemoteStore(db)
    if not create:
        require_store(db)
    from ..store import open_store

    return open_store(db)


def local_runtime(
    db: str | None, what: str, *, create: bool = False, ask: Ask | None = None
) -> Runtime:
    """A runtime over the local database named as for `store_for` (a SQLite path or PostgreSQL
    URL), for what only a local database does (pruning, importing, rebuilding a request,
    evals, replay); a server URL is a one-line `UsageError` saying `what` is not available
    through a server. The command calls `close` (or `aclose` once it drove sessions)."""
    if db and _server_url(db):
        raise UsageError(
            f"{what} is not available through a server ({db}); run it where the database is"
        )
    if not create:
        require_store(db)
    from ..execution import Runtime
    from ..store import open_store

    return Runtime(store=open_store(db), ask=ask)


def text_problem(value: str) -> str | None:
    """Why `value` cannot be stored as text, or None. A command-line argument that is not
    valid UTF-8 arrives with each bad byte as a lone surrogate (Python's surrogateescape), and
    JSON can spell one (`\\ud800`); neither encodes, and PostgreSQL text cannot hold a NUL."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as err:
        code = ord(value[err.start])
        if 0xDC80 <= code <= 0xDCFF:
            return f"not valid UTF-8 (byte 0x{code - 0xDC00:02x} at character {err.start + 1})"
        return f"holds a lone surrogate U+{code:04X} (character {err.start + 1}): not valid Unicode"
    if "\0" in value:
        return f"holds a NUL character (character {value.index(chr(0)) + 1})"
    return None


def check_text(value: object, what: str, *, empty: bool = True) -> None:
    """Raise a one-line `UsageError` naming `what` when `value` is a string that cannot be
    stored as text (see `text_problem`), or an empty one where `empty` is False."""
    if not isinstance(value, str):
        return
    if not empty and not value.strip():
        raise UsageError(f"{what}: must not be empty")
    problem = text_problem(value)
    if problem is not None:
        raise UsageError(f"{what}: {problem}")


class _Text(click.ParamType):  # type: ignore[type-arg]  # (generic since click 8.3)
    """A string argument or option checked by `check_text` (the error is one line)."""

    name = "text"

    def __init__(self, *, empty: bool = True) -> None:
        self.empty = empty

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        """Return `value` unchanged when it is storable text; raise `UsageError` otherwise."""
        if isinstance(param, click.Option):
            what = param.opts[0]
        else:
            what = param.human_readable_name if param is not None else "value"
        check_text(value, what, empty=self.empty)
        return value


TEXT = _Text()
"""The type of every free-text argument (a prompt, a model spec, an input id)."""
ID = _Text(empty=False)
"""The type of an id argument or option (`--session ""` names no session)."""

# C0 and C1 control characters and DEL: what a terminal would act on rather than show.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_CONTROL_LINE = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def printable(text: str | None, *, lines: bool = False) -> str:
    """`text` safe to print on a terminal: control characters (ESC of an escape sequence,
    BEL, backspace, C1 controls) are shown as `\\xNN` escapes instead of being acted on.
    Newlines and tabs stay when `lines` is True (a transcript), else they are escaped too
    (a title in a table row)."""
    pattern = _CONTROL if lines else _CONTROL_LINE
    return pattern.sub(lambda m: f"\\x{ord(m.group()):02x}", text or "")


def print_json(value: Any) -> None:
    """Print one JSON document on stdout."""
    click.echo(json.dumps(value, ensure_ascii=False, default=str))


def print_jsonl(value: Any) -> None:
    """Print one JSON line and flush (for followers)."""
    sys.stdout.write(json.dumps(value, ensure_ascii=False, default=str) + "\n")
    sys.stdout.flush()


def iso(ms: int) -> str:
    """Epoch milliseconds as an ISO-8601 UTC timestamp."""
    import datetime as dt

    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).isoformat(timespec="seconds")


def local_time(ms: int) -> str:
    """Epoch milliseconds as local wall-clock time, `YYYY-MM-DD HH:MM` (what a person reads in
    a table; `--format json` keeps ISO-8601 UTC)."""
    import datetime as dt

    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).astimezone().strftime("%Y-%m-%d %H:%M")


def existing_dir(raw: str, what: str) -> str:
    """`raw` as an absolute, resolved directory path; a one-line `UsageError` naming `what`
    when no such directory exists."""
    check_text(raw, what, empty=False)
    from pathlib import Path

    path = Path(raw).expanduser().resolve()
    if not path.is_dir():
        raise UsageError(f"{what} {raw}: no such directory")
    return str(path)
