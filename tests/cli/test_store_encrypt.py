"""`wakeful store encrypt` seals an existing store in place and survives a SIGKILL mid-way: a
rerun goes on to the end, and no plain text is left in the file or its WAL (issue 39 item 7)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from wakeful.config import EncryptionConfig
from wakeful.errors import UsageError
from wakeful.events import SessionCreated
from wakeful.store import blob_digest, new_master_key, open_store

pytestmark = pytest.mark.usefixtures("own_keys")  # keys of their own, never the run's
WAKEFUL = str(Path(sys.executable).with_name("wakeful"))
MARK = "quokkasecret9931"
SESSIONS = 130  # three batches of 50: a kill after the first leaves sealed and plain sessions


def make_plain_store(db: Path) -> list[str]:
    store = open_store(str(db))
    sids = [f"ses_{n:04d}" for n in range(SESSIONS)]
    try:
        for sid in sids:
            created = SessionCreated(title=f"{MARK} {sid}", agent="build", model="scripted:x")
            store.admit(
                sid, None, "user", {"text": f"tell {MARK} to {sid}"}, "queue", create=created
            )
        store.put_blob(f"blob {MARK}".encode(), sids[0])
    finally:
        store.close()
    return sids


def encrypt(db: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [WAKEFUL, "store", "encrypt", "--db", str(db)],
        env=os.environ | env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def sealed_counts(db: Path) -> tuple[int, int]:
    import sqlite3

    conn = sqlite3.connect(db)
    try:
        rows = conn.execute("SELECT substr(data, 1, 1) = char(31) FROM events").fetchall()
    finally:
        conn.close()
    return sum(1 for (s,) in rows if s), sum(1 for (s,) in rows if not s)


def test_encrypt_resumes_after_sigkill_and_leaves_no_plain_text(tmp_path: Path):
    db = tmp_path / "sessions.db"
    sids = make_plain_store(db)
    key = tmp_path / "master.key"
    key.write_text(new_master_key())
    env = {"WAKEFUL_MASTER_KEY_FILE": str(key), "HOME": str(tmp_path)}

    killed = encrypt(db, env | {"WAKEFUL_CRASH_AT": "encrypt.batch@1"})
    assert killed.returncode == -9, killed.stderr
    sealed, plain = sealed_counts(db)
    assert sealed > 0 and plain > 0  # killed mid-way, for real
    with pytest.raises(UsageError, match="is encrypted and no master key is set"):
        open_store(str(db))  # half-encrypted is encrypted: no plain open

    done = encrypt(db, env)
    assert done.returncode == 0, done.stderr
    assert "encrypted:" in done.stdout
    assert sealed_counts(db)[1] == 0
    raw = b"".join(p.read_bytes() for p in tmp_path.glob("sessions.db*") if p.is_file())
    assert MARK.encode() not in raw

    store = open_store(str(db), encryption=EncryptionConfig(key_file=str(key)))
    try:
        assert {r.id for r in store.list_sessions(limit=500).sessions} == set(sids)
        assert store.get_session(sids[-1]).title == f"{MARK} {sids[-1]}"
        [item] = store.pending(sids[7])
        assert item.payload == {"text": f"tell {MARK} to {sids[7]}"}
        hits = store.search(MARK, limit=500).hits
        assert {h.session.id for h in hits} == set(sids)
        assert store.get_blob(blob_digest(f"blob {MARK}".encode())) == f"blob {MARK}".encode()
    finally:
        store.close()

    again = encrypt(db, env)  # a finished store: a rerun seals nothing new and breaks nothing
    assert again.returncode == 0, again.stderr
