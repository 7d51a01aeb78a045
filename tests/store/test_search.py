"""Full-text search over session content, on both backends.

The index holds exactly what `searchable_text` says of each transcript message (and the title),
written with the event that adds it; a query ranks sessions by their best matching message.
"""

from __future__ import annotations

import pytest

from tests.store.helpers import add_message
from wakeful.errors import UsageError
from wakeful.messages import (
    CompactSummaryBlock,
    Message,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    assistant,
    system,
    user,
)
from wakeful.store import SqlStore, _search, open_store
from wakeful.store._search import MAX_INDEXED_CHARS, TITLE_SEQ, searchable_text


def indexed(store: SqlStore, session_id: str) -> list[tuple[int, str]]:
    """The index rows of one session, as (seq, body): PostgreSQL's rows hold only the
    `tsvector` (migration 21), as text; SQLite's entries (migration 25) are read from the text
    the index computes from the log, once FTS5's check has shown that each entry holds exactly
    that text and no row of it is missing (so what waits for its batch is indexed first)."""
    if store.backend.kind == "postgres":
        with store.backend.transaction(write=False) as tx:
            rows = tx.all(
                "SELECT seq, tsv::text FROM search_docs WHERE session_id = ? ORDER BY seq, id",
                (session_id,),
            )
        return [(int(seq), body) for seq, body in rows]
    _search.index_pending(store.backend)
    with store.backend.transaction(write=True) as tx:
        tx.run("INSERT INTO search_fts (search_fts, rank) VALUES ('integrity-check', 1)")
        rows = tx.all(
            "SELECT CASE WHEN t.id < 0 THEN 0 ELSE e.seq END, t.body FROM search_fts_docsize z "
            "JOIN search_text t ON t.id = z.id LEFT JOIN events e ON e.id = z.id "
            "LEFT JOIN search_docs d ON d.id = -z.id "
            "WHERE COALESCE(e.session_id, d.session_id) = ? AND t.body <> ''",
            (session_id,),
        )
    return sorted((int(seq), body) for seq, body in rows)


def expected_text(store: SqlStore, session_id: str) -> list[tuple[int, str]]:
    """What a session contributes to the index: its title at seq 0, each message's text."""
    title = store.get_session(session_id).title
    rows = [(TITLE_SEQ, title)] if title else []
    for seq, message in store.messages_with_seq(session_id):
        if text := searchable_text(message):
            rows.append((seq, text))
    return rows


def expected(store: SqlStore, session_id: str) -> list[tuple[int, str]]:
    """What the index must hold for a session (`indexed`'s form)."""
    rows = expected_text(store, session_id)
    if store.backend.kind != "postgres":
        return rows
    with store.backend.transaction(write=False) as tx:
        return [
            (seq, tx.one("SELECT wakeful_search_tsv(?)::text", (text,))[0])  # type: ignore[index]
            for seq, text in rows
        ]


def say(store: SqlStore, session_id: str, text: str) -> None:
    """Admit a user input and deliver it (an `inbox.delivered` v2 that names its message)."""
    store.admit(session_id, None, "user", {"text": text})
    store.promote(session_id, idle=True)


def ids(page) -> list[str]:
    return [h.session.id for h in page.hits]


@pytest.mark.usefixtures("own_keys")  # plain: it reads the index's words
def test_every_kind_of_content_is_indexed_with_its_message(store: SqlStore):
    sid = store.create_session(title="Parser work").id
    say(store, sid, "Why does the tokenizer choke on unicode?")
    add_message(
        store,
        sid,
        Message(
            role="assistant",
            blocks=(
                TextBlock(text="Let me look."),
                ToolCallBlock(
                    id="c1", name="shell", input={"command": "pytest -k lexer", "timeout": 30}
                ),
            ),
        ),
    )
    add_message(
        store,
        sid,
        Message(
            role="user",
            blocks=(ToolResultBlock(call_id="c1", output="FAILED test_lexer_handles_emoji"),),
        ),
    )
    add_message(
        store,
        sid,
        Message(
            role="user",
            blocks=(CompactSummaryBlock(summary="we fixed the grammar", through_seq=3),),
        ),
    )
    add_message(store, sid, system("SECRET instruction text"))
    assert indexed(store, sid) == expected(store, sid)
    assert [body for _seq, body in expected_text(store, sid)] == [
        "Parser work",
        "Why does the tokenizer choke on unicode?",
        "Let me look.\nshell pytest -k lexer 30",
        "FAILED test_lexer_handles_emoji",
        "we fixed the grammar",
    ]
    for query in ("tokenizer", "PYTEST", "test_lexer_handles_emoji", "grammar", "parser"):
        assert ids(store.search(query)) == [sid], query
    assert store.search("secret").hits == []  # system messages (instructions) stay out


def test_a_rare_word_finds_its_session_first_and_ranks_by_the_best_message(store: SqlStore):
    noise = [store.create_session(title=f"noise {i}").id for i in range(5)]
    for i, sid in enumerate(noise):
        for j in range(4):
            add_message(store, sid, assistant(f"routine answer {i}.{j} about the build"))
    deep = store.create_session(title="deep").id
    for j in range(30):
        add_message(store, deep, assistant(f"filler {j} about the build"))
    add_message(store, deep, assistant("the culprit was a stale xylophone cache"))
    for j in range(5):
        add_message(store, deep, assistant(f"more filler {j}"))
    [hit] = store.search("xylophone").hits
    assert hit.session.id == deep
    assert "stale xylophone cache" in hit.snippet
    assert store.messages_with_seq(deep)[30][0] == hit.seq
    # A session whose message is all about the word outranks one that mentions it in passing.
    focused = store.create_session().id
    add_message(store, focused, assistant("build build build"))
    assert ids(store.search("build"))[0] == focused
    assert set(ids(store.search("build", limit=10))) == {*noise, deep, focused}


@pytest.mark.usefixtures("own_keys")  # plain: prefixes (an encrypted index refuses them)
def test_query_words_prefixes_and_case(store: SqlStore):
    sid = store.create_session().id
    add_message(
        store,
        sid,
        assistant(
            "Deployment of the café service failed; see foo_bar.log, mail ops@example.org, v3.14"
        ),
    )
    assert ids(store.search("deployment")) == [sid]
    assert ids(store.search("deploy")) == []  # whole words, no stemming
    assert ids(store.search("deploy*")) == [sid]
    assert ids(store.search("CAFÉ service")) == [sid]  # every word, any case
    assert ids(store.search("café missing")) == []
    assert ids(store.search('"foo_bar" -- log!')) == [sid]  # punctuation is no syntax
    for part in ("log", "example", "org", "ops", "14", "v3"):  # both backends split alike
        assert ids(store.search(part)) == [sid], part
    for nothing in ("", "   ", "!! -- **"):
        with pytest.raises(UsageError, match="at least one word"):
            store.search(nothing)


def test_pages_filters_and_the_title(store: SqlStore):
    sids = [store.create_session(title=f"walrus {i}").id for i in range(5)]
    first = store.search("walrus", limit=2)
    assert len(first.hits) == 2 and first.next_offset == 2
    second = store.search("walrus", limit=2, offset=2)
    third = store.search("walrus", limit=2, offset=4)
    assert third.next_offset is None
    assert sorted(ids(first) + ids(second) + ids(third)) == sorted(sids)
    store.set_archived(sids[0])
    assert sids[0] not in ids(store.search("walrus", limit=10))
    assert ids(store.search("walrus", archived=True)) == [sids[0]]
    child = store.create_session(parent_id=sids[1], title="walrus child").id
    assert child in ids(store.search("child"))
    assert store.search("child", roots_only=True).hits == []
    store.update_session(sids[2], title="narwhal")
    assert ids(store.search("narwhal")) == [sids[2]]
    assert sids[2] not in ids(store.search("walrus", limit=10))  # the old title is gone
    with pytest.raises(UsageError):
        store.search("walrus", limit=0)


@pytest.mark.usefixtures("own_keys")  # plain: it reads the index's words
def test_forks_are_indexed_and_deletes_take_their_rows(store: SqlStore):
    sid = store.create_session(title="origin").id
    say(store, sid, "the pelican question")
    add_message(store, sid, assistant("the pelican answer"))
    fork = store.fork(sid).id
    assert indexed(store, fork) == expected(store, fork)
    assert sorted(ids(store.search("pelican"))) == sorted([sid, fork])
    store.delete(fork)
    assert indexed(store, fork) == []
    assert ids(store.search("pelican")) == [sid]
    store.delete(sid)
    assert store.search("pelican").hits == []


@pytest.mark.usefixtures("own_keys")  # plain: it reads the index's words
def test_huge_messages_and_nul_characters_index_without_error(store: SqlStore):
    sid = store.create_session().id
    huge = " ".join(f"w{i}" for i in range(200_000))  # well over a tsvector's megabyte
    add_message(store, sid, assistant("start " + huge))
    add_message(store, sid, user("nul\x00byte marker"))
    assert indexed(store, sid) == expected(store, sid)
    [(_seq, body), (_seq2, nul)] = expected_text(store, sid)
    assert len(body) <= MAX_INDEXED_CHARS
    assert nul == "nulbyte marker"
    assert ids(store.search("start")) == [sid]


@pytest.mark.usefixtures("own_keys")  # plain: a store of an earlier schema with sessions
def test_the_backfill_indexes_what_was_written_before_the_index(db_url: str):
    store = open_store(db_url)
    sids = [store.create_session(title=f"old {i}").id for i in range(7)]
    for sid in sids:
        say(store, sid, f"question of {sid}")
        add_message(store, sid, assistant("an answer about marmots"))
    before = {sid: indexed(store, sid) for sid in sids}
    last = expected_text(store, sids[3])[-1]
    with store.backend.transaction(write=True) as tx:  # as if written before migration 7
        tx.run("DELETE FROM search_docs")  # (on SQLite the titles: messages index from the log)
        tx.run("INSERT INTO search_backfill (after_id) VALUES ('')")
        if store.backend.kind == "postgres":  # one session half indexed since (its newest
            tx.run(_search._INSERT["postgres"], (sids[3], *last))  # message came after)
    store.close()

    batch, _search.BACKFILL_BATCH = _search.BACKFILL_BATCH, 3  # several transactions
    try:
        reopened = open_store(db_url)
    finally:
        _search.BACKFILL_BATCH = batch
    try:
        assert {sid: sorted(indexed(reopened, sid)) for sid in sids} == {
            sid: sorted(rows) for sid, rows in before.items()
        }
        assert sorted(ids(reopened.search("marmots", limit=10))) == sorted(sids)
        with reopened.backend.transaction(write=False) as tx:
            assert tx.all("SELECT * FROM search_backfill") == []
    finally:
        reopened.close()
