"""OpenTelemetry spans of a tool-using turn, exported to the SDK's in-memory exporter: the
tree, the GenAI attributes, receipts that name their spans, and no prompt text by default."""

from __future__ import annotations

import json
from pathlib import Path

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from wakeful.execution import Runtime
from wakeful.runner import Tracing

SECRET = "the launch code is 0000"


def traced(tmp_path: Path, *, capture: bool = False) -> tuple[Runtime, InMemorySpanExporter]:
    script = tmp_path / "script.json"
    script.write_text(
        json.dumps(
            {
                "rules": [
                    {
                        "match": "^list",
                        "replies": [
                            {
                                "text": "looking",
                                "tool_calls": [
                                    {"name": "shell", "input": {"command": "echo hi"}},
                                    {"name": "shell", "input": {"command": "exit 3"}},
                                ],
                            },
                            {"text": "SECRET-REPLY all listed"},
                        ],
                    }
                ]
            }
        )
    )
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))

    async def allow(name: str, tool_input: dict[str, object]) -> bool:
        return True

    rt = Runtime(
        str(tmp_path / "s.db"),
        model=f"scripted:{script}",
        workspace=tmp_path,
        ask=allow,
        tracer_provider=provider,
    )
    if capture:
        rt.tracing = Tracing(provider, capture_content=True)
    return rt, exporter


def one(spans: list[ReadableSpan], name: str) -> ReadableSpan:
    [span] = [s for s in spans if s.name == name]
    return span


async def test_a_tool_using_turn_makes_the_span_tree(tmp_path: Path):
    rt, exporter = traced(tmp_path)
    [turn] = await rt.run(f"list the files; {SECRET}")
    assert turn.outcome == "completed"
    spans = list(exporter.get_finished_spans())
    chat = f"chat {tmp_path / 'script.json'}"  # the scripted provider's model is its script
    names = sorted(s.name for s in spans)
    assert names == sorted(
        [
            "invoke_agent build",
            "step 1",
            "step 2",
            chat,
            chat,
            "execute_tool shell",
            "execute_tool shell",
        ]
    )
    root = one(spans, "invoke_agent build")
    assert root.parent is None
    assert root.attributes is not None
    assert root.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert root.attributes["gen_ai.conversation.id"] == rt.store.list_sessions().sessions[0].id
    assert root.attributes["wakeful.turn_id"] == turn.turn_id
    assert root.attributes["wakeful.outcome"] == "completed"
    trace_id = root.context.trace_id
    assert {s.context.trace_id for s in spans} == {trace_id}
    steps = {s.name: s for s in spans if s.name.startswith("step ")}
    for step in steps.values():
        assert step.parent is not None and step.parent.span_id == root.context.span_id
    chats = [s for s in spans if s.name == chat]
    tools = [s for s in spans if s.name == "execute_tool shell"]
    step1 = steps["step 1"].context.span_id
    assert sorted(c.parent.span_id for c in chats if c.parent) == sorted(
        [step1, steps["step 2"].context.span_id]
    )
    assert all(t.parent is not None and t.parent.span_id == step1 for t in tools)
    first = next(c for c in chats if c.parent and c.parent.span_id == step1)
    attrs = dict(first.attributes or {})
    assert first.kind == SpanKind.CLIENT
    assert attrs["gen_ai.operation.name"] == "chat"
    assert attrs["gen_ai.provider.name"] == "scripted"
    assert attrs["gen_ai.request.model"] == str(tmp_path / "script.json")
    assert attrs["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert (
        isinstance(attrs["gen_ai.usage.input_tokens"], int)
        and attrs["gen_ai.usage.input_tokens"] > 0
    )
    assert isinstance(attrs["gen_ai.usage.output_tokens"], int)
    assert "gen_ai.usage.cache_read.input_tokens" in attrs
    tool_attrs = [dict(t.attributes or {}) for t in tools]
    assert {a["gen_ai.operation.name"] for a in tool_attrs} == {"execute_tool"}
    assert {a["gen_ai.tool.name"] for a in tool_attrs} == {"shell"}
    failed = [t for t in tools if t.status.status_code == StatusCode.ERROR]
    assert len(failed) == 1  # `exit 3` is an error result
    # Each step receipt names the trace and its step span.
    sid = rt.store.list_sessions().sessions[0].id
    receipts = [r for r in rt.store.receipts(sid) if r.purpose == "step"]
    assert [(r.trace_id, r.span_id) for r in receipts] == [
        (f"{trace_id:032x}", f"{steps[f'step {r.step}'].context.span_id:016x}") for r in receipts
    ]
    # No prompt text, reply text or tool input/output is exported by default.
    exported = json.dumps([s.to_json() for s in spans])
    assert SECRET not in exported and "SECRET-REPLY" not in exported and "echo hi" not in exported
    await rt.aclose()


async def test_content_is_exported_only_when_opted_in(tmp_path: Path):
    rt, exporter = traced(tmp_path, capture=True)
    await rt.run(f"list the files; {SECRET}")
    exported = json.dumps([s.to_json() for s in exporter.get_finished_spans()])
    assert "SECRET-REPLY all listed" in exported and "echo hi" in exported
    await rt.aclose()


async def test_without_a_configured_sdk_receipts_name_no_trace(tmp_path: Path):
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"rules": [{"match": ".", "replies": [{"text": "hi"}]}]}))
    rt = Runtime(str(tmp_path / "s.db"), model=f"scripted:{script}", workspace=tmp_path)
    [turn] = await rt.run("hello")
    assert turn.outcome == "completed"
    sid = rt.store.list_sessions().sessions[0].id
    assert [(r.trace_id, r.span_id) for r in rt.store.receipts(sid)] == [(None, None)]
    await rt.aclose()


async def test_a_turn_that_records_nothing_starts_no_spans_past_its_own(tmp_path: Path):
    """Issue 36: a turn whose span does not record (here: a sampler that drops every trace)
    is not followed past its start, and the next turn that records is traced whole."""
    from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ALWAYS_ON

    rt, exporter = traced(tmp_path)
    assert rt.tracing is not None
    provider = TracerProvider(sampler=ALWAYS_OFF)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    rt.tracing = Tracing(provider)
    started: list[str] = []
    child = rt.tracing._child

    def counted(parent: object, name: str, kind: object = None) -> object:
        started.append(name)
        return child(parent, name, kind)

    rt.tracing._child = counted  # type: ignore[method-assign]
    [turn] = await rt.run("list the files")
    assert turn.outcome == "completed" and exporter.get_finished_spans() == ()
    assert started == ["invoke_agent build"]  # the turn's own span only: not recording
    assert rt.tracing._quiet == set()  # its end forgot it
    provider = TracerProvider(sampler=ALWAYS_ON)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    rt.tracing = Tracing(provider)
    sid = rt.store.list_sessions().sessions[0].id
    [again] = await rt.run("list the files again", session_id=sid)
    names = {s.name for s in exporter.get_finished_spans()}
    assert again.outcome == "completed" and "invoke_agent build" in names
    assert any(n.startswith("step ") for n in names) and "execute_tool shell" in names
    await rt.aclose()
