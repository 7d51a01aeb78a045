"""Messages of today's shapes built as stored (issue 36 item 6, `events/_built.py`): for every
block kind and field, what `messages_as_stored` builds is what validating the body gives (equal,
the same fields set, the same nested types, the same dumps); a session of today's shapes loads
its transcript that way, on both backends, with no validator built; a body the builder does
not vouch for is validated, and its error is the one `load_event` names."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from tests.store.test_plain_reads import _messages, _set_message_shapes
from wakeful.errors import StoreError
from wakeful.events import (
    MESSAGE_ADDED_HEAD,
    MessageAdded,
    NotPlain,
    dump_event,
    load_event,
    messages_as_stored,
)
from wakeful.messages import assistant, user
from wakeful.store import SqlStore, open_store
from wakeful.store._session_key import SESSION_KEY


def _same(built: Any, validated: Any) -> None:
    """`built` is `validated` in every part: type, fields, fields set, nested values."""
    assert type(built) is type(validated)
    if isinstance(validated, BaseModel):
        assert built.model_fields_set == validated.model_fields_set, type(validated)
        assert list(built.__dict__) == list(validated.__dict__)
        for name, value in validated.__dict__.items():
            _same(built.__dict__[name], value)
        assert built.__pydantic_extra__ == validated.__pydantic_extra__
        assert built.__pydantic_private__ == validated.__pydantic_private__
    elif isinstance(validated, tuple | list):
        assert len(built) == len(validated)
        for b, v in zip(built, validated, strict=True):
            _same(b, v)
    else:
        assert built == validated


def test_every_kind_of_message_is_built_as_validating_it_gives() -> None:
    messages = [*_messages(), user("plain"), assistant("with turn")]
    bodies = [dump_event(MessageAdded(message=m, turn_id="t")) for m in messages]
    built = messages_as_stored(bodies)
    for body, message in zip(bodies, built, strict=True):
        validated = load_event(body)
        assert isinstance(validated, MessageAdded)
        _same(message, validated.message)
        assert message == validated.message and hash(message.id) == hash(validated.message.id)
        assert message.model_dump_json() == validated.message.model_dump_json()
        assert message.model_dump(exclude_unset=True) == validated.message.model_dump(
            exclude_unset=True
        )
        with pytest.raises(ValueError, match="frozen"):
            message.role = "user"  # type: ignore[misc]


@pytest.mark.parametrize(
    "change",
    [
        ('"role":"user"', '"role":"user","colour":"red"'),  # a key no field has
        ('"role":"user",', ""),  # a required field missing
        ('"type":"text"', '"type":"sound"'),  # a block kind unknown
        ('"blocks":[', '"blocks":[7,'),  # a block that is not an object
        ('"id":"m', '"id":"","was":"m'),  # an empty id (validation mints one) and a key
        ('"id":"m', '"id":"","blocks":[],"was":"m'),  # a key twice (JSON keeps the last)
        ('"role":"user"', '"role":"nobody"'),  # a literal out of its values
        ('"text":"hello"', '"text":7'),  # a value of another type
        ('"type":"text","text":"hello"', '"type":"image","media_type":"image/png"'),  # no source
    ],
)
def test_a_body_the_builder_does_not_vouch_for_raises_not_plain(change: tuple[str, str]) -> None:
    body = dump_event(MessageAdded(message=user("hello", id="m1")))
    assert body.startswith(MESSAGE_ADDED_HEAD) and change[0] in body
    assert len(messages_as_stored([body, body])) == 2
    with pytest.raises(NotPlain):
        messages_as_stored([body, body.replace(*change, 1)])


def test_a_session_of_todays_shapes_loads_as_stored_else_validated(store: SqlStore) -> None:
    sid = store.create_session().id
    messages = [*_messages(), user("last")]
    store.append(sid, [MessageAdded(message=m) for m in messages])
    expected = list(messages)
    as_stored = store.messages(sid)
    _set_message_shapes(store, sid, "-")
    validated = store.messages(sid)
    assert as_stored == validated == expected
    for built, one in zip(as_stored, validated, strict=True):
        _same(built, one)


def test_a_refused_body_in_a_session_of_todays_shapes_is_validated_and_named(
    tmp_path: Path,
) -> None:
    store = open_store(str(tmp_path / "s.db"))
    try:
        sid = store.create_session().id
        store.append(sid, [MessageAdded(message=user(t)) for t in ("one", "two")])
        # A damaged body (a key too many), written as plain JSON: an encrypted store
        # (WAKEFUL_TEST_ENCRYPTION=1) reads an unsealed body as it is.
        damaged = dump_event(MessageAdded(message=user("two"))).replace(
            '"role"', '"colour":1,"role"'
        )
        with store.backend.transaction(write=True) as tx:
            tx.send(
                f"UPDATE event_log SET data = ? WHERE sk = {SESSION_KEY} AND seq = 2",
                (damaged, sid),
            )
        with pytest.raises(StoreError) as err:
            store.messages(sid)
        with pytest.raises(StoreError) as single:
            load_event(damaged)
        assert str(err.value) == str(single.value)
    finally:
        store.close()


def test_a_load_of_todays_shapes_builds_no_validator(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = open_store(str(path))
    try:
        sid = store.create_session().id
        store.append(sid, [MessageAdded(message=assistant(f"reply {i}")) for i in range(20)])
    finally:
        store.close()
    script = (
        "import sys, json\n"
        "from wakeful.store import open_store\n"
        "from wakeful.messages import Message, TextBlock\n"
        "store = open_store(sys.argv[1])\n"
        "got = store.messages(sys.argv[2])\n"
        "print(json.dumps([len(got), got[3].text(),"
        " Message.__pydantic_complete__, TextBlock.__pydantic_complete__]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script, str(path), sid], capture_output=True, text=True, check=True
    )
    assert json.loads(out.stdout) == [20, "reply 3", False, False]


def test_the_models_after_validators_run_as_validation_runs_them() -> None:
    body = dump_event(MessageAdded(message=user("hello", id="m1")))
    [minted] = messages_as_stored([body.replace('"id":"m1"', '"id":""', 1)])
    validated = load_event(body.replace('"id":"m1"', '"id":""', 1))
    assert isinstance(validated, MessageAdded)
    assert minted.id and minted.id != validated.message.id  # each minted anew, as validation
    assert minted.model_fields_set == validated.message.model_fields_set
