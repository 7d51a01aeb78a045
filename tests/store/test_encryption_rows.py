"""Encryption at rest beyond event bodies (issue 39 item 3, docs/encryption.md "What is
encrypted"): an error's text, a tool's name, an artifact's uri, label and meta, and an input's
content digest are not in the clear in an encrypted store (its file, its WAL, a `pg_dump`),
and what reads them still works: turns, artifacts by uri, idempotent admission."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from tests.allow import ALLOW_WRITES
from tests.pg import ADMIN_URL, fresh_database
from tests.store.test_encryption import encryption, file_bytes, key_file, run, sqlite_files
from wakeful._checks import write_script
from wakeful.config import Config, EncryptionConfig
from wakeful.errors import ConflictError
from wakeful.execution import Runtime
from wakeful.store import AdmissionRequest, open_store

pytestmark = pytest.mark.usefixtures("own_keys")  # keys of their own, never the run's
MARK_PATH = "zebrapath4711"  # the name of a file a tool writes: an artifact's uri and label
MARK_ERROR = "zebraerror4711"  # a prompt no rule matches: the turn's error quotes it
MARK_META = "zebrameta4711"
MARKS = (MARK_PATH, MARK_ERROR, MARK_META)


def script(root: Path) -> str:
    """`remember` writes a file named after the marker; anything else matches no rule, so the
    turn fails with an error that quotes the prompt."""
    return write_script(
        root / "rows.json",
        [
            {
                "match": "remember",
                "replies": [
                    {
                        "tool_calls": [
                            {
                                "name": "write_file",
                                "input": {"path": f"{MARK_PATH}.txt", "content": "x"},
                            }
                        ]
                    },
                    {"text": "noted"},
                ],
            }
        ],
    )


async def drive(db: str, root: Path, settings: EncryptionConfig) -> str:
    (root / "work").mkdir(exist_ok=True)
    config = Config(permissions=ALLOW_WRITES, encryption=settings)
    rt = Runtime(db, model=script(root), workspace=root / "work", config=config)
    try:
        sid = rt.send("please remember this", resume=False).session_id
        [turn] = await rt.resume(sid)
        assert turn.outcome == "completed", turn
        rt.send(f"what about {MARK_ERROR}", resume=False, session_id=sid)
        [failed] = await rt.resume(sid)
        assert failed.outcome == "blocked" and MARK_ERROR in (failed.error or ""), failed
        return sid
    finally:
        await rt.aclose()


def check_reads(url: str, sid: str, settings: EncryptionConfig) -> None:
    """Everything still reads as it was written, through the store's API."""
    store = open_store(url, encryption=settings)
    try:
        [artifact] = store.artifacts(sid)
        assert MARK_PATH in artifact.uri and artifact.label == f"{MARK_PATH}.txt"
        assert [a.id for a in store.find_artifacts(artifact.uri)] == [artifact.id]
        link_uri, shaping = "https://x.test/a", store.shaping
        again = shaping.add_artifact(sid, "link", link_uri, "a", {"note": MARK_META})
        upserted = shaping.add_artifact(sid, "link", link_uri, "b")
        assert upserted.id == again.id
        [link] = store.artifacts(sid, kind="link")
        assert (link.label, link.meta) == ("b", {"note": MARK_META})
        assert [a.id for a in store.find_artifacts(link_uri)] == [again.id]
        errors = [t.error for t in store.turns(sid) if t.error]
        assert len(errors) == 1 and MARK_ERROR in errors[0]
        assert {c.name for c in store.tool_calls(sid)} == {"write_file"}
        with store.backend.transaction(write=False) as tx:
            columns = [
                *tx.all("SELECT error FROM turns WHERE error IS NOT NULL"),
                *tx.all("SELECT name FROM tool_calls"),
                *tx.all("SELECT uri, uri_sealed, label, meta FROM artifacts"),
                *tx.all("SELECT digest FROM inbox"),
            ]
        for row in columns:  # sealed texts and keyed hashes start with \x1f
            assert all(v is None or str(v).startswith("\x1f") for v in row), row
    finally:
        store.close()


async def test_errors_tool_names_and_artifacts_are_absent_from_the_file_and_its_wal(
    tmp_path: Path,
):
    db = tmp_path / "sessions.db"
    settings = encryption(tmp_path, key_file(tmp_path))
    sid = await drive(str(db), tmp_path, settings)
    assert (tmp_path / "work" / f"{MARK_PATH}.txt").exists()  # the marker was really written
    check_reads(str(db), sid, settings)
    raw = file_bytes(sqlite_files(db))
    for mark in MARKS:
        assert mark.encode() not in raw


@pytest.mark.postgres
async def test_errors_tool_names_and_artifacts_are_absent_from_a_pg_dump(tmp_path: Path):
    if shutil.which("pg_dump") is None:
        pytest.skip("pg_dump is not installed")
    settings = encryption(tmp_path, key_file(tmp_path), tmp_path / "pg.keyring")
    with fresh_database() as url:
        sid = await drive(url, tmp_path, settings)
        check_reads(url, sid, settings)
        base = ADMIN_URL.rsplit("/", 1)[0]
        dump = await asyncio.to_thread(run, ["pg_dump", f"{base}/{url.rsplit('/', 1)[1]}"])
        assert dump.returncode == 0, dump.stderr
        assert sid.encode() in dump.stdout
        for mark in MARKS:
            assert mark.encode() not in dump.stdout


def test_admission_stays_idempotent_with_a_keyed_digest(tmp_path: Path):
    settings = encryption(tmp_path, key_file(tmp_path))
    store = open_store(str(tmp_path / "s.db"), encryption=settings)
    try:
        sid = store.create_session().id
        first = store.admit(sid, "in_1", "user", {"text": "hello"}, "queue")
        again = store.admit(sid, "in_1", "user", {"text": "hello"}, "queue")
        assert first.created and not again.created
        with pytest.raises(ConflictError):
            store.admit(sid, "in_1", "user", {"text": "another"}, "queue")
        with store.backend.transaction(write=False) as tx:
            [(digest,)] = tx.all("SELECT digest FROM inbox")
        assert str(digest).startswith("\x1fwkh1:")
    finally:
        store.close()


@pytest.mark.postgres
def test_admissions_together_on_postgresql_are_sealed(tmp_path: Path):
    """`admit_together` admits on the server, one call per input: its event JSON is sealed and
    its digest keyed like a lone admission's."""
    settings = encryption(tmp_path, key_file(tmp_path), tmp_path / "pg.keyring")
    with fresh_database() as url:
        store = open_store(url, encryption=settings)
        try:
            sid = store.create_session().id
            requests = [
                AdmissionRequest(sid, f"in_{n}", "user", {"text": f"{MARK_ERROR} {n}"}, "queue")
                for n in range(3)
            ]
            store.admit_together(requests)
            with store.backend.transaction(write=False) as tx:
                data = [str(r[0]) for r in tx.all("SELECT data FROM events")]
                digests = [str(r[0]) for r in tx.all("SELECT digest FROM inbox")]
            assert len(digests) == 3 and all(d.startswith("\x1f") for d in digests)
            assert not any(MARK_ERROR in d for d in data)
            assert [i.payload["text"] for i in store.pending(sid)] == [
                f"{MARK_ERROR} {n}" for n in range(3)
            ]
        finally:
            store.close()


def test_store_encrypt_seals_what_an_older_encrypted_store_left_clear(tmp_path: Path):
    """An encrypted store of the version before kept errors, tool names, artifacts and input
    digests in the clear: `store encrypt` run again seals and keys them, and they read back."""
    from wakeful.events import ToolCallStarted
    from wakeful.store import encrypt_store_at

    db = str(tmp_path / "s.db")
    settings = encryption(tmp_path, key_file(tmp_path))
    store = open_store(db, encryption=settings)
    try:
        sid = store.create_session().id
        store.admit(sid, "in_1", "user", {"text": MARK_ERROR}, "queue")
        store.append(sid, [ToolCallStarted(message_id="msg_1", call_id="c1", name="shell")])
        uri = f"file:///work/{MARK_PATH}.txt"
        store.shaping.add_artifact(sid, "file", uri, MARK_PATH, {"note": MARK_META})
        with store.backend.transaction(write=True) as tx:  # as the version before wrote them
            tx.run("UPDATE artifacts SET uri = ?, uri_sealed = NULL, label = ?", (uri, MARK_PATH))
            tx.run("UPDATE tool_calls SET name = 'shell'")
            tx.run("UPDATE inbox SET digest = 'abc123'")
    finally:
        store.close()
    encrypt_store_at(db, settings)
    raw = file_bytes(sqlite_files(tmp_path / "s.db"))
    assert MARK_PATH.encode() not in raw and b"abc123" not in raw
    store = open_store(db, encryption=settings)
    try:
        [artifact] = store.find_artifacts(uri)
        assert (artifact.uri, artifact.label) == (uri, MARK_PATH)
        assert [c.name for c in store.tool_calls(sid)] == ["shell"]
    finally:
        store.close()
