"""The API document tells the truth, checked with software we did not write.

Every operation of `/openapi.json` is called on a real server holding a session with every block
kind the runtime writes (text, thinking, tool call and result, image, document, audio, summary,
a truncated reply); each JSON response is validated against the schema the document gives for its
status with `openapi-schema-validator`, and each SSE event against the event schema. Then a
client generated from the document by `openapi-python-client` (offline, into a temp directory)
reads the messages back as typed blocks with their fields.
"""

from __future__ import annotations

import base64
import hashlib
import importlib
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from openapi_schema_validator import OAS31Validator

from tests.server.conftest import SENSITIVE, TOKEN, MakeServer, Served, script, wait_for

PNG = base64.b64encode(
    base64.b64decode(
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
    )
).decode()
RULES: list[dict[str, Any]] = [
    {"match": "^Summarize the conversation", "replies": [{"text": "Summary: notes, a story."}]},
    {
        "match": "read",
        "replies": [
            {
                "reasoning": "The notes are in a file.",
                "tool_calls": [{"name": "read_file", "input": {"path": "notes.txt"}}],
            },
            {"text": "The notes say alpha."},
        ],
    },
    {"match": "story", "replies": [{"text": "Once upon a", "finish": "length"}]},
    {"match": ".", "replies": [{"text": "Noted."}]},
]


class Document:
    """`/openapi.json` and a validator per (path, method, status, media type)."""

    def __init__(self, doc: dict[str, Any]) -> None:
        self.doc = doc
        self.seen: set[tuple[str, str]] = set()

    def schema(self, path: str, method: str, status: int, media: str) -> dict[str, Any]:
        responses = self.doc["paths"][path][method.lower()]["responses"]
        assert str(status) in responses, f"{method} {path} answered {status}, not documented"
        content = responses[str(status)]["content"]
        assert media in content, f"{method} {path} {status}: {media} not documented"
        return dict(content[media]["schema"]) | {"components": self.doc["components"]}

    def check(self, path: str, response: httpx.Response) -> httpx.Response:
        """Validate a JSON response against its documented schema; return it."""
        method = response.request.method
        self.seen.add((path, method.lower()))
        schema = self.schema(path, method, response.status_code, "application/json")
        OAS31Validator(schema).validate(response.json())
        return response

    def check_stream(self, path: str, response: httpx.Response) -> list[dict[str, Any]]:
        """Validate every event of an SSE response against the event schema; return them."""
        method = response.request.method
        self.seen.add((path, method.lower()))
        schema = self.schema(path, method, response.status_code, "text/event-stream")
        events = list(_sse(response.text))
        assert events, f"{path}: no events"
        for event in events:
            OAS31Validator(schema).validate(event)
            json.loads(event["data"])
        return events


def _sse(text: str) -> Iterator[dict[str, Any]]:
    for frame in text.replace("\r\n", "\n").split("\n\n"):
        event: dict[str, Any] = {}
        for line in frame.split("\n"):
            if not line or line.startswith(":"):
                continue
            name, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if name == "retry":
                event[name] = int(value)
            else:
                event[name] = (
                    event[name] + "\n" + value if name == "data" and name in event else value
                )
        if "data" in event:
            yield event


@pytest.fixture
def served(make_server: MakeServer, tmp_path: Path) -> Served:
    server = make_server(model=script(tmp_path, RULES))
    (server.runtime.workspace / "notes.txt").write_text("alpha\n")
    return server


def _rich_session(c: httpx.Client, doc: Document) -> str:
    """A session whose transcript holds every block kind the runtime writes."""
    made = doc.check(
        "/sessions",
        c.post(
            "/sessions",
            json={"title": "everything", "prompt": {"text": "read the notes", "wait": True}},
        ),
    )
    sid = made.json()["session"]["id"]
    prompt = "/sessions/{session_id}/prompt"
    media = [
        {"type": "text", "text": "a story about these"},
        {"type": "image", "media_type": "image/png", "data": PNG, "name": "dot.png"},
        {"type": "document", "media_type": "text/plain", "data": "aGk=", "name": "a.txt"},
        {"type": "audio", "media_type": "audio/wav", "data": "UklGRg=="},
    ]
    r = doc.check(prompt, c.post(f"/sessions/{sid}/prompt", json={"blocks": media, "wait": True}))
    assert r.json()["turns"][0]["truncated"] is True
    queued = {"text": "later", "resume": False, "delivery": "queue"}
    doc.check(prompt, c.post(f"/sessions/{sid}/prompt", json=queued))
    compact = doc.check(
        "/sessions/{session_id}/compact",
        c.post(f"/sessions/{sid}/compact", json={"tail_turns": 0, "resume": True}),
    )
    assert compact.status_code == 202
    wait_for(
        lambda: any(
            b["type"] == "compact_summary"
            for m in c.get(f"/sessions/{sid}/messages").json()["messages"]
            for b in m["message"]["blocks"]
        ),
        what="the compaction summary",
    )
    return str(sid)


def test_every_live_response_validates_against_the_document(served: Served) -> None:
    c = served.client()
    doc = Document(c.get("/openapi.json").json())
    doc.check("/health", c.get("/health"))
    sid = _rich_session(c, doc)
    one = "/sessions/{session_id}"
    kinds = {
        b["type"]
        for m in doc.check(f"{one}/messages", c.get(f"/sessions/{sid}/messages")).json()["messages"]
        for b in m["message"]["blocks"]
    }
    assert kinds >= {
        "text",
        "thinking",
        "tool_call",
        "tool_result",
        "image",
        "document",
        "audio",
        "compact_summary",
    }
    turns = doc.check(f"{one}/turns", c.get(f"/sessions/{sid}/turns")).json()["turns"]
    assert [t["truncated"] for t in turns][:2] == [False, True]
    for tail in ("", "/pending", "/usage", "/receipts"):
        doc.check(one + tail, c.get(f"/sessions/{sid}{tail}"))
    doc.check(f"{one}/log", c.get(f"/sessions/{sid}/log"))
    doc.check("/events", c.get("/events", params={"limit": 5}))
    follow = {"follow": "true", "idle_timeout": "0"}
    doc.check_stream(f"{one}/log", c.get(f"/sessions/{sid}/log", params=follow))
    doc.check_stream("/events", c.get("/events", params=follow))
    doc.check(f"{one}/log", c.get(f"/sessions/{sid}/log", headers={"Last-Event-ID": "x"}))
    # AG-UI (docs/server.md): the session's runs, and a run from a RunAgentInput
    doc.check_stream(f"{one}/agui", c.get(f"/sessions/{sid}/agui", params={"follow": "false"}))
    run = {
        "threadId": sid,
        "runId": "r1",
        "messages": [{"id": "u1", "role": "user", "content": "hello again"}],
    }
    doc.check_stream(f"{one}/agui", c.post(f"/sessions/{sid}/agui", json=run))
    doc.check(f"{one}/agui", c.post(f"/sessions/{sid}/agui", json=run | {"threadId": "x"}))
    digest = served.store.put_blob(base64.b64decode(PNG))
    c.post(
        f"/sessions/{sid}/prompt",
        json={
            "blocks": [{"type": "image", "media_type": "image/png", "ref": digest}],
            "wait": True,
        },
    )
    media = c.get(f"/sessions/{sid}/media/{digest}")  # bytes: the document says binary
    assert media.status_code == 200 and media.content == base64.b64decode(PNG)
    raw = doc.doc["paths"][f"{one}/media/{{digest}}"]["get"]["responses"]["200"]["content"]
    assert [s["schema"] for s in raw.values()] == [{"type": "string", "format": "binary"}]
    doc.seen.add((f"{one}/media/{{digest}}", "get"))
    doc.check("/sessions", c.get("/sessions", params={"q": "every"}))
    fork = doc.check(f"{one}/fork", c.post(f"/sessions/{sid}/fork", json={"title": "copy"}))
    copy = fork.json()["id"]
    doc.check(f"{one}/interrupt", c.post(f"/sessions/{copy}/interrupt"))
    here = str(served.runtime.workspace)
    doc.check(f"{one}/move", c.post(f"/sessions/{copy}/move", json={"location": here}))
    doc.check(f"{one}/move", c.post(f"/sessions/{copy}/move", json={"location": "/nope/x"}))
    doc.check(f"{one}/archive", c.post(f"/sessions/{copy}/archive"))
    doc.check(f"{one}/unarchive", c.post(f"/sessions/{copy}/unarchive"))
    doc.check(one, c.delete(f"/sessions/{copy}"))
    for bad in (c.get("/sessions/nope"), c.get("/sessions", params={"limit": 0})):
        doc.check("/sessions/{session_id}" if "nope" in str(bad.url) else "/sessions", bad)
    doc.check(f"{one}/approvals", c.get(f"/sessions/{sid}/approvals"))
    doc.check(f"{one}/context", c.get(f"/sessions/{sid}/context"))
    decide = c.post(f"/sessions/{sid}/approvals/call_none", json={"decision": "allow"})
    assert decide.status_code == 404  # nothing waits: a documented 404
    doc.check(f"{one}/approvals/{{call_id}}", decide)
    doc.check(f"{one}/budget", c.post(f"/sessions/{sid}/budget", json={"amount": "+1usd"}))
    doc.check(f"{one}/budget", c.post(f"/sessions/{sid}/budget", json={"amount": "1eur"}))
    _schedules(c, doc, sid, served)
    # shaping a session after the fact (docs/rewind.md)
    link = {"kind": "link", "uri": "https://example.com/x", "label": "x"}
    doc.check(f"{one}/artifacts", c.post(f"/sessions/{sid}/artifacts", json=link))
    doc.check(f"{one}/artifacts", c.get(f"/sessions/{sid}/artifacts", params={"kind": "link"}))
    doc.check("/artifacts", c.get("/artifacts", params={"uri": link["uri"]}))
    doc.check("/usage", c.get("/usage", params={"by": "model", "since": "7d"}))
    doc.check("/budgets", c.get("/budgets", params={"agent": "build"}))
    doc.check("/budgets", c.get("/budgets", params={"user": ""}))  # a documented 422
    doc.check(f"{one}/metadata", c.patch(f"/sessions/{sid}/metadata", json={"patch": {"a": 1}}))
    doc.check(f"{one}/metadata", c.get(f"/sessions/{sid}/metadata"))
    ext = f"{one}/extensions/{{namespace}}"
    doc.check(f"{ext}/{{key}}", c.put(f"/sessions/{sid}/extensions/ns/k", json={"value": [1]}))
    doc.check(ext, c.get(f"/sessions/{sid}/extensions/ns"))
    doc.check(f"{ext}/{{key}}", c.delete(f"/sessions/{sid}/extensions/ns/k"))
    stale = c.post(f"/sessions/{sid}/history", json={"revision": 0, "delete_turn": "turn_x"})
    assert stale.status_code == 409
    doc.check(f"{one}/history", stale)
    doc.check(f"{one}/rewind", c.post(f"/sessions/{sid}/rewind", json={}))
    doc.check(f"{one}/unrevert", c.post(f"/sessions/{sid}/unrevert", json={}))
    _host(c, doc, sid, served)
    _access(c, doc, sid)
    documented = {(p, m) for p, ops in doc.doc["paths"].items() for m in ops}
    assert documented - doc.seen == set()


def _access(c: httpx.Client, doc: Document, sid: str) -> None:
    """Who the caller is, users' tokens and share links (docs/access.md)."""
    shares = "/sessions/{session_id}/shares"
    link = c.post(f"/sessions/{sid}/shares", json={"expires": "1h"})
    doc.check(shares, link)
    doc.check(shares, c.get(f"/sessions/{sid}/shares"))
    doc.check("/shares/{share_id}", c.delete(f"/shares/{link.json()['share']['id']}"))
    doc.check("/whoami", c.get("/whoami"))
    made = c.post("/admin/tokens", json={"user": "ann", "scopes": ["read"]})
    doc.check("/admin/tokens", made)
    doc.check("/admin/tokens", c.get("/admin/tokens"))
    doc.check("/admin/tokens/{token_id}", c.delete(f"/admin/tokens/{made.json()['token']['id']}"))


def _host(c: httpx.Client, doc: Document, sid: str, served: Served) -> None:
    """What hosts that keep sessions write (docs/hosts.md), and their documented errors."""
    one = "/sessions/{session_id}"
    doc.check(one, c.patch(f"/sessions/{sid}", json={"title": "renamed"}))
    doc.check(one, c.patch(f"/sessions/{sid}", json={"title": "   "}))
    note = {
        "type": "message.added",
        "message": {"role": "user", "blocks": [{"type": "text", "text": "n"}]},
    }
    doc.check(f"{one}/events", c.post(f"/sessions/{sid}/events", json={"events": [note]}))
    doc.check(
        f"{one}/events",
        c.post(f"/sessions/{sid}/events", json={"events": [{"type": "turn.ended"}]}),
    )
    put = doc.check("/blobs", c.post("/blobs", json={"data": PNG}))
    digest = put.json()["digest"]
    got = served.client(SENSITIVE).get(f"/blobs/{digest}")
    assert got.status_code == 200 and got.content == base64.b64decode(PNG)
    raw = doc.doc["paths"]["/blobs/{digest}"]["get"]["responses"]["200"]["content"]
    assert [s["schema"] for s in raw.values()] == [{"type": "string", "format": "binary"}]
    doc.check("/blobs/{digest}", c.get(f"/blobs/{digest}"))  # 403: no sensitive scope
    doc.check("/prune", c.post("/prune", json={"older_than_ms": 0}))


def _schedules(c: httpx.Client, doc: Document, sid: str, served: Served) -> None:
    """Every schedule operation, with a fire recorded, and their documented errors."""
    from wakeful.execution import fire_due

    one = "/schedules/{schedule_id}"
    added = doc.check(
        "/schedules",
        c.post(
            "/schedules",
            json={"prompt": "tick", "every": "1s", "session_id": sid, "grace_ms": 60_000},
        ),
    )
    assert added.status_code == 201
    sch = added.json()["id"]
    doc.check("/schedules", c.post("/schedules", json={"prompt": "x", "cron": "nope"}))
    doc.check(
        "/schedules",
        c.post("/schedules", json={"prompt": "x", "every": "1s", "session_id": "ses_none"}),
    )
    wait_for(lambda: fire_due(served.store), what="the schedule's first fire")
    doc.check("/schedules", c.get("/schedules"))
    doc.check(one, c.get(f"/schedules/{sch}"))
    doc.check(one, c.get("/schedules/sch_none"))
    doc.check(f"{one}/pause", c.post(f"/schedules/{sch}/pause"))
    doc.check(f"{one}/resume", c.post(f"/schedules/{sch}/resume"))
    doc.check(one, c.delete(f"/schedules/{sch}"))
    doc.check(one, c.delete(f"/schedules/{sch}"))


def _generate_client(document: dict[str, Any], where: Path) -> Any:
    """Generate `wakeful_api` from the document with openapi-python-client, offline; import it."""
    where.mkdir()
    (where / "openapi.json").write_text(json.dumps(document))
    (where / "config.yaml").write_text(
        "post_hooks: []\nproject_name_override: wakeful_api\npackage_name_override: wakeful_api\n"
    )
    cli = Path(sys.executable).with_name("openapi-python-client")
    done = subprocess.run(
        [
            str(cli),
            "generate",
            "--path",
            "openapi.json",
            "--config",
            "config.yaml",
            "--meta",
            "none",
            "--output-path",
            "wakeful_api",
        ],
        cwd=where,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Warning" not in done.stdout + done.stderr, done.stdout + done.stderr
    sys.path.insert(0, str(where))
    try:
        return importlib.import_module("wakeful_api")
    finally:
        sys.path.remove(str(where))


def test_a_generated_client_reads_messages_back_with_their_block_types(
    served: Served, tmp_path: Path
) -> None:
    c = served.client()
    sid = _rich_session(c, Document(c.get("/openapi.json").json()))
    api = _generate_client(c.get("/openapi.json").json(), tmp_path / "gen")
    try:
        messages = importlib.import_module("wakeful_api.api.reads.messages")
        models = importlib.import_module("wakeful_api.models")
        with api.AuthenticatedClient(base_url=served.url, token=TOKEN) as client:
            page = messages.sync(session_id=sid, client=client)
        assert isinstance(page, models.MessagesOut)
        blocks = [b for m in page.messages for b in m.message.blocks]
        by_type = {type(b).__name__: b for b in blocks}
        assert {
            "TextBlock",
            "ThinkingBlock",
            "ToolCallBlock",
            "ToolResultBlock",
            "ImageBlock",
            "DocumentBlock",
            "AudioBlock",
            "CompactSummaryBlock",
        } <= set(by_type)
        call = by_type["ToolCallBlock"]
        assert (call.name, call.input_.to_dict()) == ("read_file", {"path": "notes.txt"})
        result = by_type["ToolResultBlock"]
        assert result.call_id == call.id and "alpha" in result.output
        assert by_type["ThinkingBlock"].text == "The notes are in a file."
        image = by_type["ImageBlock"]
        digest = hashlib.sha256(base64.b64decode(PNG)).hexdigest()  # stored once, by ref
        assert (image.media_type, image.ref, image.name) == ("image/png", digest, "dot.png")
        assert by_type["CompactSummaryBlock"].summary.startswith("Summary:")
        texts = [b.text for b in blocks if type(b).__name__ == "TextBlock"]
        assert "The notes say alpha." in texts and "Once upon a" in texts
        cut = [m.message for m in page.messages if m.message.metadata]
        assert any(m.metadata.to_dict().get("truncated") is True for m in cut)
    finally:
        for name in [n for n in sys.modules if n == "wakeful_api" or n.startswith("wakeful_api.")]:
            del sys.modules[name]
