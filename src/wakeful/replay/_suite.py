"""An eval suite (`SUITE.toml`, docs/replay.md): models with their limits, cases written inline
and cases selected from recorded sessions (by id, search query, tag or metadata), each with its
graders. Read once into `Suite`; the resolved cases are the run's inputs.

Invariant: every mistake in a suite (a bad key, a grader that cannot load, a session that does
not exist, a selection that finds nothing) is a `UsageError` naming where it is, raised before
a run is created.
"""

from __future__ import annotations

import hashlib
import re
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import JsonValue

from ..errors import NotFoundError, UsageError
from ..events import EvalCase
from ..store import SqlStore
from ._engine import Limits
from ._graders import check_grader
from ._source import pick, step_receipts

_TOP = {"name", "models", "cases", "select"}
_CASE = {
    "id",
    "prompt",
    "system",
    "mode",
    "session",
    "turn",
    "step",
    "location",
    "graders",
    "to_end",
}
_SELECT = {"sessions", "query", "tag", "metadata", "limit", "turn", "step", "graders", "id"}
_MODEL = {"spec", "concurrency", "rpm"}
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,127}$")
DEFAULT_SELECT_LIMIT = 50
RUN_META = ("eval", "replay", "eval_run")  # metadata keys of sessions runs create: never cases


@dataclass(frozen=True, slots=True)
class Suite:
    """A suite read and resolved: its name, models, per-model limits, cases, and the digest
    that names its runs (the file's text with the resolved case list)."""

    name: str
    path: Path
    models: tuple[str, ...]
    limits: dict[str, Limits]
    cases: tuple[EvalCase, ...]
    digest: str


def _table(value: object, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise UsageError(f"{where}: expected a table")
    return value


def _keys(table: Mapping[str, object], allowed: set[str], where: str) -> None:
    extra = set(table) - allowed
    if extra:
        raise UsageError(f"{where}: unknown key(s) {', '.join(sorted(extra))}")


def _models(raw: object) -> tuple[tuple[str, ...], dict[str, Limits]]:
    if not isinstance(raw, list) or not raw:
        raise UsageError("suite: `models` must list at least one model spec")
    specs, limits = [], {}
    for n, item in enumerate(raw, 1):
        if isinstance(item, str):
            specs.append(item)
            continue
        table = _table(item, f"models[{n}]")
        _keys(table, _MODEL, f"models[{n}]")
        spec = table.get("spec")
        if not isinstance(spec, str):
            raise UsageError(f"models[{n}]: `spec` (a model spec string) is required")
        concurrency, rpm = table.get("concurrency", 4), table.get("rpm")
        if not isinstance(concurrency, int) or concurrency < 1:
            raise UsageError(f"models[{n}]: concurrency must be a whole number >= 1")
        if rpm is not None and (not isinstance(rpm, int | float) or rpm <= 0):
            raise UsageError(f"models[{n}]: rpm must be a number > 0")
        specs.append(spec)
        limits[spec] = Limits(concurrency, float(rpm) if rpm is not None else None)
    if len(set(specs)) != len(specs):
        raise UsageError("suite: a model is listed twice")
    return tuple(specs), limits


def _graders(table: Mapping[str, Any], where: str, base: Path) -> tuple[dict[str, JsonValue], ...]:
    graders = table.get("graders", [])
    if not isinstance(graders, list):
        raise UsageError(f"{where}: `graders` must be a list of tables")
    for n, g in enumerate(graders, 1):
        check_grader(_table(g, f"{where} grader {n}"), f"{where} grader {n}", base)
    return tuple(graders)


def _resolve(store: SqlStore, ref: str, where: str) -> str:
    try:
        return store.resolve_session_id(ref)
    except NotFoundError:
        raise UsageError(f"{where}: no session {ref}") from None


def _step_case(
    store: SqlStore,
    sid: str,
    case_id: str,
    turn: object,
    step: object,
    where: str,
    graders: tuple[dict[str, JsonValue], ...],
) -> EvalCase:
    """A `replay` case of a recorded step (turn default the last, step default 1)."""
    if turn not in (None, "last") and not isinstance(turn, int):
        raise UsageError(f'{where}: turn must be a number or "last"')
    if step is not None and not isinstance(step, int):
        raise UsageError(f"{where}: step must be a number")
    steps = step_receipts(store, sid)
    try:
        at = pick(steps, turn if isinstance(turn, int) else None, step or 1, None)
    except NotFoundError as err:
        raise UsageError(f"{where}: {sid}: {err}") from None
    chosen = steps[at]
    return EvalCase(
        id=case_id,
        kind="replay",
        session_id=sid,
        receipt_id=chosen.receipt.receipt_id,
        turn=chosen.turn,
        step=chosen.receipt.step,
        graders=graders,
    )


def _inline(store: SqlStore, table: dict[str, Any], n: int, base: Path) -> EvalCase:
    where = f"cases[{n}]"
    _keys(table, _CASE, where)
    case_id = str(table.get("id", f"case-{n}"))
    if not _ID.match(case_id):
        raise UsageError(f"{where}: id {case_id!r}: letters, digits and _ . : / - only")
    where = f"case {case_id}"
    graders = _graders(table, where, base)
    mode = table.get("mode", "prompt")
    if "session" in table:
        if mode not in ("prompt", "replay", "fork"):
            raise UsageError(f'{where}: a recorded session\'s mode is "replay" or "fork"')
        sid = _resolve(store, str(table["session"]), where)
        case = _step_case(store, sid, case_id, table.get("turn"), table.get("step"), where, graders)
        if mode == "fork":
            return case.model_copy(update={"kind": "fork", "to_end": table.get("to_end") is True})
        return case
    prompt = table.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        raise UsageError(f"{where}: give a `prompt` or a recorded `session`")
    if mode not in ("prompt", "turn"):
        raise UsageError(f'{where}: mode must be "prompt" or "turn"')
    location = table.get("location")
    if location is not None:
        root = (base / str(location)).resolve()
        if not root.is_dir():
            raise UsageError(f"{where}: location {root} is not a directory")
        location = str(root)
    return EvalCase(
        id=case_id,
        kind=mode,
        prompt=prompt,
        system=table.get("system"),
        location=location if mode == "turn" else None,
        graders=graders,
    )


def _all_sessions(store: SqlStore) -> Iterator[str]:
    cursor: str | None = None
    while True:
        page = store.list_sessions(roots_only=False, archived=None, limit=200, cursor=cursor)
        yield from (row.id for row in page.sessions)
        if page.next_cursor is None:
            return
        cursor = page.next_cursor


def _selected(store: SqlStore, table: dict[str, Any], where: str) -> list[str]:
    limit = table.get("limit", DEFAULT_SELECT_LIMIT)
    if not isinstance(limit, int) or limit < 1:
        raise UsageError(f"{where}: limit must be a whole number >= 1")
    if "sessions" in table:
        return [_resolve(store, str(s), where) for s in table["sessions"]][:limit]
    if "query" in table:
        ids = [h.session.id for h in store.search(str(table["query"]), limit=limit).hits]
    else:
        ids = list(_all_sessions(store))
    tag, meta = table.get("tag"), _table(table.get("metadata", {}), f"{where} metadata")
    found = []
    for sid in ids:
        data = store.metadata(sid)
        if any(k in data for k in RUN_META):
            continue
        tags = data.get("tags")
        if tag is not None and not (isinstance(tags, list) and tag in tags):
            continue
        if any(data.get(k) != v for k, v in meta.items()):
            continue
        found.append(sid)
        if len(found) == limit:
            break
    return found


def _selection(store: SqlStore, table: dict[str, Any], n: int, base: Path) -> list[EvalCase]:
    where = f"select[{n}]"
    _keys(table, _SELECT, where)
    if not {"sessions", "query", "tag", "metadata"} & set(table):
        raise UsageError(f"{where}: select by sessions, query, tag or metadata")
    graders = _graders(table, where, base)
    prefix = str(table.get("id", f"select{n}"))
    cases = []
    for sid in _selected(store, table, where):
        try:
            cases.append(
                _step_case(
                    store,
                    sid,
                    f"{prefix}/{sid}",
                    table.get("turn"),
                    table.get("step"),
                    where,
                    graders,
                )
            )
        except UsageError:
            if "sessions" in table:  # named outright: its missing step is an error
                raise
    if not cases:
        raise UsageError(f"{where}: no recorded session matches")
    return cases


def load_suite(store: SqlStore, path: Path) -> Suite:
    """Read and resolve the suite at `path` against `store` (see the module docstring)."""
    try:
        text = path.read_text(encoding="utf-8")
        data = tomllib.loads(text)
    except FileNotFoundError:
        raise UsageError(f"no suite file {path}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise UsageError(f"{path}: not a TOML suite: {err}") from None
    _keys(data, _TOP, str(path))
    models, limits = _models(data.get("models"))
    base = path.parent.resolve()
    cases: list[EvalCase] = []
    for n, table in enumerate(data.get("cases", []), 1):
        cases.append(_inline(store, _table(table, f"cases[{n}]"), n, base))
    for n, table in enumerate(data.get("select", []), 1):
        cases += _selection(store, _table(table, f"select[{n}]"), n, base)
    if not cases:
        raise UsageError(f"{path}: no cases (add [[cases]] or [[select]])")
    ids = [c.id for c in cases]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise UsageError(f"{path}: case id(s) used twice: {', '.join(dupes)}")
    resolved = "\n".join(c.model_dump_json() for c in cases)
    digest = hashlib.sha256(f"{text}\0{resolved}".encode()).hexdigest()
    name = str(data.get("name", path.stem))
    return Suite(name, path, models, limits, tuple(cases), digest)
