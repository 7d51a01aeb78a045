"""Graders: what decides whether a reply passes. One table per grader in a suite (`kind = ...`):

| kind | keys | passes when |
| --- | --- | --- |
| `contains` | `value`, `ignore_case` | the reply text holds `value` |
| `regex` | `pattern` | `re.search(pattern, text)` finds a match |
| `json_schema` | `schema` | the text (a fenced block's body, if any) is JSON valid against `schema` |
| `tool_called` | `name`, `arguments` | a tool call of `name` whose input holds every `arguments` key with that value |
| `python` | `function` (`module:name` or `file.py:name`) | the function returns True (or `(True, why)`) for the result and the case |
| `judge` | `model`, `rubric` | the judge model's answer starts with PASS |

Invariant: a grader never raises for a bad reply; it fails the reply with a reason. A bad grader
table is a `UsageError` when the suite is read, naming the case, before anything runs.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import re
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

from pydantic import JsonValue

from ..errors import UsageError
from ..events import CaseResult, EvalCase, Grade

KINDS = ("contains", "regex", "json_schema", "tool_called", "python", "judge")
_REQUIRED = {
    "contains": ("value",),
    "regex": ("pattern",),
    "json_schema": ("schema",),
    "tool_called": ("name",),
    "python": ("function",),
    "judge": ("model", "rubric"),
}
_ALLOWED = {"contains": {"ignore_case"}, "tool_called": {"arguments"}}

# A judge: (judge model spec, question) -> the judge's answer text.
Judge = Callable[[str, str], Awaitable[str]]
JUDGE_SYSTEM = (
    "You grade an AI assistant's reply against a rubric. Answer PASS or FAIL on the first "
    "line, then one line saying why."
)


def check_grader(spec: Mapping[str, JsonValue], where: str, base: Path) -> None:
    """Raise `UsageError` (naming `where`) unless `spec` is a usable grader table."""
    kind = spec.get("kind")
    if kind not in KINDS:
        raise UsageError(f"{where}: grader kind {kind!r}; expected one of {', '.join(KINDS)}")
    missing = [k for k in _REQUIRED[str(kind)] if k not in spec]
    if missing:
        raise UsageError(f"{where}: a {kind} grader needs {', '.join(missing)}")
    extra = set(spec) - {"kind", *_REQUIRED[str(kind)], *_ALLOWED.get(str(kind), ())}
    if extra:
        raise UsageError(f"{where}: unknown key(s) {', '.join(sorted(extra))} of a {kind} grader")
    if kind == "regex":
        try:
            re.compile(str(spec["pattern"]))
        except re.error as err:
            raise UsageError(f"{where}: bad regex {spec['pattern']!r}: {err}") from None
    if kind == "json_schema":
        _check_schema(spec["schema"], where)
    if kind == "python":
        load_function(str(spec["function"]), base, where)


def _check_schema(schema: JsonValue, where: str) -> None:
    try:
        import jsonschema
    except ImportError:
        raise UsageError(
            f"{where}: the json_schema grader needs the jsonschema package "
            "(pip install 'wakeful[eval]')"
        ) from None
    if not isinstance(schema, dict | bool):
        raise UsageError(f"{where}: a JSON schema is a table (or true/false)")
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as err:
        raise UsageError(f"{where}: bad JSON schema: {err.message}") from None


def load_function(ref: str, base: Path, where: str) -> Callable[..., Any]:
    """The function `module:name` (importable) or `file.py:name` (relative to `base`)."""
    target, sep, name = ref.rpartition(":")
    if not sep or not target or not name:
        raise UsageError(f"{where}: function {ref!r}: expected module:name or file.py:name")
    try:
        if target.endswith(".py"):
            path = (base / target).resolve()
            loaded = importlib.util.spec_from_file_location(f"wakeful_grader_{path.stem}", path)
            if loaded is None or loaded.loader is None or not path.is_file():
                raise UsageError(f"{where}: no grader file {path}")
            module = importlib.util.module_from_spec(loaded)
            loaded.loader.exec_module(module)
        else:
            module = importlib.import_module(target)
    except UsageError:
        raise
    except Exception as err:  # the user's module failed to import: say so in one line
        raise UsageError(f"{where}: cannot load {target}: {type(err).__name__}: {err}") from None
    function = getattr(module, name, None)
    if not callable(function):
        raise UsageError(f"{where}: {target} has no function {name!r}")
    return function  # type: ignore[no-any-return]


def _json_text(text: str) -> str:
    fenced = re.search(r"```(?:json)?\s*\n(.*?)```", text, re.DOTALL)
    return fenced.group(1) if fenced else text


def _subset(want: JsonValue, have: JsonValue) -> bool:
    if isinstance(want, dict) and isinstance(have, dict):
        return all(k in have and _subset(v, have[k]) for k, v in want.items())
    return want == have


def _contains(spec: Mapping[str, JsonValue], result: CaseResult) -> tuple[bool, str]:
    value, text = str(spec["value"]), result.text
    if spec.get("ignore_case"):
        value, text = value.lower(), text.lower()
    return value in text, f"{'has' if value in text else 'lacks'} {str(spec['value'])!r}"


def _regex(spec: Mapping[str, JsonValue], result: CaseResult) -> tuple[bool, str]:
    found = re.search(str(spec["pattern"]), result.text) is not None
    return found, f"/{spec['pattern']}/ {'matches' if found else 'does not match'}"


def _json_schema(spec: Mapping[str, JsonValue], result: CaseResult) -> tuple[bool, str]:
    import jsonschema

    try:
        value = json.loads(_json_text(result.text))
    except ValueError as err:
        return False, f"not JSON: {err}"
    schema = spec["schema"]
    assert isinstance(schema, dict | bool)  # `check_grader` held it
    errors = list(jsonschema.Draft202012Validator(schema).iter_errors(value))
    return not errors, errors[0].message if errors else "valid"


def _tool_called(spec: Mapping[str, JsonValue], result: CaseResult) -> tuple[bool, str]:
    name, want = str(spec["name"]), spec.get("arguments") or {}
    calls = [c for c in result.tool_calls if c.name == name]
    if not calls:
        made = ", ".join(c.name for c in result.tool_calls) or "none"
        return False, f"no call of {name} (calls: {made})"
    if any(_subset(want, c.input) for c in calls):
        return True, f"called {name}"
    return False, f"{name} called with other arguments: {json.dumps(calls[0].input)[:200]}"


_PURE = {
    "contains": _contains,
    "regex": _regex,
    "json_schema": _json_schema,
    "tool_called": _tool_called,
}


def _python(
    spec: Mapping[str, JsonValue], result: CaseResult, case: EvalCase, base: Path
) -> tuple[bool, str]:
    function = load_function(str(spec["function"]), base, f"case {case.id}")
    try:
        verdict = function(result, case)
    except Exception as err:  # the user's grader failed: the reply fails, saying why
        return False, f"{spec['function']} raised {type(err).__name__}: {err}"
    if isinstance(verdict, tuple) and len(verdict) == 2:
        return bool(verdict[0]), str(verdict[1])
    return bool(verdict), f"{spec['function']} returned {verdict!r}"


async def _judge(
    spec: Mapping[str, JsonValue], result: CaseResult, case: EvalCase, judge: Judge
) -> tuple[bool, str]:
    calls = "; ".join(f"{c.name}({json.dumps(c.input)})" for c in result.tool_calls) or "none"
    question = (
        f"Rubric:\n{spec['rubric']}\n\nThe user asked:\n{case.prompt or '(a recorded request)'}"
        f"\n\nThe assistant replied:\n{result.text}\n\nTool calls: {calls}"
    )
    answer = (await judge(str(spec["model"]), question)).strip()
    first, _, why = answer.partition("\n")
    passed = first.strip().upper().startswith("PASS")
    return passed, (why.strip() or first.strip())[:300]


async def grade(
    specs: tuple[dict[str, JsonValue], ...],
    result: CaseResult,
    case: EvalCase,
    *,
    base: Path,
    judge: Judge,
) -> tuple[Grade, ...]:
    """Every grader's verdict on `result` (none when the request failed: the error decides)."""
    if result.error is not None:
        return ()
    grades = []
    for spec in specs:
        kind = str(spec["kind"])
        if kind in _PURE:
            passed, detail = _PURE[kind](spec, result)
        elif kind == "python":
            passed, detail = _python(spec, result, case, base)
        else:
            try:
                passed, detail = await _judge(spec, result, case, judge)
            except Exception as err:  # the judge's failure fails the grade, not the run
                passed, detail = False, f"judge failed: {type(err).__name__}: {err}"
        grades.append(Grade(grader=kind, passed=passed, detail=detail))
    return tuple(grades)
