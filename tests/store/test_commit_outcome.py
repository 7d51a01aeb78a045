"""A PostgreSQL connection lost during COMMIT: the server may have committed without the
client hearing it. The backend asks the server (`pg_xact_status`) and reports the truth: a
write that committed returns normally (so nobody writes it twice: the torture run once found a
message stored twice this way), one that did not raises a retryable error, and one whose fate
cannot be learned raises `CommitUnknownError`, which is not retryable.

A TCP proxy between the store and the server cuts the connection at the COMMIT: after
forwarding it (the server commits) or before (the server never sees it), or answers the
committed COMMIT with what `pg_terminate_backend` makes a server send when it lands just after
a commit: a FATAL error, the connection closed only a moment later (psycopg raises before it
sees the connection end: the torture run found a message stored twice this way too).
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit, urlunsplit

import pytest

from tests.pg import fresh_database
from wakeful.config import StoreConfig
from wakeful.errors import CommitUnknownError, StoreUnavailableError
from wakeful.events import MessageAdded
from wakeful.messages import user
from wakeful.store import SqlStore, open_store

pytestmark = pytest.mark.postgres

COMMIT = b"COMMIT\x00"  # the statement's text in the Parse message of the extended protocol


def _error_response(severity: str, code: str, text: str) -> bytes:
    """A protocol ErrorResponse message, as the server sends it."""
    fields = (
        b"".join(
            kind + value.encode() + b"\x00"
            for kind, value in ((b"S", severity), (b"V", severity), (b"C", code), (b"M", text))
        )
        + b"\x00"
    )
    return b"E" + (len(fields) + 4).to_bytes(4, "big") + fields


TERMINATED = _error_response(
    "FATAL", "57P01", "terminating connection due to administrator command"
)


class CuttingProxy:
    """Forwards TCP to PostgreSQL; once armed, cuts the next connection that sends COMMIT
    (`after=True`: once the server had time to commit it; `False`: without sending it;
    `"fatal"`: once committed, the client hears `TERMINATED` and the connection ends 0.5 s
    later; `"fatal-now"`: the same without waiting for the commit, which the server still
    makes). With `refuse_after_cut`, every later connection is refused too."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.armed: bool | str | None = None  # None: forward everything; else the mode
        self.refuse_after_cut = False
        self.cuts = 0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self.refuse_after_cut and self.cuts:
                client.close()
                continue
            server = socket.create_connection(self.target)
            mute = threading.Event()  # set: the server's answers are no longer passed on
            threading.Thread(target=self._up, args=(client, server, mute), daemon=True).start()
            threading.Thread(target=self._down, args=(server, client, mute), daemon=True).start()

    def _up(self, client: socket.socket, server: socket.socket, mute: threading.Event) -> None:
        tail = b""  # the end of the previous chunk: COMMIT may arrive split across two
        try:
            while data := client.recv(65536):
                after = self.armed
                seen, tail = tail + data, data[-len(COMMIT) :]
                if after is not None and COMMIT in seen:
                    self.armed = None
                    mute.set()
                    if after:
                        server.sendall(data)
                        if after != "fatal-now":
                            time.sleep(0.5)  # the server commits; its answer is never passed on
                    if after in ("fatal", "fatal-now"):
                        client.sendall(TERMINATED)
                        time.sleep(0.5)
                    self.cuts += 1
                    break
                server.sendall(data)
        except OSError:
            pass
        for s in (client, server):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)  # (a bare close waits for the other thread's recv)
            s.close()

    def _down(self, server: socket.socket, client: socket.socket, mute: threading.Event) -> None:
        try:
            while (data := server.recv(65536)) and not mute.is_set():
                client.sendall(data)
        except OSError:
            pass

    def close(self) -> None:
        self._listener.close()


@contextmanager
def proxied_store(
    options: StoreConfig | None = None,
) -> Iterator[tuple[CuttingProxy, SqlStore, SqlStore]]:
    with fresh_database() as url:
        parts = urlsplit(url)
        proxy = CuttingProxy(parts.hostname or "127.0.0.1", parts.port or 5432)
        netloc = (
            f"{parts.username}@127.0.0.1:{proxy.port}"
            if parts.username
            else (f"127.0.0.1:{proxy.port}")
        )
        through = open_store(urlunsplit(parts._replace(netloc=netloc)), options=options)
        direct = open_store(url)
        try:
            yield proxy, through, direct
        finally:
            through.close()
            direct.close()
            proxy.close()


def _message(text: str) -> MessageAdded:
    return MessageAdded(message=user(text, id=f"msg_{text}"))


@pytest.mark.parametrize("mode", [True, "fatal", "fatal-now"])
def test_a_commit_the_server_made_is_a_success_and_is_stored_once(mode: bool | str):
    """The answer is lost (`True`) or is a FATAL error (`fatal`, `fatal-now`): either way the
    backend asks, finds the transaction committed and reports success."""
    with proxied_store() as (proxy, store, direct):
        store.create_session("ses_c")
        proxy.armed = mode
        store.append("ses_c", [_message("one")])
        assert proxy.cuts == 1, "the proxy never cut a COMMIT"
        store.append("ses_c", [_message("two")])
        assert [m.id for m in direct.messages("ses_c")] == ["msg_one", "msg_two"]


def test_a_commit_the_server_never_saw_is_retryable_and_stored_nothing():
    with proxied_store() as (proxy, store, direct):
        store.create_session("ses_c")
        proxy.armed = False
        with pytest.raises(StoreUnavailableError):
            store.append("ses_c", [_message("one")])
        assert proxy.cuts == 1
        assert direct.messages("ses_c") == []
        store.append("ses_c", [_message("one")])  # the retry
        assert [m.id for m in direct.messages("ses_c")] == ["msg_one"]


def test_an_outcome_nobody_can_tell_is_not_retryable():
    quick = StoreConfig(statement_timeout_ms=200, idle_in_transaction_timeout_ms=200)
    with proxied_store(quick) as (proxy, store, _direct):
        store.create_session("ses_c")
        proxy.armed, proxy.refuse_after_cut = True, True
        with pytest.raises(CommitUnknownError) as caught:
            store.append("ses_c", [_message("one")])
        assert not caught.value.retryable
        assert "read the store before retrying" in str(caught.value)
