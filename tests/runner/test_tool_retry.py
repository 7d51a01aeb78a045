"""Tools safe to retry (issue 37 item 14): a transient failure (`ToolUnavailable`, or a timeout
of a read-only or idempotent tool) goes through the durable retry machinery, a
`retry.scheduled` (kind `tool_unavailable`) and its backoff before the call is made again, up
to `retry.max_retries`; a failure that may have partly run a tool that is not safe to retry, and
any other failure, stays a result for the model. On main every one was a result at once."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel

from wakeful.config import Config, RetryConfig
from wakeful.events import RetryScheduled
from wakeful.execution import Runtime
from wakeful.runner._runs import run_records
from wakeful.tools import ToolUnavailable, tool

FAST = RetryConfig(initial_delay_ms=2, max_delay_ms=10, poll_interval_ms=1, max_retries=2)
CALLS: dict[str, int] = {}


class Nothing(BaseModel):
    pass


def failing(name: str, times: int, error: BaseException, **kind: bool):  # type: ignore[no-untyped-def]
    """A tool that raises `error` on its first `times` calls, then answers "ok"."""

    def run(args: Nothing) -> str:
        CALLS[name] = CALLS.get(name, 0) + 1
        if CALLS[name] <= times:
            raise error
        return "ok"

    run.__doc__ = f"The {name} tool."
    return tool(name=name, **kind)(run)


TOOLS = [
    failing("fetch_once", 2, ToolUnavailable("the connection was lost"), idempotent=True),
    failing("always_down", 99, ToolUnavailable("still down"), idempotent=True),
    failing("charge", 1, ToolUnavailable("the connection was lost")),
    failing("charge_unsent", 1, ToolUnavailable("could not connect", sent=False)),
    failing("peek_slow", 1, TimeoutError("no answer in 5s"), read_only=True),
    failing("buggy", 1, ValueError("a bug"), idempotent=True),
]


async def run_call(tmp_path: Path, name: str) -> tuple[str, bool, list[RetryScheduled], Runtime]:
    CALLS.clear()
    script = tmp_path / f"{name}.json"
    script.write_text(
        json.dumps(
            {
                "rules": [
                    {
                        "match": ".",
                        "replies": [
                            {"tool_calls": [{"name": name, "input": {}}]},
                            {"text": "done"},
                        ],
                    }
                ]
            }
        )
    )
    config = Config(retry=FAST)
    rt = Runtime(
        str(tmp_path / f"{name}.db"),
        model=f"scripted:{script}",
        workspace=tmp_path,
        config=config,
        tools=TOOLS,
    )
    [turn] = await rt.run("go")
    assert turn.outcome == "completed"
    sid = rt.store.list_sessions().sessions[0].id
    [result] = [r for m in rt.store.messages(sid) for r in m.tool_results()]
    retries = [e.event for e in rt.store.events(sid, types=["retry.scheduled"])]
    return str(result.output), result.is_error, retries, rt  # type: ignore[return-value]


async def test_an_idempotent_tools_transient_failure_is_retried_durably(tmp_path: Path) -> None:
    output, is_error, retries, rt = await run_call(tmp_path, "fetch_once")
    assert (output, is_error, CALLS["fetch_once"]) == ("ok", False, 3)
    assert [(r.attempt, r.error_kind, r.max_attempts) for r in retries] == [
        (2, "tool_unavailable", 3),
        (3, "tool_unavailable", 3),
    ]
    assert all(r.delay_ms and 1 <= r.delay_ms <= 10 for r in retries)
    assert retries[0].error == "fetch_once: the connection was lost"
    sid = rt.store.list_sessions().sessions[0].id
    assert rt.store.retry_state(sid) is None  # the next reply cleared it
    [run] = run_records(rt.store, sid)
    assert [r["error_kind"] for r in run.retries] == ["tool_unavailable"] * 2
    await rt.aclose()


async def test_a_spent_budget_is_the_calls_error_result(tmp_path: Path) -> None:
    output, is_error, retries, rt = await run_call(tmp_path, "always_down")
    assert (output, is_error, CALLS["always_down"]) == ("still down", True, 3)
    assert [r.attempt for r in retries] == [2, 3]
    await rt.aclose()


async def test_a_tool_not_safe_to_retry_gets_its_failure_as_a_result(tmp_path: Path) -> None:
    output, is_error, retries, rt = await run_call(tmp_path, "charge")
    assert (output, is_error, CALLS["charge"], retries) == ("the connection was lost", True, 1, [])
    await rt.aclose()


async def test_a_call_never_sent_is_retried_whatever_the_tool(tmp_path: Path) -> None:
    output, is_error, retries, rt = await run_call(tmp_path, "charge_unsent")
    assert (output, is_error, CALLS["charge_unsent"], len(retries)) == ("ok", False, 2, 1)
    await rt.aclose()


async def test_a_read_only_tools_timeout_is_retried(tmp_path: Path) -> None:
    output, is_error, retries, rt = await run_call(tmp_path, "peek_slow")
    assert (output, is_error, CALLS["peek_slow"], len(retries)) == ("ok", False, 2, 1)
    assert retries[0].code == "TimeoutError"
    await rt.aclose()


async def test_any_other_failure_stays_a_result(tmp_path: Path) -> None:
    output, is_error, retries, rt = await run_call(tmp_path, "buggy")
    assert is_error and "ValueError: a bug" in output and retries == []
    assert CALLS["buggy"] == 1
    await rt.aclose()
