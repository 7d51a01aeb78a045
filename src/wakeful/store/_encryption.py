"""Turning encryption on for a store: opening one with its key, encrypting one in place, and
rotating its master key (docs/encryption.md).

Invariant: a store with an `encryption` row is never written without its cipher attached (an
open without the key, or with another key, fails before anything is written), and a store
without one gets a row only when it is new (no session yet) or through `encrypt_store`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import TYPE_CHECKING

from .._ids import random_hex
from ..errors import UsageError
from ._cipher import SEALED, Cipher, keyed, register, sealed
from ._encryption_state import Wanted, settings_keys, wanted
from ._encryption_state import state as _state
from ._keys import (
    KEY_BYTES,
    KEYRING_ENV,
    MASTER_ENV,
    MASTER_FILE_ENV,
    KeyProvider,
    Keyring,
    KeyringHead,
    check_context,
    new_head,
    opens,
    session_context,
)
from ._session_key import SESSION_KEY

if TYPE_CHECKING:
    from ..config import EncryptionConfig
    from ._backend import Backend, Tx

ENCRYPT_BATCH = 50  # sessions sealed per transaction by `encrypt_store`


def shown_url(url: str) -> str:
    """A store's URL as an error shows it (a PostgreSQL password masked)."""
    return re.sub(r"://([^:@/]+):[^@/]*@", r"://\1:***@", url)


def keyring_path(backend: Backend, configured: str | None = None) -> str:
    """Where the store's keyring is: as configured (`[encryption] keyring`, `$WAKEFUL_KEYRING`),
    else beside a SQLite file (`<file>.keyring`); a PostgreSQL store must name one."""
    path = configured or os.environ.get(KEYRING_ENV)
    if path:
        return os.path.expanduser(path)
    if backend.kind == "sqlite":
        return backend.url + ".keyring"
    raise UsageError(
        f"store {shown_url(backend.url)}: an encrypted PostgreSQL store needs a keyring file "
        f"([encryption] keyring or ${KEYRING_ENV}; every host that opens the store shares it)"
    )


def attach(backend: Backend, settings: EncryptionConfig | None = None) -> None:
    """Open the store's encryption with the configured master key (`settings`, else the
    environment, else `wakeful.toml` when the store is encrypted): an encrypted store gets its
    cipher, a new store with a key becomes encrypted, and an unencrypted store with sessions
    in it stays as it is only without a key (`UsageError` otherwise: encrypt it first). Every
    failure is one `UsageError` naming the store and the key, raised before anything is
    written."""
    asked = wanted(backend, settings)
    if asked is not None:
        attach_wanted(backend, settings, asked)


def attach_wanted(backend: Backend, settings: EncryptionConfig | None, asked: Wanted) -> None:
    """`attach` once `_encryption_state.wanted` found something to attach (`open_store` asks
    it first, and imports this module only then)."""
    master, keyring, found, used = asked
    if master is None and settings is None:  # encrypted: the key may be in wakeful.toml
        from ..config import load_config

        master, keyring = settings_keys(load_config().encryption)
    attach_with(backend, master, keyring, found, used)


def attach_with(
    backend: Backend,
    master: KeyProvider | None,
    keyring: str | None,
    found: tuple[str, str] | None,
    used: bool,
) -> None:
    """`attach` with the master key and keyring path resolved."""
    url = shown_url(backend.url)
    if master is None:
        raise UsageError(
            f"store {url} is encrypted and no master key is set (${MASTER_ENV}, "
            f"${MASTER_FILE_ENV} or [encryption] key_file in wakeful.toml)"
        )
    if found is None and used:
        raise UsageError(
            f"store {url} is not encrypted, and a master key is set ({master.name}): encrypt "
            "it with `wakeful store encrypt`, or unset the key to use it unencrypted"
        )
    path = keyring_path(backend, keyring)
    store_id = found[0] if found else _initialize(backend, master, path, "on")
    backend.cipher = _opened(backend, master, path, store_id)


def _opened(backend: Backend, master: KeyProvider, path: str, store_id: str) -> Cipher:
    ring = Keyring(path)
    url = shown_url(backend.url)
    if not ring.exists():
        raise UsageError(f"store {url} is encrypted and its keyring {path} is missing")
    ring.load()
    assert ring.head is not None
    if ring.head.store_id != store_id:
        raise UsageError(
            f"keyring {path} belongs to store {ring.head.store_id}, not to {url} ({store_id})"
        )
    if not opens(ring.head, master):
        raise UsageError(
            f"store {url}: master key {master.name} (id {master.key_id}) does not open its "
            f"keyring {path} (written under key id {ring.head.key_id}); nothing was written"
        )
    cipher = Cipher(store_id, master, ring, backend.url)
    register(cipher)
    return cipher


def _initialize(backend: Backend, master: KeyProvider, path: str, state: str) -> str:
    """Make the store's keyring (or adopt the one at `path`) and record the store as
    encrypted; return its store id."""
    ring = Keyring(path)
    with ring.locked():
        if ring.exists():
            ring.load(force=True)
            assert ring.head is not None
            store_id = ring.head.store_id
        else:
            store_id = random_hex(8)
            ring.rewrite(new_head(store_id, master), {})
    with backend.transaction(write=True) as tx:  # two first opens at once: one row, one id
        tx.run(
            "INSERT INTO encryption (id, store_id, state) VALUES (1, ?, ?) "
            "ON CONFLICT (id) DO NOTHING",
            (store_id, state),
        )
        row = tx.one("SELECT store_id FROM encryption")
        assert row is not None
        if row[0] != store_id:
            raise UsageError(f"keyring {path} belongs to store {store_id}, not to {row[0]}")
    return store_id


# -- wakeful store encrypt ------------------------------------------------------------------------


def encrypt_store(
    backend: Backend,
    master: KeyProvider,
    keyring: str | None = None,
    progress: Callable[[int], None] | None = None,
) -> int:
    """Seal an existing store in place, a batch of sessions per transaction, and return how
    many sessions were sealed. Resumable: the `encryption` row records the last session done,
    and a row already sealed is left alone, so a rerun after a kill goes on where it stopped
    (and a rerun of a finished one seals what a process without the key wrote since). Blobs
    are sealed after the sessions; a SQLite file is vacuumed at the end, so the pages that held
    plain text are gone from it and its WAL."""
    found, _used = _state(backend)
    path = keyring_path(backend, keyring)
    store_id = found[0] if found else _initialize(backend, master, path, "encrypting")
    cipher = backend.cipher = _opened(backend, master, path, store_id)
    done = 0
    while True:
        with backend.transaction(write=True) as tx:
            row = tx.one("SELECT after_id FROM encryption")
            after = "" if row is None or row[0] is None else str(row[0])
            batch = [
                str(r[0])
                for r in tx.all(
                    "SELECT id FROM sessions WHERE id > ? ORDER BY id LIMIT ?",
                    (after, ENCRYPT_BATCH),
                )
            ]
            for sid in batch:
                _seal_session(tx, cipher, sid)
            if batch:
                tx.run("UPDATE encryption SET state = 'encrypting', after_id = ?", (batch[-1],))
        done += len(batch)
        if progress is not None and batch:
            progress(done)
        _crash_point("encrypt.batch")
        if not batch:
            break
    _seal_blobs(backend, cipher)
    with backend.transaction(write=True) as tx:
        tx.run("UPDATE encryption SET state = 'on', after_id = NULL")
    _compact(backend)
    return done


_hits: list[int] = []


def _crash_point(label: str) -> None:
    """The crash tests' `WAKEFUL_CRASH_AT=LABEL@N` (as `runner._crashpoints`, which the store
    cannot import): SIGKILL this process at the N-th hit. A no-op when the variable is unset."""
    name, _, nth = os.environ.get("WAKEFUL_CRASH_AT", "").partition("@")
    if name != label:
        return
    _hits.append(1)
    if len(_hits) >= int(nth or 1):
        import signal

        os.kill(os.getpid(), signal.SIGKILL)


# The columns that hold a session's content, besides its events: (table, key columns, column).
_CONTENT = (
    ("sessions", ("id",), "title"),
    ("sessions", ("id",), "metadata"),
    ("work_state", ("session_id", "kind"), "value"),
    ("extension_state", ("session_id", "namespace", "key"), "value"),
    ("turns", ("session_id", "turn_id"), "error"),
    ("retry_state", ("session_id",), "error"),
    ("tool_calls", ("session_id", "message_id", "call_id"), "name"),
    ("artifacts", ("id",), "label"),
    ("artifacts", ("id",), "meta"),
)


def _seal_session(tx: Tx, cipher: Cipher, sid: str) -> None:
    """Seal every content row of one session still in the clear, and index it again as keyed
    hashes (its plain index rows go)."""
    from ._search import TITLE_SEQ, index_message, index_title
    from ._search_log import session_entries
    from ._transcript import transcript_in

    if tx.kind == "sqlite":  # its index entries follow the events' bytes (`_search_log`)
        tx.run(session_entries("delete"), (sid,))
    for seq, data in tx.all(
        "SELECT seq, data FROM events WHERE session_id = ? AND substr(data, 1, 1) <> ?",
        (sid, SEALED),
    ):
        tx.run(
            f"UPDATE event_log SET data = ? WHERE sk = {SESSION_KEY} AND seq = ?",
            (cipher.seal(sid, str(data)), sid, seq),
        )
    if tx.kind == "sqlite":
        tx.run(session_entries("insert"), (sid,))
    for table, keys, column in _CONTENT:
        owner = "id" if table == "sessions" else "session_id"
        for row in tx.all(
            f"SELECT {', '.join(keys)}, {column} FROM {table} WHERE {owner} = ? "
            f"AND {column} IS NOT NULL AND substr({column}, 1, 1) <> ?",
            (sid, "\x1f"),
        ):
            where = " AND ".join(f"{k} = ?" for k in keys)
            tx.run(
                f"UPDATE {table} SET {column} = ? WHERE {where}",
                (sealed(cipher, sid, str(row[-1])), *row[:-1]),
            )
    _key_session(tx, cipher, sid)
    tx.run("DELETE FROM search_docs WHERE session_id = ?", (sid,))
    title = tx.one("SELECT title FROM sessions WHERE id = ?", (sid,))
    from ._cipher import opened

    index_title(tx, sid, opened(title[0]) if title and title[0] else None)
    for seq, message in transcript_in(tx, sid):
        if seq != TITLE_SEQ:
            index_message(tx, sid, seq, message)


def _key_session(tx: Tx, cipher: Cipher, sid: str) -> None:
    """The session's values an encrypted store compares without reading, as keyed hashes:
    its inputs' content digests, its artifacts' uris (each first sealed in `uri_sealed`)."""
    from ._inbox import DIGEST_PURPOSE
    from ._shaped import ARTIFACT_URI

    for input_id, digest in tx.all(
        "SELECT input_id, digest FROM inbox WHERE session_id = ? AND substr(digest, 1, 1) <> ?",
        (sid, SEALED),
    ):
        tx.run(
            "UPDATE inbox SET digest = ? WHERE session_id = ? AND input_id = ?",
            (keyed(cipher, DIGEST_PURPOSE, str(digest)), sid, input_id),
        )
    for artifact_id, uri in tx.all(
        "SELECT id, uri FROM artifacts WHERE session_id = ? AND uri_sealed IS NULL", (sid,)
    ):
        tx.run(
            "UPDATE artifacts SET uri = ?, uri_sealed = ? WHERE id = ?",
            (keyed(cipher, ARTIFACT_URI, str(uri)), cipher.seal(sid, str(uri)), artifact_id),
        )


def _seal_blobs(backend: Backend, cipher: Cipher) -> None:
    """Move each blob a session references under a content key of its own, its references
    holding the key (`_blob_keys`); seal a blob no session references under the store's blob
    key. A batch per transaction, in digest order; a blob already under a content key is left
    alone, so a rerun goes on after a kill (and upgrades a store encrypted before migration 29)."""
    from ._blob_keys import BLOB_SEALED, seal_with, wrapped_key

    after = ""
    while True:
        with backend.transaction(write=True) as tx:
            rows = tx.all(
                "SELECT digest, data FROM blobs WHERE digest > ? ORDER BY digest LIMIT 100",
                (after,),
            )
            for digest, data in rows:
                d, raw = str(digest), bytes(data)
                if raw.startswith(BLOB_SEALED):
                    continue
                plain = cipher.open_blob(d, raw)
                refs = [str(r[0]) for r in tx.all(BLOB_REFS_SQL, (d,))]
                if not refs:  # no session to hold a key: the store's blob key
                    if plain is raw:  # not sealed yet
                        tx.run(UPDATE_BLOB, (cipher.seal_blob(d, raw), d))
                    continue
                key = os.urandom(KEY_BYTES)
                tx.run(UPDATE_BLOB, (seal_with(key, d, plain), d))
                for sid in refs:
                    tx.run(
                        "UPDATE blob_refs SET sealed_key = ? WHERE session_id = ? AND digest = ?",
                        (wrapped_key(cipher, sid, d, key), sid, d),
                    )
        _crash_point("encrypt.blobs")
        if not rows:
            return
        after = str(rows[-1][0])


BLOB_REFS_SQL = "SELECT session_id FROM blob_refs WHERE digest = ?"
UPDATE_BLOB = "UPDATE blobs SET data = ? WHERE digest = ?"


def _compact(backend: Backend) -> None:
    """SQLite: merge the search index's segments, rewrite the file and empty the WAL, so no
    page of it still holds the plain text the store had (PostgreSQL: docs say VACUUM FULL)."""
    if backend.kind != "sqlite":
        return
    with backend.transaction(write=True) as tx:
        tx.run("INSERT INTO search_fts (search_fts) VALUES ('optimize')")
    vacuum = getattr(backend, "vacuum", None)
    if vacuum is not None:
        vacuum()


# -- wakeful store rotate-key ---------------------------------------------------------------------


def rotate_key(backend: Backend, new: KeyProvider) -> int:
    """Wrap the store's keys (its own and every session's data key) under `new` instead of the
    master key it was opened with, and return how many data keys were rewrapped. Everything is
    unwrapped before anything is written, and the keyring is replaced as a whole, so a failure
    leaves the old keyring. Data is not touched: the data keys stay the same."""
    cipher = backend.cipher
    if cipher is None:
        raise UsageError(f"store {shown_url(backend.url)} is not encrypted: nothing to rotate")
    old, ring, store_id = cipher.master, cipher.keyring, cipher.store_id
    with ring.locked():
        ring.load(force=True)
        head = ring.head
        assert head is not None
        ctx = check_context(store_id)
        search, blob = old.unwrap(head.search, ctx), old.unwrap(head.blob, ctx)
        keys = {
            sid: old.unwrap(w, session_context(store_id, sid)) for sid, w in ring.wrapped.items()
        }
        fresh = new_head(store_id, new)
        rotated = KeyringHead(
            store_id, new.key_id, fresh.check, new.wrap(search, ctx), new.wrap(blob, ctx)
        )
        wrapped = {sid: new.wrap(k, session_context(store_id, sid)) for sid, k in keys.items()}
        ring.rewrite(rotated, wrapped)
    cipher.master = new
    return len(wrapped)
