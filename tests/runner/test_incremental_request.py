"""A step's request is built from what is new since the last one (the system sections kept, the
body's frame encoded once, no media pass without media, the scripted provider's turn located
from the new messages): over turns with read-only tool steps built ahead, retries, output cut
short and continued, and compactions, every recorded digest is the one the whole body hashes
to, rebuilt from the store, and every reply the one a whole walk of its request picks."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from wakeful.config import CompactionConfig, Config, RetryConfig
from wakeful.events import ReceiptRecorded
from wakeful.execution import Runtime
from wakeful.providers import ModelRequest, ScriptedProvider, make_provider
from wakeful.providers._scripted import ScriptedReply, ScriptedTurn, locate_turn
from wakeful.runner._prompt import canonical_json, rebuild_request

SUMMARY_RULE = {
    "match": "^Summarize the conversation below",
    "replies": [{"text": "## Objective\n- go on"}],
}
PAD = "lorem ipsum dolor sit amet " * 12  # ~80 tokens
CALL = {"tool_calls": [{"name": "goal_set", "input": {"goal": "g"}}]}


def runtime(tmp_path: Path) -> tuple[Runtime, str]:
    replies: list[dict[str, Any]] = [
        CALL,
        {"text": "cut " + PAD, "error": {"kind": "incomplete_stream", "after_chars": 20}},
        CALL,
        {"text": "busy", "error": {"kind": "rate_limit", "times": 2}},
        CALL,
        {"tool_calls": [{"name": "todo_write", "input": {"todos": [{"content": "x"}]}}]},
        {"text": "done " + PAD},
    ]
    path = tmp_path / "script.json"
    rules = [SUMMARY_RULE, {"match": ".", "replies": replies}]
    path.write_text(json.dumps({"rules": rules, "context_window": 6000, "max_output_tokens": 500}))
    config = Config(
        compaction=CompactionConfig(reserved=500, reuse_cache=False),
        retry=RetryConfig(initial_delay_ms=5, max_delay_ms=50, poll_interval_ms=5),
        loop_guard={"enabled": False},  # type: ignore[arg-type]
    )
    model = f"scripted:{path}"
    return Runtime(str(tmp_path / "s.db"), model=model, workspace=tmp_path, config=config), model


async def test_every_request_built_from_the_last_is_the_one_built_whole(
    tmp_path: Path, monkeypatch: Any
) -> None:
    located: list[tuple[ScriptedTurn, ScriptedTurn]] = []
    select = ScriptedProvider.select

    def spy(self: ScriptedProvider, request: ModelRequest) -> tuple[ScriptedTurn, ScriptedReply]:
        turn, reply = select(self, request)
        located.append((turn, locate_turn(request.messages)))  # the whole walk, as before
        return turn, reply

    monkeypatch.setattr(ScriptedProvider, "select", spy)
    rt, model = runtime(tmp_path)
    sid = None
    for i in range(16):
        turns = await rt.run(f"turn {i}: {PAD}{PAD}", session_id=sid)
        assert [t.outcome for t in turns] == ["completed"], turns
        sid = sid or rt.store.list_sessions().sessions[0].id
    assert sid is not None

    events = rt.store.events(sid)
    kinds = {e.event.type for e in events}
    assert {"compaction.ended", "retry.scheduled"} <= kinds, kinds
    assert any((m.metadata or {}).get("partial") for m in rt.store.messages(sid))
    assert len(located) > 80 and all(mine == whole for mine, whole in located)

    provider = make_provider(model)
    logged = [e.event for e in events if isinstance(e.event, ReceiptRecorded)]
    assert any(r.base is not None for r in logged) and any(
        r.purpose == "compaction" for r in logged
    )
    for receipt in logged:
        request = rebuild_request(rt.store, sid, receipt, provider.name)
        body = canonical_json(provider.wire_request(request)).encode()
        assert hashlib.sha256(body).hexdigest() == receipt.request_digest, receipt.receipt_id
    await rt.aclose()
