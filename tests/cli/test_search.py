"""`wakeful session search TEXT`: sessions found by what was said in them, on both backends."""

from __future__ import annotations

import json

from tests.cli.conftest import Wk, write_script
from wakeful.store import open_store


def test_search_finds_the_session_that_said_it(wk: Wk, workdir):
    model = write_script(
        workdir,
        [
            {"match": "rust", "replies": [{"text": "The borrow checker rejects the aliasing."}]},
            {"match": ".", "replies": [{"text": "Sure."}]},
        ],
    )
    for prompt in ("hello there", "why does rust complain?", "thanks"):
        wk("run", "--model", model, prompt)
    hits = json.loads(wk("session", "search", "borrow checker", "--format", "json").stdout)
    assert len(hits) == 1
    assert hits[0]["title"] == "why does rust complain?"
    assert hits[0]["match"]["snippet"] == "The borrow checker rejects the aliasing."
    table = wk("session", "search", "BORROW").stdout.splitlines()
    assert table[0].startswith(hits[0]["id"]) and "why does rust complain?" in table[0]
    assert table[1].strip() == "The borrow checker rejects the aliasing."
    assert len(json.loads(wk("session", "search", "sure", "--format", "json").stdout)) == 2
    none = wk("session", "search", "nothing-like-this")
    assert none.stdout == "" and "no session matches" in none.stderr


def test_a_search_without_words_is_a_one_line_usage_error(wk: Wk, db_url: str):
    open_store(db_url).close()  # a store exists: the error is about the query
    done = wk("session", "search", "--", "-- !!", check=False)
    assert done.returncode == 2
    assert done.stderr.strip() == "error: search needs at least one word (letters or digits)"


def test_search_output_carries_no_terminal_escapes(wk: Wk, workdir):
    model = write_script(
        workdir, [{"match": ".", "replies": [{"text": "red \x1b[31m alert \x1b[0m"}]}]
    )
    wk("run", "--model", model, "colour me \x1b]0;title\x07")
    out = wk("session", "search", "alert").stdout
    assert "red" in out and "alert" in out and "colour me" in out
    assert "\x1b" not in out and "\x07" not in out


def test_a_store_without_search_refuses_a_search_in_one_line(wk: Wk, db_url: str):
    store = open_store(db_url)
    sid = store.create_session(title="pangolin notes").id
    store.close()
    assert wk("store", "search").stdout == "search: on\n"
    assert wk("store", "search", "off").stdout == "search: off\n"
    assert wk("store", "search", "off").stdout == "search: off (it was already)\n"
    assert wk("store", "search").stdout == "search: off\n"
    done = wk("session", "search", "pangolin", check=False)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip() == (
        "error: full-text search is off in this store: `wakeful store search on` turns it on "
        "(it indexes every session from the log)"
    )
    assert wk("store", "search", "on").stdout == "search: on\n"
    hits = json.loads(wk("session", "search", "pangolin", "--format", "json").stdout)
    assert [h["id"] for h in hits] == [sid]
    bad = wk("store", "search", "maybe", check=False)
    assert bad.returncode == 2 and "'maybe' is not one of 'on', 'off'" in bad.stderr
