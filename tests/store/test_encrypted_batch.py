"""An encrypted store seals what a batch of admissions writes too (`SqlStore.admit_together`,
the server's admission lane), on both backends: the prompts' text is in no event row, and the
admitted items read back whole (issue 39 item 3, with item 1's actor)."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from tests.pg import fresh_database
from wakeful.config import EncryptionConfig
from wakeful.store import AdmissionRequest, new_master_key, open_store

pytestmark = pytest.mark.usefixtures("own_keys")  # keys of their own, never the run's
MARK = "okapibatch4711"


def _admit_two(url: str, settings: EncryptionConfig) -> list[str]:
    store = open_store(url, encryption=settings)
    try:
        sids = [store.create_session(title="t").id for _ in range(2)]
        outs = store.admit_together(
            [
                AdmissionRequest(sid, None, "user", {"text": f"{MARK} {sid}"}, actor="alice")
                for sid in sids
            ]
        )
        assert not [o for o in outs if isinstance(o, Exception)]
        for sid in sids:
            [item] = store.pending(sid)
            assert item.payload == {"text": f"{MARK} {sid}"}
        return sids
    finally:
        store.close()


def _settings(tmp_path: Path) -> EncryptionConfig:
    key = tmp_path / "master.key"
    key.write_text(new_master_key() + "\n")
    return EncryptionConfig(key_file=str(key), keyring=str(tmp_path / "keyring"))


@pytest.mark.postgres
def test_a_batch_of_admissions_is_sealed_on_postgresql(tmp_path: Path):
    with fresh_database() as url:
        _admit_two(url, _settings(tmp_path))
        with psycopg.connect(url) as conn:
            rows = conn.execute("SELECT data FROM events WHERE type = 'inbox.enqueued'").fetchall()
        assert len(rows) == 2
        assert not [r for r in rows if MARK in str(r[0])], "a prompt stored in the clear"


def test_a_batch_of_admissions_is_sealed_on_sqlite(tmp_path: Path):
    db = tmp_path / "s.db"
    _admit_two(str(db), _settings(tmp_path))
    held = b"".join(p.read_bytes() for p in tmp_path.glob("s.db*"))
    assert MARK.encode() not in held
