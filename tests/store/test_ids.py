"""Session ids by unique prefix, and the per-row counts a listing shows, on both backends."""

from __future__ import annotations

import pytest

from wakeful.errors import AmbiguousIdError, NotFoundError
from wakeful.store import SqlStore

A = "ses_ab000000000000000000000a"
B = "ses_ab111111111111111111111b"


def test_an_exact_id_or_a_unique_prefix_names_a_session(store: SqlStore):
    store.create_session(A)
    store.create_session(B)
    assert store.resolve_session_id(A) == A
    assert store.resolve_session_id("ses_ab0") == A
    assert store.resolve_session_id("ab1") == B  # the ses_ may be left out
    with pytest.raises(AmbiguousIdError) as err:
        store.resolve_session_id("ses_ab")
    assert err.value.candidates == [A, B]
    assert str(err.value) == f"session id prefix 'ses_ab' is ambiguous: {A}, {B}"
    with pytest.raises(NotFoundError, match="no session ses_cd"):
        store.resolve_session_id("ses_cd")
    store.create_session("ses_ab")  # an id that is also a prefix of others: exact wins
    assert store.resolve_session_id("ses_ab") == "ses_ab"


def test_session_summaries_count_turns_and_children(store: SqlStore):
    store.create_session(A)
    store.create_session(parent_id=A)
    store.create_session(parent_id=A)
    store.create_session(B)
    got = store.session_summaries([A, B])
    assert {k: (v.turns, v.child_sessions) for k, v in got.items()} == {A: (0, 2), B: (0, 0)}
    assert store.session_summaries([]) == {}
