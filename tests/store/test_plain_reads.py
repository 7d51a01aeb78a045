"""The plain reading of stored bodies (`wakeful.events._plain`, issue 25, cold start) gives
exactly what the models give: every event kind, every block kind, bodies the store writes and
bodies it did not (older versions' and hand-edited ones, which go through the models), the
transcript with its deliveries, run records and waiting approvals, on both backends."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from wakeful.errors import NotFoundError, StoreError
from wakeful.events import (
    MESSAGE_ADDED_HEAD,
    SHAPES_DIGEST,
    ApprovalDecided,
    ApprovalRequested,
    MessageAdded,
    ReceiptRecorded,
    RetryScheduled,
    TurnEnded,
    TurnStarted,
    UsageRecorded,
    _shapes,
    dump_event,
    event_data,
    load_event,
    without_defaults,
)
from wakeful.events._plain import REQUIRED, render_shapes
from wakeful.messages import (
    Message,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    assistant,
    dump_message,
    message_from_dict,
    system,
)
from wakeful.runner import fold_approvals, run_records, waiting_requests
from wakeful.store import SqlStore, open_store
from wakeful.store._session_key import SESSION_KEY


def test_the_shapes_module_is_what_the_models_say() -> None:
    # Regenerate with: python -c 'from wakeful.events._plain import render_shapes;
    #   print(render_shapes(), end="")' > src/wakeful/events/_shapes.py
    assert Path(_shapes.__file__).read_text() == render_shapes()


def _dump(event: Any) -> str:
    """What the models give: the text a display printed before the plain reading."""
    return json.dumps(event.model_dump(mode="json", exclude_none=True))


def _value(
    kinds: tuple[str, ...], literals: tuple[str, ...], nested: tuple[str, ...], full: bool
) -> Any:
    if nested:
        items = [_sample(m, full) for m in nested]
        return items if "list" in kinds else items[0]
    if literals:
        return literals[-1]
    for kind, value in (
        ("str", "s\u00e9"),
        ("int", 7),
        ("float", 1.25),
        ("bool", True),
        ("list", []),
        ("dict", {"k": "v"}),
        ("any", {"x": None}),
    ):
        if kind in kinds:
            return value
    return None


def _sample(model: str, full: bool) -> dict[str, Any]:
    """A body of `model` with its required fields (and, `full`, every field) set."""
    out: dict[str, Any] = {}
    for name, default, kinds, literals, nested, _items, _least in _shapes.MODELS[model]:
        if name == "type" and literals:
            out[name] = literals[0]
        elif default is REQUIRED or full:
            out[name] = _value(kinds, literals, nested, full)
    if model.endswith(("ImageBlock", "AudioBlock", "VideoBlock", "DocumentBlock")):
        out.pop("ref" if full else "data", None)  # exactly one source
        out.setdefault("data", "aGk=")
    if model == "Message":
        out["id"] = "msg_1"
    return out


def _events() -> list[Any]:
    """Every event kind, with its required fields only and with every field set."""
    events = []
    for model in _shapes.EVENTS.values():
        for full in (False, True):
            body = _sample(model, full)
            # (a constraint the sampler does not know, e.g. a non-empty id, skips the body)
            with contextlib.suppress(StoreError):
                events.append(load_event(json.dumps(body)))
    return events


def test_every_event_kind_reads_plain_as_its_model_dumps_it() -> None:
    events = _events()
    assert {e.type for e in events} == set(_shapes.EVENTS)
    for event in events:
        body = dump_event(event)
        assert json.dumps(event_data(body)) == _dump(event), body


def test_bodies_the_store_did_not_write_read_as_the_models_read_them() -> None:
    turn = dump_event(TurnEnded(turn_id="t", outcome="failed", error="e", truncated=True))
    usage = dump_event(UsageRecorded(input_tokens=3, cost_usd=0.5))
    added = dump_event(MessageAdded(message=assistant("hi")))
    variants = [
        '{"v":1,"type":"turn.ended","turn_id":"t","outcome":"completed"}',  # older: no default
        json.dumps(dict(reversed(json.loads(turn).items()))),  # another key order
        usage.replace("0.5", "1"),  # an int where a float is declared
        usage.replace('"input_tokens":3', '"input_tokens":null'),  # invalid
        turn.replace('"error":"e"', '"error":null'),  # an explicit null
        added.replace('"aborted":false', '"aborted":false,"lane":null'),
        added.replace('"aborted":false,', ""),  # a nested default left out
        added.replace('"id":"', '"id":"x'),
        '{"v":1,"type":"turn.started","turn_id":"t","input_ids":["a",1]}',  # invalid inside a list
        '{"v":1,"type":"message.added","message":{"role":"user","blocks":[]}}',  # no id: minted
        '{"v":1,"type":"message.added","message":{"id":"m","role":"user","blocks":["x"]}}',
        added.replace('"text":"hi"', '"text":"hi","origin":"me"'),
        '{"v":1,"type":"tool.started","call_id":"","message_id":"m","name":"n"}',  # too short
    ]
    for body in variants:
        try:
            expected: Any = _dump(load_event(body))
        except StoreError as err:
            expected = str(err)
        try:
            got: Any = json.dumps(event_data(body))
        except StoreError as err:
            got = str(err)
        if "msg_" in expected and '"id"' not in body:
            assert json.loads(got)["message"]["id"].startswith("msg_")  # a fresh id, as before
            continue
        assert got == expected, body
    for bad in (
        '{"v":1,"type":"turn.started","turn_id":"t","extra":1}',
        '{"v":1,"type":"x"}',
        "[1]",
        "not json",
        '{"v":1,"type":"turn.ended","turn_id":"t","outcome":"won"}',
    ):
        with pytest.raises(StoreError, match="unreadable event"):
            event_data(bad)


def _messages() -> list[Message]:
    messages = []
    for model in _shapes.TYPES:
        for full in (False, True):
            block = _sample(model, full)
            if model == "ToolResultBlock":  # both forms of its output
                block["output"] = [_sample("TextBlock", full), _sample("ImageBlock", full)]
            messages.append(message_from_dict({"id": "m", "role": "assistant", "blocks": [block]}))
    messages.append(
        Message(
            role="user",
            blocks=(ToolResultBlock(call_id="c", output="", is_error=False),),
            metadata={"a": None},
            lane="l",
            aborted=True,
        )
    )
    messages.append(Message(role="assistant", blocks=(ToolCallBlock(id="c", name="n"),)))
    return messages


def test_a_plain_message_dumps_without_defaults_as_dump_message() -> None:
    for message in _messages():
        plain = event_data(dump_event(MessageAdded(message=message)))["message"]
        assert plain == message.model_dump(mode="json", exclude_none=True)
        dumped = json.dumps(without_defaults("Message", plain))
        assert dumped == json.dumps(json.loads(dump_message(message))), dumped


def _fill(store: SqlStore, *, blocks: bool = True) -> str:
    """A session with every way a message reaches the transcript, runs and approvals."""
    sid = store.create_session(title="plain").id
    call = ToolCallBlock(id="c1", name="shell", input={"command": "ls"})
    reply = Message(role="assistant", blocks=(TextBlock(text="let me"), call))
    store.append(
        sid,
        [
            TurnStarted(turn_id="t1", input_ids=("a",)),
            MessageAdded(message=system("instructions")),
            MessageAdded(message=reply, turn_id="t1"),
            UsageRecorded(input_tokens=10, output_tokens=3, cost_usd=0.1, cache_read_tokens=4),
            UsageRecorded(input_tokens=5, output_tokens=1, cost_usd=0.2),
            ReceiptRecorded(
                receipt_id="r", turn_id="t1", step=2, attempt=1, model="m", request_digest="d"
            ),
            RetryScheduled(
                turn_id="t1", step=1, attempt=2, deadline_ms=9, error_kind="k", error="e"
            ),
            TurnEnded(turn_id="t1", outcome="paused", error="waiting", truncated=True),
            ApprovalRequested(call_id="c1", message_id=reply.id, name="shell", preview="$ ls"),
            ApprovalRequested(call_id="c2", message_id=reply.id, name="grep", input={"p": "x"}),
            ApprovalDecided(call_id="c2", decision="always"),
        ],
    )
    store.admit(sid, "in1", "user", {"text": "typed", "metadata": {"via": "api", "n": None}})
    store.admit(sid, "in2", "user", {"text": "signal", "origin": {"kind": "signal", "source": "x"}})
    if blocks:  # read through the models (they may convert its values: `is_error: 1`)
        store.admit(
            sid,
            "in3",
            "user",
            {
                "blocks": [
                    {"text": "b", "type": "text"},
                    {"type": "tool_result", "call_id": "z", "output": "o", "is_error": 1},
                ]
            },
        )
    store.admit(sid, "in4", "compaction", {"reason": "manual"})  # a control item: no message
    for _ in range(4):
        store.promote(sid, idle=True)
    store.admit(sid, "in5", "user", {"text": "still waiting"})
    return sid


class _Models:
    """The store seen as any `Store` (a server's): readers take their model path."""

    def __init__(self, store: SqlStore) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def test_the_transcript_runs_and_approvals_read_plain_as_through_the_models(
    store: SqlStore,
) -> None:
    sid = _fill(store)
    messages = store.messages(sid)
    assert [m["blocks"][0].get("text") for m in store.plain_messages(sid)][-3:] == [
        "typed",
        "signal",
        "b",
    ]
    assert store.plain_messages(sid) == [
        m.model_dump(mode="json", exclude_none=True) for m in messages
    ]
    assert store.pending_ids(sid) == [p.input_id for p in store.pending(sid)] == ["in5"]
    plain = [r.to_json() for r in run_records(store, sid)]
    models = [r.to_json() for r in run_records(_Models(store), sid)]  # type: ignore[arg-type]
    assert plain == models and plain[0]["steps"] == 2 and plain[0]["retries"]
    assert plain[0]["tokens_cache_read"] == 4 and plain[0]["truncated"] is True
    approvals = store.plain_events(sid, types=["approval.requested", "approval.decided"])
    waiting = waiting_requests([(e.seq, e.data) for e in approvals], lambda: set())
    folded = fold_approvals(store.events(sid, types=[e.type for e in approvals]), lambda: set())
    assert folded.step is not None
    assert waiting == [r.model_dump(mode="json", exclude_none=True) for r in folded.step.pending]
    assert [w["call_id"] for w in waiting] == ["c1"] and folded.grants == {"grep"}
    assert [e.to_json() for e in store.plain_events(sid)] == [
        e.to_json() for e in store.events(sid)
    ]


@pytest.mark.usefixtures("own_keys")  # plain: a store of the first schema with sessions
def test_a_store_of_the_first_schema_reads_plain_as_through_the_models(tmp_path: Path) -> None:
    db = tmp_path / "v1.db"
    db.write_bytes((Path(__file__).parent.parent / "fixtures" / "schema_v1.db").read_bytes())
    store = open_store(str(db))
    try:
        sessions = store.list_sessions(archived=None, roots_only=False).sessions
        assert sessions
        for row in sessions:
            assert store.plain_messages(row.id) == [
                m.model_dump(mode="json", exclude_none=True) for m in store.messages(row.id)
            ]
            assert [e.to_json() for e in store.plain_events(row.id)] == [
                e.to_json() for e in store.events(row.id)
            ]
    finally:
        store.close()


def test_reading_plain_loads_no_pydantic(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    store = open_store(str(db))
    sid = _fill(store, blocks=False)
    store.close()
    code = (
        "import sys\n"
        "from wakeful.store import open_store\n"
        "from wakeful.runner import run_records\n"
        f"s = open_store({str(db)!r})\n"
        f"m = s.plain_messages({sid!r}); e = s.plain_events({sid!r}); r = run_records(s, {sid!r})\n"
        f"s.pending_ids({sid!r}); s.close()\n"
        "print(len(m), len(r), *sorted(n for n in sys.modules if n.split('.')[0] == 'pydantic'))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["4", "1"]


def test_an_optional_field_left_none_reads_back(tmp_path: Path) -> None:
    # The write path drops `None` fields (`dump_event`), so a field that may be None must have
    # a default: else the event is stored and then unreadable (`RetryScheduled.turn_id` was).
    required = [
        f"{model}.{name}"
        for model, fields in _shapes.MODELS.items()
        for name, default, kinds, *_ in fields
        if default is REQUIRED and "null" in kinds
    ]
    assert required == []
    store = open_store(str(tmp_path / "s.db"))
    try:
        sid = store.create_session().id
        retry = RetryScheduled(
            turn_id=None, step=1, attempt=2, deadline_ms=5, error_kind="rate_limit", error="e"
        )
        store.append(sid, [retry], None)
        assert store.events(sid)[-1].event == retry
        assert json.dumps(store.plain_events(sid)[-1].data) == _dump(retry)
        state = store.retry_state(sid)
        assert state is not None and state.turn_id is None and state.attempt == 2
    finally:
        store.close()


# -- message bodies read as stored (`sessions.message_shapes`, migration 19) -------------------


def _message_shapes(store: SqlStore, sid: str) -> str | None:
    with store.backend.transaction(write=False) as tx:
        row = tx.one("SELECT message_shapes FROM sessions WHERE id = ?", (sid,))
    assert row is not None
    return None if row[0] is None else str(row[0])


def _set_message_shapes(store: SqlStore, sid: str, shapes: str) -> None:
    """What a body written by a wakeful of other models leaves (or a store before migration 19)."""
    with store.backend.transaction(write=True) as tx:
        tx.send("UPDATE sessions SET message_shapes = ? WHERE id = ?", (shapes, sid))


def test_a_stored_message_is_what_its_model_dumps() -> None:
    # What reading a body as stored relies on: `dump_event` writes a `message.added` body as
    # MESSAGE_ADDED_HEAD and then the message as `model_dump(mode="json", exclude_none=True)`
    # gives it, but for a default `aborted` (migration 31), its last field, which the plain
    # read puts back; and the model read back from it dumps the same (no other default left
    # out, no value the model would convert). Were `dump_event` to leave out another default,
    # this fails first.
    for message in _messages():  # (among them an aborted one)
        for event in (MessageAdded(message=message), MessageAdded(message=message, turn_id="t")):
            body = dump_event(event)
            assert body.startswith(MESSAGE_ADDED_HEAD), body
            stored, _end = json.JSONDecoder().raw_decode(body, len(MESSAGE_ADDED_HEAD))
            assert ("aborted" in stored) is message.aborted, body
            stored.setdefault("aborted", False)
            dumped = message.model_dump(mode="json", exclude_none=True)
            assert json.dumps(stored) == json.dumps(dumped), body
            read = load_event(body)
            assert isinstance(read, MessageAdded)
            assert json.dumps(read.message.model_dump(mode="json", exclude_none=True)) == (
                json.dumps(stored)
            )


def test_a_session_names_the_shapes_of_its_message_bodies(store: SqlStore) -> None:
    sid = store.create_session().id
    assert _message_shapes(store, sid) is None  # no body yet
    store.admit(sid, "in1", "user", {"text": "hi"})
    store.promote(sid, idle=True)  # a delivery derives its message: it stores no body
    assert _message_shapes(store, sid) is None
    store.append(sid, [MessageAdded(message=assistant("one"))])
    assert _message_shapes(store, sid) == SHAPES_DIGEST
    store.append(sid, [UsageRecorded(input_tokens=1), MessageAdded(message=assistant("two"))])
    assert _message_shapes(store, sid) == SHAPES_DIGEST
    # Bodies of other shapes in the session: from the next body on, mixed for good.
    _set_message_shapes(store, sid, "0123456789abcdef")
    store.append(sid, [UsageRecorded(input_tokens=1)])  # no body: nothing changes
    assert _message_shapes(store, sid) == "0123456789abcdef"
    store.append(sid, [MessageAdded(message=assistant("three"))])
    assert _message_shapes(store, sid) == "-"
    store.append(sid, [MessageAdded(message=assistant("four"))])
    assert _message_shapes(store, sid) == "-"
    assert [m["blocks"][0]["text"] for m in store.plain_messages(sid)] == [
        "hi",
        "one",
        "two",
        "three",
        "four",
    ]


def test_every_kind_of_message_reads_plain_as_through_the_models_as_stored_or_not(
    store: SqlStore,
) -> None:
    sid = _fill(store)
    store.append(sid, [MessageAdded(message=m) for m in _messages()])
    replaced = store.messages(sid)[0]  # the system message
    store.shaping.edit_history(
        sid, revision=store.get_session(sid).last_seq, message_id=replaced.id, text="replaced"
    )
    store.admit(sid, "in6", "user", {"text": "after the edit"})
    store.promote(sid, idle=True)
    store.append(sid, [MessageAdded(message=assistant("last"), turn_id="t9")])
    assert _message_shapes(store, sid) == SHAPES_DIGEST
    expected = [
        json.dumps(m.model_dump(mode="json", exclude_none=True)) for m in store.messages(sid)
    ]
    assert len(expected) > len(_messages())
    assert "replaced" in expected[0] and "after the edit" in expected[-2]
    assert [json.dumps(m) for m in store.plain_messages(sid)] == expected  # as stored
    _set_message_shapes(store, sid, "-")
    assert [json.dumps(m) for m in store.plain_messages(sid)] == expected  # reshaped


@pytest.mark.usefixtures("own_keys")  # plain: it edits the stored JSON in place
def test_a_body_is_read_as_stored_only_in_a_session_of_todays_shapes(tmp_path: Path) -> None:
    # A body an older wakeful wrote (no `aborted`: the field came later; since migration 31
    # the body leaves a default one out too) reads as the models read it, with the default
    # filled in, in a session whose bodies may be of mixed shapes and in one of today's shapes;
    # a session of today's shapes vouches for its bodies, which are then not reshaped (a
    # block's keys in another order stay so).
    store = open_store(str(tmp_path / "s.db"))
    try:
        sid = store.create_session().id
        store.append(sid, [MessageAdded(message=assistant("old"))])
        with store.backend.transaction(write=True) as tx:
            tx.send(
                "UPDATE event_log SET data = replace(data, ',\"aborted\":false', '') "
                f"WHERE sk = {SESSION_KEY} AND type = 'message.added'",
                (sid,),
            )
        [typed] = store.messages(sid)
        assert typed.aborted is False
        filled = typed.model_dump(mode="json", exclude_none=True)
        assert filled["aborted"] is False
        _set_message_shapes(store, sid, "-")
        assert store.plain_messages(sid) == [filled]
        _set_message_shapes(store, sid, SHAPES_DIGEST)
        assert store.plain_messages(sid) == [filled]
        with store.backend.transaction(write=True) as tx:
            tx.send(
                f"UPDATE event_log SET data = replace(data, ?, ?) WHERE sk = {SESSION_KEY}",
                ('{"type":"text","text":"old"}', '{"text":"old","type":"text"}', sid),
            )
        [stored] = store.plain_messages(sid)
        assert stored == filled and list(stored["blocks"][0]) == ["text", "type"]
        _set_message_shapes(store, sid, "-")
        [reshaped] = store.plain_messages(sid)
        assert reshaped == filled and list(reshaped["blocks"][0]) == ["type", "text"]
    finally:
        store.close()


def test_an_unknown_session_has_no_plain_transcript(store: SqlStore) -> None:
    with pytest.raises(NotFoundError):
        store.plain_messages("ses_missing")
    sid = store.create_session().id
    assert store.plain_messages(sid) == []


def test_bodies_read_as_stored_load_not_even_the_plain_reader(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    store = open_store(str(db))
    sid = store.create_session().id
    store.append(sid, [MessageAdded(message=m) for m in _messages()])
    store.close()
    code = (
        "import sys\n"
        "from wakeful.store import open_store\n"
        f"s = open_store({str(db)!r}); m = s.plain_messages({sid!r}); s.close()\n"
        "print(len(m), sorted(n for n in sys.modules if n.startswith(('pydantic', "
        "'wakeful.events._plain', 'wakeful.messages'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == [str(len(_messages())), "[]"]
