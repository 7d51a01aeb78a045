"""Blobs of an encrypted store under keys their sessions hold (issue 39 item 5, docs/encryption.md
"Blobs"): after a delete, a copy of the store taken before it cannot give back a file a tool
wrote or an image the session was sent, even with the master key; a blob another session still
holds stays readable through it; `wakeful store encrypt` moves blobs of a plain store, and of
one encrypted before blobs had keys of their own, under session keys, resumable after a kill."""

from __future__ import annotations

import base64
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.store.test_encryption import MARK_FILE, drive, encryption, key_file, sqlite_files
from wakeful.config import EncryptionConfig
from wakeful.errors import StoreError
from wakeful.store import SqlStore, blob_digest, encrypt_store_at, open_store

pytestmark = pytest.mark.usefixtures("own_keys")  # keys of their own, never the run's
WAKEFUL = str(Path(sys.executable).with_name("wakeful"))
SHARED = b"\x89PNG shared zebraimage4711"  # an image two sessions were sent
OWN = b"\x89PNG own zebraimage4712"  # an image only the deleted session was sent


def image(data: bytes) -> dict[str, object]:
    return {
        "blocks": [
            {"type": "image", "media_type": "image/png", "data": base64.b64encode(data).decode()}
        ]
    }


def blob_rows(db: Path) -> list[tuple[str, bytes, int]]:
    """(digest, the first bytes of its data, how many of its references hold a key)."""
    conn = sqlite3.connect(db)
    try:
        return [
            (str(d), bytes(data)[:6], int(k))
            for d, data, k in conn.execute(
                "SELECT b.digest, b.data, (SELECT count(sealed_key) FROM blob_refs r "
                "WHERE r.digest = b.digest) FROM blobs b ORDER BY b.digest"
            )
        ]
    finally:
        conn.close()


async def test_delete_holds_for_blobs_against_a_copy_taken_before_it(tmp_path: Path):
    db = tmp_path / "sessions.db"
    settings = encryption(tmp_path, key_file(tmp_path))
    sid = await drive(str(db), tmp_path, settings)  # its tool wrote MARK_FILE: a blob
    store = open_store(str(db), encryption=settings)
    try:
        store.admit(sid, None, "user", image(SHARED), "queue")
        store.admit(sid, None, "user", image(OWN), "queue")
        other = store.create_session().id
        store.admit(other, None, "user", image(SHARED), "queue")
        written = blob_digest(MARK_FILE.encode())
        assert store.get_blob(written) == MARK_FILE.encode()
        assert store.get_blobs([blob_digest(SHARED), blob_digest(OWN)]) == {
            blob_digest(SHARED): SHARED,
            blob_digest(OWN): OWN,
        }
        copy = tmp_path / "copy"
        copy.mkdir()
        for path in sqlite_files(db):  # a backup of the database, WAL included
            if path.exists():
                shutil.copy(path, copy / path.name)
        store.delete(sid)
        assert store.get_blob(blob_digest(SHARED)) == SHARED  # the other session still has it
    finally:
        store.close()
    shutil.copy(db.with_name(db.name + ".keyring"), copy / "sessions.db.keyring")
    old = open_store(str(copy / "sessions.db"), encryption=settings)
    try:
        for gone in (written, blob_digest(OWN)):  # the rows are there, their keys are not
            with pytest.raises(StoreError, match="no session that holds its key"):
                old.get_blob(gone)
        assert old.get_blob(blob_digest(SHARED)) == SHARED  # through the live session's key
    finally:
        old.close()


def test_a_fork_holds_its_own_wrapping_of_a_blob_key(tmp_path: Path):
    settings = encryption(tmp_path, key_file(tmp_path))
    store = open_store(str(tmp_path / "s.db"), encryption=settings)
    try:
        sid = store.create_session().id
        store.admit(sid, None, "user", image(OWN), "queue")
        store.promote(sid, idle=True)  # delivered: the message refers to the blob
        fork = store.fork(sid).id
        store.delete(sid)
        assert store.get_session(fork).forked_from == sid
        assert store.get_blob(blob_digest(OWN)) == OWN  # the fork's key opens it
    finally:
        store.close()


def make_plain(db: Path, n_blobs: int) -> tuple[SqlStore, str]:
    store = open_store(str(db))
    sid = store.create_session(title="plain").id
    for n in range(n_blobs):
        store.put_blob(f"zebrablob {n}".encode(), sid)
    store.put_blob(b"zebraloose blob")  # no session: the store's blob key
    return store, sid


def encrypt(db: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [WAKEFUL, "store", "encrypt", "--db", str(db)],
        env=os.environ | env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_store_encrypt_moves_blobs_under_session_keys_resuming_after_a_kill(tmp_path: Path):
    db = tmp_path / "sessions.db"
    store, sid = make_plain(db, 150)  # two batches of 100
    store.close()
    key = key_file(tmp_path)
    env = {"WAKEFUL_MASTER_KEY_FILE": str(key), "HOME": str(tmp_path)}
    killed = encrypt(db, env | {"WAKEFUL_CRASH_AT": "encrypt.blobs@1"})
    assert killed.returncode == -9, killed.stderr
    sealed = [head.startswith(b"\x1fwkb") for _d, head, _k in blob_rows(db)]
    assert sealed == [True] * 100 + [False] * 51  # the first batch, in digest order
    done = encrypt(db, env)
    assert done.returncode == 0, done.stderr
    rows = blob_rows(db)
    loose = blob_digest(b"zebraloose blob")
    for digest, head, keys in rows:
        assert (head, keys) == ((b"\x1fwkb1:", 0) if digest == loose else (b"\x1fwkb2:", 1))
    raw = b"".join(p.read_bytes() for p in sqlite_files(db) if p.exists())
    assert b"zebrablob" not in raw and b"zebraloose" not in raw
    opened = open_store(str(db), encryption=EncryptionConfig(key_file=str(key)))
    try:
        assert opened.get_blob(blob_digest(b"zebrablob 149")) == b"zebrablob 149"
        assert opened.get_blob(loose) == b"zebraloose blob"
    finally:
        opened.close()


def test_store_encrypt_moves_blobs_of_an_older_encrypted_store(tmp_path: Path):
    """A store encrypted before migration 29 kept every blob under the store's blob key and no
    key in its references: it still reads, and `store encrypt` moves its blobs."""
    db = tmp_path / "sessions.db"
    settings = encryption(tmp_path, key_file(tmp_path))
    store = open_store(str(db), encryption=settings)
    cipher = store.backend.cipher
    assert cipher is not None
    try:
        sid = store.create_session().id
        digest = store.put_blob(OWN, sid)
        with store.backend.transaction(write=True) as tx:  # as the store was then
            tx.run("UPDATE blobs SET data = ?", (cipher.seal_blob(digest, OWN),))
            tx.run("UPDATE blob_refs SET sealed_key = NULL")
        assert store.get_blob(digest) == OWN
    finally:
        store.close()
    assert [(h, k) for _d, h, k in blob_rows(db)] == [(b"\x1fwkb1:", 0)]
    encrypt_store_at(str(db), settings)
    assert [(h, k) for _d, h, k in blob_rows(db)] == [(b"\x1fwkb2:", 1)]
    store = open_store(str(db), encryption=settings)
    try:
        assert store.get_blob(digest) == OWN
    finally:
        store.close()
