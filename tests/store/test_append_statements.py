"""What one fenced append sends to PostgreSQL (issue 24: the worker's CPU is psycopg's work
per statement, so every statement of the hot path counts)."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import psycopg
import pytest

from tests.pg import fresh_database
from wakeful.errors import ClaimLostError
from wakeful.events import MessageAdded, SessionCreated
from wakeful.messages import user
from wakeful.store import SqlStore, fence, open_store
from wakeful.store._pgwire import Wire

pytestmark = pytest.mark.postgres


@pytest.fixture
def store() -> Iterator[SqlStore]:
    with fresh_database() as url:
        opened = open_store(url)
        yield opened
        opened.close()


def _sent(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The statements sent from this thread from now on, by a connection's wire or a psycopg
    cursor (their first words; the notifier's thread sends its own)."""
    sent: list[str] = []
    execute, wire_send = psycopg.Cursor.execute, Wire.send
    here = threading.get_ident()

    def note(query: object) -> None:
        if threading.get_ident() == here:
            sent.append(" ".join(str(query).split()[:6]))

    def counted(self, query, *args, **kwargs):  # type: ignore[no-untyped-def]
        note(query)
        return execute(self, query, *args, **kwargs)

    def sent_on_wire(self, query, *args, **kwargs):  # type: ignore[no-untyped-def]
        note(query)
        return wire_send(self, query, *args, **kwargs)

    monkeypatch.setattr(psycopg.Cursor, "execute", counted)
    monkeypatch.setattr(Wire, "send", sent_on_wire)
    return sent


def test_a_fenced_append_sends_its_transaction_id_claim_and_ids_with_two_statements(
    store: SqlStore, monkeypatch: pytest.MonkeyPatch
):
    """BEGIN, the session lock (with the transaction id), the claim with the new ids, the
    events, the session row, COMMIT: six statements where seven were sent (the id asked
    on its own, the claim and the id reservation one each)."""
    store.admit("ses_a", "i1", "user", {"text": "hi"}, create=SessionCreated())
    claim = store.claims.acquire("ses_a", "host/1/a", 60_000)
    assert claim is not None
    sent = _sent(monkeypatch)
    [stored] = store.append("ses_a", [MessageAdded(message=user("one"))], fence(claim))
    fixed = [s for s in sent if not s.startswith(("INSERT INTO message_log", "INSERT INTO search"))]
    assert [s.split()[0] for s in fixed] == [
        "BEGIN",
        "SELECT",
        "SELECT",
        "INSERT",
        "UPDATE",
        "COMMIT",
    ]
    assert "pg_current_xact_id()::text" in fixed[1]  # a column of the session's lock
    assert not any(s.startswith("SELECT pg_current_xact_id()") for s in sent)
    assert store.events("ses_a")[-1] == stored and stored.seq == store.high_water("ses_a")
    # The fence still holds: a claim taken over in between refuses the write.
    store.claims.release(claim)
    with pytest.raises(ClaimLostError):
        store.append("ses_a", [MessageAdded(message=user("two"))], fence(claim))
    assert store.events("ses_a")[-1] == stored
