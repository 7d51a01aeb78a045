"""A minted message or turn id in SQLite's transcript projection (migration 35, issue 36 item 5,
`store/_compact_ids.py`): `message_log` holds the bytes of its hex digits, any other id its
text, and every read and every lookup by id sees the ids as given. A file and a PostgreSQL
database written by main at a0ca1a4 (migration 33: `tests/fixtures/make_schema_v33.py`)
upgrade in place (migrations 34 and 35) and read back whole; so do stores of migration 34,
encrypted at rest; hides, edits, reverts and deletes by id then find the rows
written before (ids as text) and after (ids as bytes)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import TEST_MASTER_KEY
from tests.fixtures.make_schema_v33 import fill_v33, reads
from tests.pg import fresh_database
from tests.store.helpers import add_message, as_of, load_pg_rows
from wakeful._ids import new_turn_id
from wakeful.events import MessageAdded, MessagesHidden
from wakeful.messages import assistant, user
from wakeful.store import SqlStore, _compact_ids, _migrations, _postgres, _sqlite, open_store
from wakeful.store._migrations import LATEST

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
BEFORE = [m for m in _migrations.MIGRATIONS if m[0] < 35]

pytestmark = pytest.mark.usefixtures("own_keys")  # plain, or keys of their own


def _json(value: object) -> Any:
    """`value` as the fixture's JSON holds it (tuples as lists)."""
    return json.loads(json.dumps(value))


def _form(value: object) -> str:
    """How a value came back from the table, in SQLite's names for its types."""
    return {bytes: "blob", str: "text", type(None): "null"}[type(value)]


def _forms(store: SqlStore, sid: str) -> dict[str, tuple[str, str]]:
    """Each message id of the session: how `message_log` holds it and its turn id."""
    with store.backend.transaction(write=False) as tx:
        return {
            str(r[0]): (_form(r[1]), _form(r[2]))
            for r in tx.all(
                "SELECT v.message_id, m.message_id, m.turn_id FROM messages v "
                "JOIN message_log m ON m.sk = v.sk AND m.seq = v.seq WHERE v.session_id = ?",
                (sid,),
            )
        }


def _by_id_works(store: SqlStore, sid: str, old: list[str]) -> None:
    """Hide, edit and revert by id, on rows written before the upgrade (`old`: their ids,
    in order) and after it."""
    new = [assistant(f"new walrus {n}") for n in range(3)]
    for m in new:
        add_message(store, sid, m)
    new_ids = [m.id for m in new]
    store.append(sid, [MessagesHidden(message_ids=(old[0], new_ids[0]))])
    ids = [m.id for m in store.messages(sid)]
    assert old[0] not in ids and new_ids[0] not in ids
    for target, text in ((old[-1], "an old text replaced"), (new_ids[1], "a new one replaced")):
        store.shaping.edit_history(
            sid, revision=store.high_water(sid), message_id=target, text=text
        )
        assert {m.id: m.text() for m in store.messages(sid)}[target] == text
    assert store.last_message_ids(sid, 2) == new_ids[1:]
    plan = store.shaping.plan_revert(sid, message_id=old[1][:12])  # a prefix, as the CLI
    assert plan.hidden > 0
    store.shaping.revert(sid, message_id=old[1])
    assert [m.id for m in store.messages(sid)] == ids[: ids.index(old[1])]


def test_minted_ids_are_held_as_bytes_and_read_as_given(store: SqlStore) -> None:
    sid = store.create_session().id
    turn = new_turn_id()
    given = [
        user("minted"),
        user("other", id="m_a"),
        assistant("upper hex", id="msg_ABCDEF"),
        assistant("odd hex", id="msg_abc"),
        assistant("no digits", id="msg_"),
    ]
    for m in given:
        store.append(sid, [MessageAdded(message=m, turn_id=turn)])
    store.admit(sid, None, "user", {"text": "a delivered walrus"})  # `msg_in_`: derived
    store.promote(sid, idle=True)
    ids = [m.id for m in store.messages(sid)]
    assert ids[:5] == [m.id for m in given]
    assert ids[5].startswith("msg_in_")
    assert store.last_message_ids(sid, 10) == ids
    assert [m["id"] for m in store.plain_messages(sid)] == ids
    sqlite = store.backend.kind == "sqlite"
    minted = ("blob" if sqlite else "text", "blob" if sqlite else "text")
    assert _forms(store, sid) == {
        ids[0]: minted,
        **dict.fromkeys(ids[1:5], ("text", minted[1])),
        ids[5]: ("text", "null"),
    }
    with store.backend.transaction(write=False) as tx:
        turns = tx.all("SELECT DISTINCT turn_id FROM messages WHERE session_id = ?", (sid,))
    assert {r[0] for r in turns} == {turn, None}
    for n in range(3):
        add_message(store, sid, user(f"old {n}"))
    old = [m.id for m in store.messages(sid)][-3:]
    _by_id_works(store, sid, old)


def test_a_lookup_by_id_names_no_other_form() -> None:
    """The stored form is a bijection: bytes only for the column's own prefix and whole hex
    digits, in lowercase; every other id as its text; PostgreSQL always the text."""
    hexes = "0123456789abcdef" * 2
    assert _compact_ids.stored_message_id("sqlite", f"msg_{hexes}") == bytes.fromhex(hexes)
    for other in (f"msg_{hexes.upper()}", "msg_abc", "msg_", "msg_ 12", "m_12", f"turn_{hexes}"):
        assert _compact_ids.stored_message_id("sqlite", other) == other
    assert _compact_ids.stored_message_id("postgres", f"msg_{hexes}") == f"msg_{hexes}"
    assert _compact_ids.stored_turn_id("sqlite", "turn_00ff") == b"\x00\xff"
    assert _compact_ids.stored_turn_id("sqlite", None) is None


def _upgraded_reads_whole(store: SqlStore, read: dict[str, Any]) -> None:
    """Every session reads back as the previous version read it; rows of before keep their
    text ids and new ones are held as bytes (SQLite); lookups by id find both."""
    sids: list[str] = read["sessions"]
    with store.backend.transaction(write=False) as tx:
        assert tx.one("SELECT MAX(version) FROM schema_migrations") == (LATEST,)
    assert _json(reads(store, sids)) == read
    turns = sids[-1]
    assert {f for f, _ in _forms(store, turns).values()} == {"text"}
    old = [m.id for m in store.messages(turns)]
    _by_id_works(store, turns, old)
    last = assistant("after")
    add_message(store, turns, last, turn_id=new_turn_id())
    expected = ("blob", "blob") if store.backend.kind == "sqlite" else ("text", "text")
    assert _forms(store, turns)[last.id] == expected
    store.delete(sids[0])
    every = len(store.list_sessions(roots_only=False, archived=None).sessions)
    assert store.prune(2**62, "delete").sessions == every


def test_a_file_of_the_previous_version_reads_back_whole(tmp_path: Path) -> None:
    copy = tmp_path / "sessions.db"
    shutil.copyfile(FIXTURES / "schema_v33.db", copy)
    store = open_store(str(copy))
    try:
        _upgraded_reads_whole(store, json.loads((FIXTURES / "schema_v33.json").read_text()))
    finally:
        store.close()


@pytest.mark.postgres
def test_a_database_of_the_previous_version_reads_back_whole() -> None:
    dump = json.loads((FIXTURES / "schema_v33_pg.json").read_text())
    with fresh_database() as url:
        with pytest.MonkeyPatch.context() as old:
            as_of(old, _postgres, BEFORE)
            open_store(url).close()
        load_pg_rows(url, dump)
        store = open_store(url)
        try:
            _upgraded_reads_whole(store, dump["read"])
        finally:
            store.close()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def encrypted_url(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[str]:
    """An empty store of each backend that will be encrypted at rest from its first write."""
    monkeypatch.setenv("WAKEFUL_MASTER_KEY", TEST_MASTER_KEY)
    monkeypatch.setenv("WAKEFUL_KEYRING", str(tmp_path / "test.keyring"))
    if request.param == "sqlite":
        yield str(tmp_path / "sessions.db")
    else:
        with fresh_database() as url:
            yield url


def test_an_encrypted_store_of_the_previous_version_reads_back_whole(encrypted_url: str) -> None:
    """Migration 34's writes, encrypted: today's code with the ids stored as text (all that
    changed in a write) and the migrations up to 34 writes what the version before wrote."""
    backend = _postgres if encrypted_url.startswith("postgresql") else _sqlite
    with pytest.MonkeyPatch.context() as old:
        as_of(old, backend, BEFORE)
        old.setattr(_compact_ids, "_stored", lambda kind, prefix, value: value)
        store = open_store(encrypted_url)
        try:
            assert store.backend.cipher is not None
            read = _json(reads(store, fill_v33(store)))
        finally:
            store.close()
    store = open_store(encrypted_url)
    try:
        assert store.backend.cipher is not None
        _upgraded_reads_whole(store, read)
    finally:
        store.close()
