"""The one grammar of the command line (docs/cli.md, "One grammar"): a command that acts on one
session takes it as its first positional argument (`--session` stays an accepted alias); a turn
is named by its number or a unique prefix of its id; `--format` choices come from one list
(`_common.FORMATS`); the root group takes `--db` before the subcommand. `tests/cli/test_grammar.py` walks every
command's `--help` and holds each to it."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import click

from ..errors import UsageError
from ._common import ID, check_text

if TYPE_CHECKING:
    from ..store import Store

_F = TypeVar("_F", bound=Callable[..., Any])


def session_first(
    *rest: str,
    required: int | None = None,
    session_required: bool = True,
    lone_is_rest: bool = False,
    dest: str = "session",
) -> Callable[[_F], _F]:
    """The positional arguments `SESSION REST...` of a command acting on one session, with a
    hidden `--session` alias: the callback gets `dest` (the session as typed, or None) and each
    name of `rest` (None when not given). `required`: how many of `rest` must be given
    (default all). `lone_is_rest`: without `--session`, as many positionals as `rest` has are
    `rest` (`run PROMPT`; `run SESSION PROMPT`). A user mistake is a one-line `UsageError`."""
    need = len(rest) if required is None else required
    names = [n.upper() for n in rest]
    shown = " ".join(
        [("SESSION" if session_required else "[SESSION]")]
        + [n if i < need else f"[{n}]" for i, n in enumerate(names)]
    )

    def split(values: list[str], alias: str | None) -> dict[str, str | None]:
        session: str | None = alias
        if alias is None and values and not (lone_is_rest and len(values) <= len(rest)):
            session = values.pop(0)
        if session is None and session_required:
            raise UsageError("missing SESSION: a session id, or a unique prefix of one")
        if len(values) > len(rest):
            raise UsageError(
                f"unexpected argument {values[len(rest)]!r} (usage: {shown}; give the session "
                "once, as SESSION or --session)"
            )
        if len(values) < need:
            raise UsageError(f"missing {names[len(values)]} (usage: {shown})")
        check_text(session, "SESSION", empty=False)
        for name, value in zip(names, values, strict=False):
            check_text(value, name)
        out: dict[str, str | None] = {dest: session}
        out |= {name: (values[i] if i < len(values) else None) for i, name in enumerate(rest)}
        return out

    def decorate(f: _F) -> _F:
        @functools.wraps(f)
        def wrapper(
            *args: Any, positional: tuple[str, ...], session_alias: str | None, **kw: Any
        ) -> Any:
            return f(*args, **kw, **split(list(positional), session_alias))

        wrapper = click.option(
            "--session",
            "session_alias",
            metavar="SESSION",
            type=ID,
            hidden=True,
            help="The session (an alias of the SESSION argument).",
        )(wrapper)
        wrapper = click.argument("positional", nargs=-1, metavar=shown)(wrapper)
        return wrapper  # type: ignore[return-value]  # the callback click calls; same signature to callers

    return decorate


class _Turn(click.ParamType):  # type: ignore[type-arg]  # (generic since click 8.3)
    """`--turn`: a turn's number (1 = the session's first) or a unique prefix of its id."""

    name = "turn"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        """`value` as typed, once it is non-empty storable text (resolved by `resolve_turn`)."""
        check_text(value, "--turn", empty=False)
        return str(value).strip()


TURN = _Turn()
TURN_HELP = "number (1 = the first) or a unique prefix of its id"


def resolve_prefix(ids: Sequence[str], ref: str, what: str, mark: str) -> str:
    """The one id of `ids` that is `ref` or starts with it (`mark`, the ids' own prefix such
    as `sch_`, may be left out); none or several is a one-line `UsageError` naming `what`."""
    key = ref if ref.startswith(mark) else f"{mark}{ref}"
    if key in ids:
        return key
    found = [i for i in ids if i.startswith(key)]
    if not found:
        raise UsageError(f"no {what} {ref}")
    if len(found) > 1:
        raise UsageError(f"{what} id prefix {ref!r} is ambiguous: {', '.join(found)}")
    return found[0]


def resolve_turn(turn_ids: Sequence[str], ref: str) -> tuple[int, str]:
    """The turn `ref` names among `turn_ids` (the session's turns in start order): its number
    (1-based) and id. A number names by position; anything else is an id or a unique prefix
    (`turn_` may be left out). None, or several, is a one-line `UsageError`."""
    if ref.isdigit():
        number = int(ref)
        if not 1 <= number <= len(turn_ids):
            raise UsageError(f"no turn {ref}: the session has {len(turn_ids)} turn(s)")
        return number, turn_ids[number - 1]
    turn_id = resolve_prefix(turn_ids, ref, "turn", "turn_")
    return turn_ids.index(turn_id) + 1, turn_id


def root_db(ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    """`wakeful --db URL COMMAND`: the store of every subcommand (its own `--db` still wins),
    passed down as `$WAKEFUL_DB`, which every `--db` reads (and child processes inherit)."""
    if value is not None:
        check_text(value, "--db", empty=False)
        os.environ["WAKEFUL_DB"] = value
    return value


def turn_ids(store: Store, session_id: str) -> list[str]:
    """The session's turn ids in start order (what `--turn N` counts)."""
    return [
        getattr(e.event, "turn_id", "") for e in store.events(session_id, types=("turn.started",))
    ]


def turn_number(store: Store, session_id: str, ref: str) -> int:
    """The number of the turn `ref` names in the session (`resolve_turn`); a number as it
    is (the caller says when no such turn has what it needs)."""
    return int(ref) if ref.isdigit() else resolve_turn(turn_ids(store, session_id), ref)[0]
