"""Keys for encryption at rest: the master key (a `KeyProvider`) and the keyring file.

The master key never encrypts data: it wraps keys. The **keyring** is a file outside the store
(JSON lines, beside a SQLite file by default) holding, wrapped by the master key, the store's
own keys (the search key and the blob key) in its first line and one data key per session after
it. Nothing in the database can unwrap anything: a copy of the database with the master key
reads no session whose line the keyring no longer holds, which is what makes deletion hold
(docs/encryption.md, "Threat model").

Invariant: a line is in the keyring file (written and fsynced) before any row sealed with its
key is committed, and a rewrite (deletion, rotation) replaces the whole file atomically.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import fcntl
import functools
import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from ..errors import UsageError

KEY_BYTES = 32  # AES-256
NONCE_BYTES = 12
MASTER_ENV = "WAKEFUL_MASTER_KEY"
MASTER_FILE_ENV = "WAKEFUL_MASTER_KEY_FILE"
KEYRING_ENV = "WAKEFUL_KEYRING"
_CHECK = b"wakeful keyring check"


class KeyMismatchError(Exception):
    """A wrapped key that this master key does not open (wrong key, or a damaged keyring)."""


class KeyProvider(Protocol):
    """What wraps and unwraps wakeful's keys: the master key, or a KMS in front of one.

    `name` says where the key comes from (an error names it, never the key), `key_id` is a
    short fingerprint that tells keys apart. `unwrap` raises `KeyMismatchError` for a wrapped
    key it did not wrap with `context`; both are pure (no state kept per call)."""

    @property
    def name(self) -> str:
        """Where the key comes from (a file, a variable, a KMS key's name), for errors."""
        ...

    @property
    def key_id(self) -> str:
        """A short fingerprint of the key (never the key)."""
        ...

    def wrap(self, key: bytes, context: bytes) -> bytes:
        """`key` encrypted and authenticated under the master key, bound to `context`."""
        ...

    def unwrap(self, wrapped: bytes, context: bytes) -> bytes:
        """The key `wrap` was given; `KeyMismatchError` when this master key did not wrap it."""
        ...


@dataclass(frozen=True)
class LocalMasterKey:
    """A 256-bit master key held in this process (from `WAKEFUL_MASTER_KEY` or a key file)."""

    secret: bytes = field(repr=False)
    name: str

    @property
    def key_id(self) -> str:
        """The key's fingerprint (a hash of a key derived for it, never of the key itself)."""
        return hashlib.sha256(_derive(self.secret, b"wakeful key id")).hexdigest()[:12]

    def wrap(self, key: bytes, context: bytes) -> bytes:
        """AES-GCM under a key derived from the master key; a random nonce leads the output."""
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        nonce = os.urandom(NONCE_BYTES)
        return nonce + AESGCM(_derive(self.secret, b"wakeful wrap")).encrypt(nonce, key, context)

    def unwrap(self, wrapped: bytes, context: bytes) -> bytes:
        """The key `wrap` was given (`KeyMismatchError` for another master key's wrapping)."""
        from cryptography.exceptions import InvalidTag
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        aead = AESGCM(_derive(self.secret, b"wakeful wrap"))
        try:
            return aead.decrypt(wrapped[:NONCE_BYTES], wrapped[NONCE_BYTES:], context)
        except (InvalidTag, ValueError):
            raise KeyMismatchError(f"not wrapped by master key {self.key_id}") from None


@functools.lru_cache(maxsize=16)  # pure; a listing unwraps a data key per session it opens
def _derive(secret: bytes, info: bytes) -> bytes:
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF

    return HKDF(algorithm=hashes.SHA256(), length=KEY_BYTES, salt=None, info=info).derive(secret)


def parse_master_key(text: str, name: str) -> LocalMasterKey:
    """A master key from its text: 32 bytes as base64 (44 characters) or hex (64); `UsageError`
    naming `name` (never the text) for anything else."""
    value = text.strip()
    raw: bytes | None = None
    with contextlib.suppress(ValueError, binascii.Error):
        raw = bytes.fromhex(value) if len(value) == 2 * KEY_BYTES else base64.b64decode(value)
    if raw is None or len(raw) != KEY_BYTES:
        raise UsageError(
            f"master key {name}: not a 256-bit key (32 bytes as base64 or hex; make one with "
            "`wakeful store new-key`)"
        )
    return LocalMasterKey(raw, name)


def master_key_from(key_file: str | None = None) -> LocalMasterKey | None:
    """The configured master key: `$WAKEFUL_MASTER_KEY`, else the file `key_file` (or
    `$WAKEFUL_MASTER_KEY_FILE`); None when none is configured."""
    text = os.environ.get(MASTER_ENV)
    if text:
        return parse_master_key(text, f"${MASTER_ENV}")
    path = key_file or os.environ.get(MASTER_FILE_ENV)
    if not path:
        return None
    try:
        content = Path(path).expanduser().read_text()
    except OSError as err:
        raise UsageError(f"master key file {path}: {err.strerror or err}") from None
    return parse_master_key(content, f"file {path}")


def new_master_key() -> str:
    """A fresh random master key, as base64 (what `parse_master_key` reads)."""
    return base64.b64encode(os.urandom(KEY_BYTES)).decode()


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@dataclass
class KeyringHead:
    """The keyring's first line: the store it belongs to, the master key that wrapped it, and
    the store's own keys (wrapped)."""

    store_id: str
    key_id: str
    check: bytes
    search: bytes
    blob: bytes

    def to_line(self) -> str:
        """The head as the keyring's first line."""
        fields = {"wakeful_keyring": 1, "store": self.store_id, "key": self.key_id}
        wrapped = {"check": self.check, "search": self.search, "blob": self.blob}
        return json.dumps(fields | {k: _b64(v) for k, v in wrapped.items()}) + "\n"


class Keyring:
    """The keyring file of one store: read whole, appended to under a lock, rewritten whole.

    Processes sharing a store share its keyring: a writer appends under an exclusive lock on
    `<keyring>.lock` (the keyring itself is replaced by rewrites, so it cannot hold the lock),
    and a reader that misses a session's key reads the file again when it changed."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.head: KeyringHead | None = None
        self.wrapped: dict[str, bytes] = {}  # session id -> wrapped data key
        self._seen: tuple[int, int, int] | None = None  # (inode, size, mtime ns) read

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the keyring's exclusive lock (between processes) while the block runs."""
        fd = os.open(self.path + ".lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def exists(self) -> bool:
        """Whether the keyring file is there."""
        return os.path.exists(self.path)

    def load(self, *, force: bool = False) -> None:
        """Read the file again when it changed since the last read (or `force`)."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            raise UsageError(f"keyring {self.path} is missing") from None
        seen = (st.st_ino, st.st_size, st.st_mtime_ns)
        if seen == self._seen and not force:
            return
        with open(self.path, encoding="utf-8") as f:
            lines = f.read().splitlines()
        self.head, self.wrapped = _parse(self.path, lines)
        self._seen = seen

    def append(self, session_id: str, wrapped: bytes) -> None:
        """Add a session's wrapped data key, durable when this returns (call it locked)."""
        line = json.dumps({"s": session_id, "k": _b64(wrapped)}) + "\n"
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        try:
            os.write(fd, line.encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        self.wrapped[session_id] = wrapped

    def rewrite(self, head: KeyringHead, wrapped: dict[str, bytes]) -> None:
        """Replace the whole file (a temporary file, fsynced, renamed over it; the folder
        fsynced), so a crash leaves the old keyring or the new one (call it locked)."""
        lines = [head.to_line()]
        lines += [json.dumps({"s": sid, "k": _b64(key)}) + "\n" for sid, key in wrapped.items()]
        tmp = f"{self.path}.{os.getpid()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, "".join(lines).encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path)
        folder = os.open(os.path.dirname(os.path.abspath(self.path)), os.O_RDONLY)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)
        self.head, self.wrapped = head, dict(wrapped)
        self._seen = None


def _parse(path: str, lines: list[str]) -> tuple[KeyringHead, dict[str, bytes]]:
    try:
        first = json.loads(lines[0])
        head = KeyringHead(
            str(first["store"]),
            str(first["key"]),
            *(base64.b64decode(first[k]) for k in ("check", "search", "blob")),
        )
        wrapped: dict[str, bytes] = {}
        for line in lines[1:]:
            if line.strip():  # a torn last line (a crash mid-append) was never used: skipped
                with contextlib.suppress(ValueError, KeyError):
                    item = json.loads(line)
                    wrapped[str(item["s"])] = base64.b64decode(item["k"])
    except (IndexError, ValueError, KeyError, TypeError, binascii.Error):
        raise UsageError(f"keyring {path} is not a wakeful keyring") from None
    return head, wrapped


def check_context(store_id: str) -> bytes:
    """What the keyring's check value, and the store's own keys, are bound to."""
    return b"wakeful store\x00" + store_id.encode()


def session_context(store_id: str, session_id: str) -> bytes:
    """What a session's wrapped data key is bound to (it opens for no other session)."""
    return b"wakeful session\x00" + store_id.encode() + b"\x00" + session_id.encode()


def new_head(store_id: str, master: KeyProvider) -> KeyringHead:
    """A new store's keyring head: fresh search and blob keys wrapped by `master`."""
    ctx = check_context(store_id)
    return KeyringHead(
        store_id,
        master.key_id,
        master.wrap(_CHECK, ctx),
        master.wrap(os.urandom(KEY_BYTES), ctx),
        master.wrap(os.urandom(KEY_BYTES), ctx),
    )


def opens(head: KeyringHead, master: KeyProvider) -> bool:
    """Whether `master` is the key that wrapped the keyring of `head`."""
    try:
        return master.unwrap(head.check, check_context(head.store_id)) == _CHECK
    except KeyMismatchError:
        return False
