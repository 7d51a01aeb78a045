"""`session export --to otel`: a recorded session as OTLP JSON that the OpenTelemetry protobuf
schema (the `opentelemetry-proto` package) accepts, with the GenAI inference-details events
carrying the recorded inputs and outputs, redactable, and received by a local collector."""

from __future__ import annotations

import base64
import copy
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tests.cli.conftest import Wk, write_script

READ = [
    {
        "match": ".",
        "replies": [
            {"tool_calls": [{"name": "read_file", "input": {"path": "a.txt"}}]},
            {"text": "the file says hello"},
        ],
    }
]
DETAILS = "gen_ai.client.inference.operation.details"
RULE = "Answer every question about files in exactly one sentence (otel-rule-7)."


def _validated(doc: dict[str, Any]) -> ExportTraceServiceRequest:
    """Parse OTLP JSON with the protobuf schema (unknown fields refused). OTLP/JSON spells
    trace and span ids in hex where proto3 JSON has base64: turned back first, as a collector
    does."""
    doc = copy.deepcopy(doc)
    for rs in doc["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for span in ss["spans"]:
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = base64.b64encode(bytes.fromhex(span[key])).decode()
    return json_format.Parse(json.dumps(doc), ExportTraceServiceRequest())


def _spans(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for rs in doc["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]


def _attrs(item: dict[str, Any]) -> dict[str, Any]:
    return {a["key"]: next(iter(a["value"].values())) for a in item["attributes"]}


@pytest.fixture
def recorded(wk: Wk, workdir: Path) -> str:
    (workdir / "a.txt").write_text("hello")
    (workdir / "AGENTS.md").write_text(RULE + "\n")
    out = wk("run", "--model", write_script(workdir, READ), "--format", "json", "read a.txt")
    session_id: str = json.loads(out.stdout)["session_id"]
    return session_id


def test_the_otlp_file_validates_and_holds_the_recorded_exchange(
    wk: Wk, workdir: Path, recorded: str
):
    out = workdir / "trace.json"
    wk("session", "export", recorded, "--to", "otel", "-o", str(out))
    doc = json.loads(out.read_text())
    request = _validated(doc)
    assert len(request.resource_spans[0].scope_spans[0].spans) == 6
    spans = _spans(doc)
    names = [s["name"] for s in spans]
    assert names[0] == "invoke_agent build" and names.count("execute_tool read_file") == 1
    assert [n.split()[0] for n in names] == [
        "invoke_agent",
        "step",
        "chat",
        "execute_tool",
        "step",
        "chat",
    ]
    by_id = {s["spanId"]: s for s in spans}
    turn, step1, chat1, tool, step2, chat2 = spans
    assert "parentSpanId" not in turn and {s["traceId"] for s in spans} == {turn["traceId"]}
    assert by_id[tool["parentSpanId"]] is step1 and by_id[chat2["parentSpanId"]] is step2
    assert _attrs(turn)["gen_ai.conversation.id"] == recorded
    assert _attrs(tool)["gen_ai.tool.call.result"] == "hello"
    assert _attrs(chat1)["gen_ai.operation.name"] == "chat"
    (event,) = chat2["events"]
    assert event["name"] == DETAILS
    inputs = json.loads(_attrs(event)["gen_ai.input.messages"])
    outputs = json.loads(_attrs(event)["gen_ai.output.messages"])
    assert [m["role"] for m in inputs] == ["user", "assistant", "tool"]
    assert inputs[0]["parts"] == [{"type": "text", "content": "read a.txt"}]
    assert inputs[2]["parts"][0]["response"] == "hello"
    assert outputs[0]["parts"] == [{"type": "text", "content": "the file says hello"}]
    (first,) = chat1["events"]
    assert json.loads(_attrs(first)["gen_ai.input.messages"])[0]["role"] == "user"
    again = workdir / "again.json"  # the same spans again: ids derived from the log
    wk("session", "export", recorded, "--to", "otel", "-o", str(again))
    assert json.loads(again.read_text()) == doc


def test_each_request_carries_the_system_instructions_and_tools_its_receipt_recorded(
    wk: Wk, workdir: Path, recorded: str
):
    out = workdir / "trace.json"
    wk("session", "export", recorded, "--to", "otel", "-o", str(out))
    doc = json.loads(out.read_text())
    _validated(doc)
    chats = [s for s in _spans(doc) if s["name"].startswith("chat ")]
    shown = wk("debug", "prompt", "--session", recorded, "--show-sensitive", "--format", "json")
    sections = json.loads(shown.stdout)["sections"]  # the last request, as `debug prompt` has it
    system = "\n\n".join(s["content"] for s in sections if s["id"].startswith("system."))
    assert RULE in system
    for chat in chats:
        details = _attrs(chat["events"][0])
        assert json.loads(details["gen_ai.system_instructions"]) == [
            {"type": "text", "content": system}
        ]
        tools = {t["name"]: t for t in json.loads(details["gen_ai.tool.definitions"])}
        assert tools["read_file"]["type"] == "function"
        assert "path" in tools["read_file"]["parameters"]["properties"]
        assert tools["read_file"]["description"]


def test_redact_keeps_the_shape_and_drops_the_content(wk: Wk, workdir: Path, recorded: str):
    out = workdir / "redacted.json"
    wk("session", "export", recorded, "--to", "otel", "--redact", "-o", str(out))
    text = out.read_text()
    doc = json.loads(text)
    _validated(doc)
    assert len(_spans(doc)) == 6
    assert "hello" not in text and "read a.txt" not in text and "a.txt" not in text
    event = _spans(doc)[5]["events"][0]
    inputs = json.loads(_attrs(event)["gen_ai.input.messages"])
    assert [m["role"] for m in inputs] == ["user", "assistant", "tool"]
    assert "otel-rule-7" not in text
    system = json.loads(_attrs(event)["gen_ai.system_instructions"])
    assert system == [{"type": "text", "content": "[redacted]"}]
    tools = json.loads(_attrs(event)["gen_ai.tool.definitions"])
    assert {"type": "function", "name": "read_file"} in tools
    assert all(set(t) == {"type", "name"} for t in tools)


class _Collector(BaseHTTPRequestHandler):
    received: list[tuple[str, str, bytes]] = []
    status = 200

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).received.append((self.path, self.headers["Content-Type"], body))
        self.send_response(type(self).status)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def collector() -> Iterator[tuple[str, type[_Collector]]]:
    handler = type("Handler", (_Collector,), {"received": [], "status": 200})
    server = HTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", handler
    server.shutdown()
    server.server_close()


def test_a_collector_receives_the_spans(wk: Wk, recorded: str, collector):
    url, handler = collector
    done = wk("session", "export", recorded, "--to", "otel", "--endpoint", url)
    assert done.stdout == "" and f"sent 6 spans of {recorded}" in done.stderr
    ((path, content_type, body),) = handler.received
    assert (path, content_type) == ("/v1/traces", "application/json")
    request = _validated(json.loads(body))
    spans = request.resource_spans[0].scope_spans[0].spans
    assert [s.name for s in spans][0] == "invoke_agent build" and len(spans) == 6


def test_a_collector_that_refuses_is_one_line(wk: Wk, recorded: str, collector):
    url, handler = collector
    handler.status = 503
    done = wk("session", "export", recorded, "--to", "otel", "--endpoint", url, check=False)
    assert done.returncode == 2 and "answered 503" in done.stderr and "Traceback" not in done.stderr
