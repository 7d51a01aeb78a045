"""`messages.hidden`: messages leave the transcript and the search index; the log keeps them."""

from __future__ import annotations

from tests.store.helpers import add_message
from wakeful.events import MessagesHidden
from wakeful.messages import assistant, user
from wakeful.store import SqlStore


def test_hidden_messages_leave_the_transcript_and_search(store: SqlStore) -> None:
    store.create_session("s")
    a, b, c = user("alpha", id="m_a"), assistant("bravo", id="m_b"), user("charlie", id="m_c")
    for m in (a, b, c):
        add_message(store, "s", m)
    assert store.last_message_ids("s", 2) == ["m_b", "m_c"]
    assert store.last_message_ids("s", 10) == ["m_a", "m_b", "m_c"]
    store.append("s", [MessagesHidden(message_ids=("m_b",), reason="test")])
    assert [m.id for m in store.messages("s")] == ["m_a", "m_c"]
    assert store.last_message_ids("s", 2) == ["m_a", "m_c"]
    assert store.search("bravo").hits == []
    assert [h.session.id for h in store.search("charlie").hits] == ["s"]
    assert len(store.events("s", types=["message.added"])) == 3


def test_last_message_ids_of_an_unknown_session_is_empty(store: SqlStore) -> None:
    assert store.last_message_ids("nope", 3) == []
