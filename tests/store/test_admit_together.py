"""`SqlStore.admit_together`: many admissions in one transaction, each with the outcome its own
`admit` would have had; a request that fails fails alone and leaves nothing behind."""

from __future__ import annotations

import base64

import psycopg
import pytest

from wakeful.config import StoreConfig
from wakeful.errors import ConflictError, NotFoundError, StoreBusyError, UsageError
from wakeful.store import Admission, AdmissionRequest, SqlStore, open_store

IMAGE = {
    "type": "image",
    "media_type": "image/png",
    "data": base64.b64encode(b"\x89PNG-bytes").decode(),
}


def _text(text: str) -> dict[str, object]:
    return {"text": text}


def _lone_error(store: SqlStore, r: AdmissionRequest) -> Exception:
    """The error `admit` raises for `r` on its own."""
    with pytest.raises(Exception) as caught:
        store.admit(r.session_id, r.input_id, r.kind, r.payload, r.delivery)
    return caught.value


def _log(store: SqlStore, sid: str) -> list[tuple[int, str | None]]:
    """(seq, input id) of every event of `sid`."""
    return [(e.seq, getattr(e.event, "input_id", None)) for e in store.events(sid)]


def test_mixed_outcomes_in_one_transaction(store: SqlStore) -> None:
    a = store.create_session("ses_together_a").id
    b = store.create_session("ses_together_b").id
    store.admit(a, "dup", "user", _text("same"))
    before_a, before_b = _log(store, a), _log(store, b)
    requests = [
        AdmissionRequest(a, "a1", "user", _text("one")),
        AdmissionRequest(b, None, "user", _text("two"), "queue"),
        AdmissionRequest(a, "dup", "user", _text("same")),  # the original, not a second
        AdmissionRequest(a, "dup", "user", _text("other")),  # 409
        AdmissionRequest("ses_nobody", "x", "user", _text("lost")),  # 404
        AdmissionRequest(a, "bad", "user", _text("mode"), "sideways"),  # type: ignore[arg-type]
        AdmissionRequest(a, "twice", "user", _text("again")),
        AdmissionRequest(a, "twice", "user", _text("again")),  # the same input, once
        AdmissionRequest(b, "pic", "user", {"blocks": [IMAGE]}),  # its bytes kept as a blob
    ]
    out = store.admit_together(requests)
    assert [type(o) for o in out] == [
        Admission,
        Admission,
        Admission,
        ConflictError,
        NotFoundError,
        UsageError,
        Admission,
        Admission,
        Admission,
    ]
    for r, o in zip(requests, out, strict=True):  # each error is the one `admit` raises alone
        if isinstance(o, Exception):
            lone = _lone_error(store, r)
            assert (type(lone), str(lone)) == (type(o), str(o))
    first, second, dup, twice, again = out[0], out[1], out[2], out[6], out[7]
    assert isinstance(first, Admission) and first.created and first.item.input_id == "a1"
    assert isinstance(second, Admission) and second.created and second.item.delivery == "queue"
    assert second.item.input_id.startswith("in_")
    assert isinstance(dup, Admission) and not dup.created and dup.item.payload == _text("same")
    assert isinstance(twice, Admission) and isinstance(again, Admission)
    assert (twice.created, again.created) == (True, False)
    assert again.item.seq == twice.item.seq
    # Exactly the created inputs were written, each once, the log gap-free.
    assert _log(store, a) == [*before_a, (first.item.seq, "a1"), (twice.item.seq, "twice")]
    pic = out[8]
    assert isinstance(pic, Admission) and pic.created
    [block] = pic.item.payload["blocks"]  # type: ignore[misc]
    assert "data" not in block and store.get_blob(block["ref"]) == b"\x89PNG-bytes"
    assert _log(store, b) == [
        *before_b,
        (second.item.seq, second.item.input_id),
        (pic.item.seq, "pic"),
    ]
    assert [e[0] for e in _log(store, a)] == list(range(1, len(_log(store, a)) + 1))
    assert {i.input_id for i in store.pending(a)} == {"dup", "a1", "twice"}


@pytest.mark.postgres
@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)
def test_a_refused_value_rolls_back_and_each_is_admitted_alone(store: SqlStore) -> None:
    """PostgreSQL refuses a NUL in text (here an input id): that ends the whole transaction, so every
    request is admitted again on its own; the bad one gets `admit`'s own `UsageError`, the
    others are admitted once each (the rolled-back attempt left nothing)."""
    a = store.create_session("ses_together_nul").id
    requests = [
        AdmissionRequest(a, "good1", "user", _text("fine")),
        AdmissionRequest(a, "n\x00l", "user", _text("refused")),
        AdmissionRequest(a, "good2", "user", _text("fine too")),
    ]
    out = store.admit_together(requests)
    assert isinstance(out[0], Admission) and out[0].created
    assert isinstance(out[2], Admission) and out[2].created
    assert isinstance(out[1], UsageError)
    lone = _lone_error(store, requests[1])
    assert (type(lone), str(lone)) == (UsageError, str(out[1]))
    assert [i for _, i in _log(store, a)] == [None, "good1", "good2"]
    assert [s for s, _ in _log(store, a)] == [1, 2, 3]


@pytest.mark.postgres
@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)
def test_a_lock_timeout_mid_batch_fails_that_request_alone(db_url: str) -> None:
    """A session row held by another transaction: the batch's call for it times out on the
    server, after the calls sent before it and with those after it skipped (one pipeline).
    The transaction rolls back and each request is admitted alone: the held session's fails
    with the lock timeout (`StoreBusyError`, 503 over HTTP), the others are admitted once."""
    store = open_store(db_url, options=StoreConfig(lock_timeout_ms=100))
    try:
        a = store.create_session("ses_together_free").id
        held = store.create_session("ses_together_held").id
        with psycopg.connect(db_url) as other:
            other.execute("SELECT 1 FROM sessions WHERE id = %s FOR UPDATE", (held,))
            out = store.admit_together(
                [
                    AdmissionRequest(a, "first", "user", _text("before")),
                    AdmissionRequest(held, "stuck", "user", _text("held")),
                    AdmissionRequest(a, "last", "user", _text("after")),
                ]
            )
            other.rollback()
        assert isinstance(out[0], Admission) and out[0].created
        assert isinstance(out[1], StoreBusyError)
        assert isinstance(out[2], Admission) and out[2].created
        assert [i for _, i in _log(store, a)] == [None, "first", "last"]
        assert [i for _, i in _log(store, held)] == [None]
    finally:
        store.close()
