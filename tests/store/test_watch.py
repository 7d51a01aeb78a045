"""`SqlStore.feed.watch_commits`: what differs between the backends stays behind the store.

On PostgreSQL a LISTEN thread calls the watcher (on each NOTIFY, such as the commit of another
store on the same database here, and at least every quarter second, as the server's hub always
nudged); SQLite announces nothing, so the watcher is never called (readers poll). Stopping
returns on both, with the watching thread gone.
"""

from __future__ import annotations

import threading

from wakeful.store import SqlStore, open_store


def test_a_commit_elsewhere_reaches_the_watcher_on_postgres_only(store: SqlStore, db_url: str):
    row = store.create_session(title="watched")
    seen = threading.Event()
    before = {t.ident for t in threading.enumerate()}
    stop = store.feed.watch_commits(seen.set)
    try:
        other = open_store(db_url)
        try:
            other.update_session(row.id, title="changed elsewhere")
        finally:
            other.close()
        announced = seen.wait(1.0)  # PostgreSQL: at the NOTIFY, or within 0.25 s
    finally:
        stop()
    assert announced is (store.backend.kind == "postgres")
    assert {t.ident for t in threading.enumerate()} <= before  # the watcher ended


def test_interrupt_requests_are_announced_on_postgres_only(store: SqlStore):
    """SQLite announces no interrupt request: its wait says so at once (None), and a watcher
    polls; PostgreSQL's first wait begins listening (`tests/store/test_notify.py`)."""
    store.feed.announce_interrupt("ses_a", 1)  # (SQLite: nothing to tell)
    heard = store.feed.wait_for_interrupts(0)
    if store.backend.kind == "sqlite":
        assert heard is None
    else:  # (the announcement may come after listening began, or before)
        assert heard is not None and heard[0] is True and set(heard[1]) <= {(1, "ses_a")}
