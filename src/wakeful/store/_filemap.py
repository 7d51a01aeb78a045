"""The file-map store (the seed's `createFileMapStore`): a whole store kept as a few text files
over any host backend that can load, save and delete a map of file names to contents
(`FileMap`); `DirectoryFileMap` keeps them in a directory (`docs/hosts.md`).

It is a `SqlStore` on an in-memory SQLite database (every store method works on it, and a
`Runtime` drives sessions on it), saved through the host's `FileMap` after every write:

- `store.b64`: the database itself (SQLite's serialized image, base64): what a reopen loads;
- `meta.json`: the sessions' rows (ids, titles, agents, usage...), for a host that lists
  without wakeful;
- `turns.jsonl`: the main session's transcript (the oldest top-level one) in the export format
  of `wakeful session export` (a header line, then one provider-neutral message per line), for
  a host that shows it without wakeful (and `wakeful session import` reads it).

Invariant: a write returns only after the map holding it was saved, so a reopen finds every
write that returned (a failed save raises `StoreError`; the write stays in memory and the next
one saves it). The two readable files are views derived from the database at each save, never
read back. One process at a time: two that opened the same map would each save over the
other (a `DirectoryFileMap` holds a lock on its directory while open).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import StoreBusyError, StoreError
from ._records import row_cols, session_row
from ._sqlite import SqliteBackend, _applied, _migrate, _SqliteTx
from ._transcript import plain_transcript_in
from ._typed_events import types_in

if TYPE_CHECKING:
    from ..clock import Clock
    from ._store import SqlStore

FORMAT = "wakeful-file-map/1"
# Events that change what earlier transcript rows show (`turns.jsonl` is then built again).
_RESHAPING = ("session.reverted", "session.unreverted", "history.edited", "messages.hidden")


class FileMap(Protocol):
    """A host's storage for one file map: load, save (full rewrite) and delete it."""

    def get(self) -> Mapping[str, str]:
        """The map as last saved; empty when nothing is persisted."""
        ...

    def save(self, files: Mapping[str, str]) -> None:
        """Replace the persisted map with `files` (the whole of it)."""
        ...

    def delete(self) -> None:
        """Remove everything persisted."""
        ...


@dataclass(frozen=True, slots=True)
class FileMapNames:
    """The file names a file-map store uses (the seed's `FileMapStoreOptions`)."""

    database: str = "store.b64"
    meta: str = "meta.json"
    turns: str = "turns.jsonl"


class DirectoryFileMap:
    """A `FileMap` kept as files in one directory, made on the first save. Each save rewrites
    only the files whose content changed, each atomically (a temporary file renamed over it);
    a file of an earlier map that the new one lacks is removed. The directory is locked
    (`flock` on `.lock`) from construction to `close`: a second opener gets `StoreBusyError`."""

    def __init__(self, path: str | Path) -> None:
        import fcntl

        self.path = Path(path).expanduser().resolve()
        self.path.mkdir(parents=True, exist_ok=True)
        self._lock_fd = os.open(self.path / ".lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._lock_fd)
            raise StoreBusyError(f"{self.path} is open in another process") from None
        self._known: dict[str, str] = {}

    def get(self) -> Mapping[str, str]:
        """Every file of the directory but the lock, by name."""
        out = {
            p.name: p.read_text(encoding="utf-8")
            for p in self.path.iterdir()
            if p.is_file() and not p.name.startswith(".")
        }
        self._known = dict(out)
        return out

    def save(self, files: Mapping[str, str]) -> None:
        """Write the files that changed, then remove those the map no longer has."""
        for name, text in files.items():
            if "/" in name or name.startswith("."):
                raise StoreError(f"bad file name {name!r} in a file map")
            if self._known.get(name) == text:
                continue
            tmp = self.path / f".{name}.tmp"
            with open(tmp, "w", encoding="utf-8") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path / name)
            self._known[name] = text
        for name in set(self._known) - set(files):
            with contextlib.suppress(FileNotFoundError):
                (self.path / name).unlink()
            del self._known[name]

    def delete(self) -> None:
        """Remove the map's files (the directory and its lock stay until `close`)."""
        self.save({})

    def close(self) -> None:
        """Release the directory's lock."""
        if self._lock_fd >= 0:
            os.close(self._lock_fd)
            self._lock_fd = -1


class FileMapBackend(SqliteBackend):
    """An in-memory SQLite database loaded from a `FileMap` and saved to it after each write
    (see the module docstring)."""

    def __init__(self, files: FileMap, names: FileMapNames | None = None) -> None:
        super().__init__(":memory:")
        self.files = files
        self.names = names or FileMapNames()
        self.url = f"file-map:{getattr(files, 'path', type(files).__name__)}"
        self._save_lock = threading.Lock()
        stored = files.get()
        self._persisted = bool(stored)  # the map holds something (a delete has work to do)
        self._lines: tuple[str, int, list[str]] | None = None  # `_transcript_lines` of a save
        if self.names.database in stored:
            self._load(stored[self.names.database])
        elif stored:
            raise StoreError(f"{self.url} holds files but no {self.names.database}: not a store")

    def _load(self, text: str) -> None:
        try:
            image = base64.b64decode(text, validate=True)
            with self._lock:
                self._conn.deserialize(image)
                _migrate(self._conn, ":memory:", _applied(self._conn, self.url))
        except (ValueError, OSError) as err:
            raise StoreError(f"{self.url}: {self.names.database} is damaged ({err})") from None
        except Exception as err:  # sqlite3.DatabaseError: not a database image
            if isinstance(err, StoreError):
                raise
            raise StoreError(f"{self.url}: {self.names.database} is not a store ({err})") from None

    @contextmanager
    def transaction(self, *, write: bool, batched: bool = False) -> Iterator[_SqliteTx]:
        """`SqliteBackend.transaction`; a write returns once the map holding it is saved."""
        with super().transaction(write=write, batched=batched) as tx:
            yield tx
        if write:
            self.save()

    def save(self) -> None:
        """Save the database and its readable views through the `FileMap` (a store holding no
        session any more deletes the map)."""
        with self._save_lock:
            with self._lock:
                self._settle()
                image = self._conn.serialize()
                with super().transaction(write=False) as tx:
                    views = self._views(tx)
            try:
                if views is None:
                    if self._persisted:
                        self.files.delete()
                else:
                    meta, turns = views
                    self.files.save(
                        {
                            self.names.database: base64.b64encode(image).decode("ascii"),
                            self.names.meta: meta,
                            self.names.turns: turns,
                        }
                    )
                self._persisted = views is not None
            except OSError as err:
                raise StoreError(f"cannot save {self.url}: {err}") from None

    def _views(self, tx: _SqliteTx) -> tuple[str, str] | None:
        """`meta.json` and `turns.jsonl` of the database (None: it holds no session)."""
        rows = [
            session_row(r)
            for r in tx.all(f"SELECT {row_cols(tx.kind)} FROM sessions ORDER BY created_ms, id")
        ]
        if not rows:
            return None
        main = next((r for r in rows if r.parent_id is None), rows[0])
        meta: dict[str, Any] = {
            "format": FORMAT,
            "session": main.id,
            "sessions": [r.to_json() for r in rows],
        }
        header = json.dumps({"wakeful_export": 1, "session": main.to_json()})
        lines = self._transcript_lines(tx, main.id)
        return json.dumps(meta, indent=1) + "\n", "\n".join([header, *lines]) + "\n"

    def _transcript_lines(self, tx: _SqliteTx, session_id: str) -> list[str]:
        """The main session's messages, one JSON line each. The lines of the last save are
        kept and only later messages are read, unless something changed what the earlier ones
        show (a rewind, an edit, hidden messages), or the main session is another one."""
        top = tx.one(
            "SELECT max(seq) FROM messages WHERE session_id = ? AND reverted IS NULL", (session_id,)
        )
        upto = int(top[0]) if top and top[0] is not None else 0
        cached, after = self._lines, 0
        if cached is not None and cached[0] == session_id:
            reshaped = tx.one(
                "SELECT 1 FROM events WHERE session_id = ? AND seq > ? "
                f"AND {types_in(_RESHAPING)} LIMIT 1",
                (session_id, cached[1], *_RESHAPING),
            )
            after = 0 if reshaped else cached[1]
        lines = list(cached[2]) if cached is not None and after else []
        news = plain_transcript_in(tx, session_id, after) if upto > after or not after else []
        lines += [json.dumps(m, ensure_ascii=False) for m in news]
        self._lines = (session_id, max(upto, after), lines)
        return lines

    def close(self) -> None:
        """Close the database, then the `FileMap` (its lock) when it has a `close`."""
        super().close()
        closer = getattr(self.files, "close", None)
        if callable(closer):
            closer()


def file_map_store(
    files: FileMap | str | Path, *, names: FileMapNames | None = None, clock: Clock | None = None
) -> SqlStore:
    """A store kept as a file map (`docs/hosts.md`): `files` is the host's `FileMap`, or a
    directory path (a `DirectoryFileMap`). What it held is loaded; every write is saved
    before it returns. `StoreError` for a map that is not a store, `StoreBusyError` for a
    directory another process has open."""
    from ._store import SqlStore

    fmap = DirectoryFileMap(files) if isinstance(files, str | Path) else files
    try:
        return SqlStore(FileMapBackend(fmap, names), clock)
    except BaseException:
        closer = getattr(fmap, "close", None)
        if callable(closer):
            closer()
        raise
