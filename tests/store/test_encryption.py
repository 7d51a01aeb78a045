"""Encryption at rest (issue 39 items 3-7, docs/encryption.md): what an encrypted store holds,
what it still does without keys, deletion that holds against an earlier copy, wrong and missing
keys, rotation, and `wakeful store encrypt` of an existing store in place."""

from __future__ import annotations

import asyncio
import hashlib
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.allow import ALLOW_WRITES
from tests.pg import ADMIN_URL, fresh_database
from wakeful._checks import write_script
from wakeful.config import Config, EncryptionConfig
from wakeful.errors import StoreError, UsageError
from wakeful.execution import Runtime
from wakeful.store import blob_digest, new_master_key, open_store, parse_master_key

pytestmark = pytest.mark.usefixtures("own_keys")  # keys of their own, never the run's
MARK_PROMPT = "zebraprompt4711"
MARK_TOOL = "zebratool4711"
MARK_FILE = "zebrafile4711"
MARKS = (MARK_PROMPT, MARK_TOOL, MARK_FILE)
SPLIT_TOOL = f"{MARK_TOOL[:5]}''{MARK_TOOL[5:]}"


def key_file(root: Path, name: str = "master.key") -> Path:
    path = root / name
    path.write_text(new_master_key() + "\n")
    return path


def encryption(root: Path, key: Path, keyring: Path | None = None) -> EncryptionConfig:
    return EncryptionConfig(key_file=str(key), keyring=None if keyring is None else str(keyring))


def script(root: Path) -> str:
    """The prompt's marker goes into a shell command's output and into a written file."""
    return write_script(
        root / "script.json",
        [
            {
                "match": "remember",
                "replies": [
                    {
                        "tool_calls": [
                            # the output joins what the command splits: the output is sealed
                            {"name": "shell", "input": {"command": f"echo {SPLIT_TOOL}"}},
                            {
                                "name": "write_file",
                                "input": {"path": "note.txt", "content": MARK_FILE},
                            },
                        ]
                    },
                    {"text": "noted"},
                ],
            },
            {"match": ".", "replies": [{"text": "ok"}]},
        ],
    )


def runtime(db: str, root: Path, settings: EncryptionConfig) -> Runtime:
    work = root / "work"
    work.mkdir(exist_ok=True)
    config = Config(permissions=ALLOW_WRITES, encryption=settings)
    return Runtime(db, model=script(root), workspace=work, config=config)


def file_bytes(paths: list[Path]) -> bytes:
    return b"".join(p.read_bytes() for p in paths if p.exists())


def sqlite_files(db: Path) -> list[Path]:
    return [db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")]


def snapshot(db: Path) -> bytes:
    """The bytes of a SQLite store's file and WAL (which must hold pages: it is open)."""
    assert db.with_name(db.name + "-wal").stat().st_size > 0
    return file_bytes(sqlite_files(db))


def run(args: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(args, env=env, capture_output=True, timeout=120)


WHILE_OPEN: dict[str, bytes] = {}  # a SQLite store's file and WAL as `drive` left them, open


async def drive(db: str, root: Path, settings: EncryptionConfig) -> str:
    rt = runtime(db, root, settings)
    try:
        sid = rt.send(f"please remember {MARK_PROMPT} for me", resume=False).session_id
        [turn] = await rt.resume(sid)
        assert turn.outcome == "completed", turn
        if "://" not in db:
            WHILE_OPEN[db] = snapshot(Path(db))
        return sid
    finally:
        await rt.aclose()


async def test_markers_are_absent_from_the_file_and_its_wal(tmp_path: Path):
    db = tmp_path / "sessions.db"
    settings = encryption(tmp_path, key_file(tmp_path))
    sid = await drive(str(db), tmp_path, settings)
    # the tool's output and the file's content really carry the markers (in the clear only
    # in the workspace): the shell printed the joined word, the file holds it
    assert (tmp_path / "work" / "note.txt").read_text() == MARK_FILE
    store = open_store(str(db), encryption=settings)
    try:
        assert store.backend.cipher is not None
        text = str([m.model_dump() for m in store.messages(sid)])
        assert all(mark in text for mark in MARKS)
        raw = WHILE_OPEN[str(db)] + file_bytes(sqlite_files(db))
        for mark in (*MARKS, SPLIT_TOOL):
            assert mark.encode() not in raw
        # the session still lists (title opened), searches by an exact word, and exports
        [row] = store.list_sessions().sessions
        assert row.id == sid and MARK_PROMPT in (row.title or "")
        assert [h.session.id for h in store.search(MARK_TOOL).hits] == [sid]
        assert [h.session.id for h in store.search(MARK_PROMPT).hits] == [sid]
        assert store.search("zebrapro").hits == []  # a word, not a prefix of one
        with pytest.raises(UsageError, match="whole words"):
            store.search("zebrapro*")
        with store.backend.transaction(write=False) as tx:
            indexed = " ".join(str(r[0]) for r in tx.all("SELECT body FROM search_docs"))
        assert MARK_PROMPT not in indexed and "please" not in indexed
    finally:
        store.close()


def _export(db: str, sid: str, env: dict[str, str]) -> str:
    import os
    import sys

    wakeful = str(Path(sys.executable).with_name("wakeful"))
    done = subprocess.run(
        [wakeful, "session", "export", sid, "--db", db],
        env=os.environ | env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


async def test_the_cli_reads_an_encrypted_store_with_the_key_from_the_environment(
    tmp_path: Path,
):
    db = tmp_path / "sessions.db"
    key = key_file(tmp_path)
    sid = await drive(str(db), tmp_path, encryption(tmp_path, key))
    out = await asyncio.to_thread(_export, str(db), sid, {"WAKEFUL_MASTER_KEY_FILE": str(key)})
    assert MARK_PROMPT in out and MARK_TOOL in out
    import os
    import sys

    wakeful = str(Path(sys.executable).with_name("wakeful"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("WAKEFUL_MASTER")}
    env["HOME"] = str(tmp_path)  # no wakeful.toml that names a key
    env["XDG_CONFIG_HOME"] = str(tmp_path / ".config")
    done = await asyncio.to_thread(run, [wakeful, "session", "list", "--db", str(db)], env)
    err = done.stderr.decode()
    assert done.returncode == 2 and "Traceback" not in err
    assert err.count("\n") == 1 and "is encrypted and no master key is set" in err


async def test_delete_holds_against_a_copy_taken_before_it(tmp_path: Path):
    db = tmp_path / "sessions.db"
    key = key_file(tmp_path)
    settings = encryption(tmp_path, key)
    sid = await drive(str(db), tmp_path, settings)
    copy = tmp_path / "copy"
    copy.mkdir()
    store = open_store(str(db), encryption=settings)
    try:
        for path in sqlite_files(db):  # the database as a backup would have it (WAL included)
            if path.exists():
                shutil.copy(path, copy / path.name)
        store.delete(sid)
    finally:
        store.close()
    # the copy, opened with the master key and the keyring as it is now: the rows are there,
    # their key is not
    shutil.copy(db.with_name(db.name + ".keyring"), copy / "sessions.db.keyring")
    old = open_store(str(copy / "sessions.db"), encryption=settings)
    try:
        with pytest.raises(StoreError, match="data key"):
            old.messages(sid)
        with pytest.raises(StoreError, match="data key"):
            old.get_session(sid)  # its title is sealed too
    finally:
        old.close()
    raw = file_bytes(sqlite_files(copy / "sessions.db"))
    assert sid.encode() in raw and MARK_PROMPT.encode() not in raw


async def test_a_wrong_or_missing_key_is_one_error_and_writes_nothing(tmp_path: Path):
    db = tmp_path / "sessions.db"
    settings = encryption(tmp_path, key_file(tmp_path))
    await drive(str(db), tmp_path, settings)
    ring = db.with_name(db.name + ".keyring")
    before = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in [db, ring]}
    wrong = key_file(tmp_path, "wrong.key")
    with pytest.raises(UsageError) as err:
        open_store(str(db), encryption=encryption(tmp_path, wrong))
    message = str(err.value)
    assert str(db) in message and str(wrong) in message and "does not open" in message
    assert parse_master_key(wrong.read_text(), "x").key_id in message
    with pytest.raises(UsageError, match="keyring .* is missing"):
        open_store(str(db), encryption=encryption(tmp_path, wrong, tmp_path / "none.keyring"))
    after = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in [db, ring]}
    assert after == before


async def test_a_plain_store_with_sessions_is_not_encrypted_behind_its_back(tmp_path: Path):
    db = tmp_path / "sessions.db"
    plain = open_store(str(db))
    plain.create_session("ses_plain", title="t")
    plain.close()
    with pytest.raises(UsageError, match="store encrypt"):
        open_store(str(db), encryption=encryption(tmp_path, key_file(tmp_path)))
    assert open_store(str(db)).get_session("ses_plain").title == "t"  # still works as it was


async def test_rotation_rewraps_every_key_and_the_old_key_stops_opening(tmp_path: Path):
    from wakeful.store import rotate_key_at

    db = tmp_path / "sessions.db"
    old_key = key_file(tmp_path)
    settings = encryption(tmp_path, old_key)
    sid = await drive(str(db), tmp_path, settings)
    new_key = key_file(tmp_path, "new.key")
    new = parse_master_key(new_key.read_text(), "new")
    assert rotate_key_at(str(db), new, settings) == 1
    with pytest.raises(UsageError, match="does not open"):
        open_store(str(db), encryption=settings)
    store = open_store(str(db), encryption=encryption(tmp_path, new_key))
    try:
        assert MARK_PROMPT in str([m.model_dump() for m in store.messages(sid)])
        assert [h.session.id for h in store.search(MARK_PROMPT).hits] == [sid]
        written = blob_digest(MARK_FILE.encode())  # a blob's key: wrapped by the data key
        assert store.get_blob(written) == MARK_FILE.encode()
    finally:
        store.close()


@pytest.mark.postgres
async def test_markers_are_absent_from_a_pg_dump(tmp_path: Path):
    if shutil.which("pg_dump") is None:
        pytest.skip("pg_dump is not installed")
    settings = encryption(tmp_path, key_file(tmp_path), tmp_path / "pg.keyring")
    with fresh_database() as url:
        sid = await drive(url, tmp_path, settings)
        base = ADMIN_URL.rsplit("/", 1)[0]
        dump = await asyncio.to_thread(run, ["pg_dump", f"{base}/{url.rsplit('/', 1)[1]}"])
        assert dump.returncode == 0, dump.stderr
        assert sid.encode() in dump.stdout
        for mark in (*MARKS, SPLIT_TOOL):
            assert mark.encode() not in dump.stdout
        store = open_store(url, encryption=settings)
        try:
            assert [h.session.id for h in store.search(MARK_TOOL).hits] == [sid]
            assert MARK_PROMPT in (store.get_session(sid).title or "")
        finally:
            store.close()


def test_the_encrypted_suite_run_encrypts_every_new_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """`WAKEFUL_TEST_ENCRYPTION=1` (tests/conftest.py) sets these two variables: a store a
    suite then opens without saying anything about keys is encrypted, PostgreSQL's included."""
    from tests.conftest import TEST_MASTER_KEY

    monkeypatch.setenv("WAKEFUL_MASTER_KEY", TEST_MASTER_KEY)
    monkeypatch.setenv("WAKEFUL_KEYRING", str(tmp_path / "suite.keyring"))
    store = open_store(str(tmp_path / "suite.db"))
    try:
        assert store.backend.cipher is not None
        sid = store.create_session(title=MARK_PROMPT).id
        assert store.get_session(sid).title == MARK_PROMPT
    finally:
        store.close()
    assert MARK_PROMPT.encode() not in (tmp_path / "suite.db").read_bytes()


async def test_a_hosts_instruction_entries_are_read_on_an_encrypted_store(tmp_path: Path):
    """The facts a drive reads with its units (agent, model, the host's instruction entries:
    `store/_facts.py`) open the entries' sealed values; on the first encrypted main every drive
    of a session with an entry failed on the sealed text (a JSONDecodeError)."""
    settings = encryption(tmp_path, key_file(tmp_path))
    rt = runtime(str(tmp_path / "s.db"), tmp_path, settings)
    try:
        sent = rt.send("hello", resume=False)
        rt.set_extension_state(sent.session_id, "instructions", "tone", MARK_PROMPT)
        [turn] = await rt.drive_input(sent.session_id, sent.input_id)
        assert turn.outcome == "completed"
        [receipt] = rt.store.receipts(sent.session_id)
        texts = {s: rt.store.get_blob(d).decode() for s, _src, d in receipt.sections}
        assert texts["system.instructions.api"] == f"tone: {MARK_PROMPT}"
    finally:
        await rt.aclose()
    assert MARK_PROMPT.encode() not in file_bytes(sqlite_files(tmp_path / "s.db"))
