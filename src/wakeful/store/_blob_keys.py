"""Blobs of an encrypted store under keys their sessions hold (docs/encryption.md, "Blobs").

A blob a session stores is sealed (AES-256-GCM, bound to its digest) under a random **content
key** of its own, and that key is kept only sealed under the data key of each session that
references the blob (`blob_refs.sealed_key`, a sealed text of that session). Deleting a session
destroys its data key, so from then on no copy of the database can open its wrappings of
content keys: a blob no other session references cannot be read again, even from a backup
taken before the delete. A blob other sessions still reference stays readable through their
keys, as it should: they still hold it.

Blobs stay stored once per content across sessions (the `blobs` row is shared; each session
adds only its wrapping of the key). A blob stored without a session (`put_blob(data)`) has no
session to hold its key: it is sealed under the store's blob key, as every blob was before
migration 29 (`wakeful store encrypt` moves those a session references under content keys).

Invariant: a blob sealed under a content key has, in the same transaction that stored it, a
reference whose `sealed_key` holds that key; a reference added later (another session, a fork,
an import) gets the key opened from an existing reference and sealed for its own session.
"""

from __future__ import annotations

import base64
import contextlib
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..errors import StoreError
from ._cipher import open_blob as open_store_blob
from ._cipher import opened
from ._keys import KEY_BYTES, NONCE_BYTES

if TYPE_CHECKING:
    from ._backend import Tx
    from ._cipher import Cipher

# Migration 29: a session's wrapping of a blob's content key, and an artifact's uri sealed (its
# `uri` column then holds the uri's keyed hash, for the upsert and the reverse lookup).
SEALED_REFS = """
ALTER TABLE blob_refs ADD COLUMN sealed_key TEXT;
ALTER TABLE artifacts ADD COLUMN uri_sealed TEXT
"""

BLOB_SEALED = b"\x1fwkb2:"  # a blob's bytes sealed under its own content key
_KEYS_PER_STATEMENT = 400


def seal_with(key: bytes, digest: str, data: bytes) -> bytes:
    """`data` sealed under a content key, bound to its digest."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    nonce = os.urandom(NONCE_BYTES)
    return BLOB_SEALED + nonce + AESGCM(key).encrypt(nonce, data, digest.encode())


def _open_with(key: bytes, digest: str, data: bytes) -> bytes:
    from cryptography.exceptions import InvalidTag
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    raw = data[len(BLOB_SEALED) :]
    try:
        return AESGCM(key).decrypt(raw[:NONCE_BYTES], raw[NONCE_BYTES:], digest.encode())
    except InvalidTag:
        raise StoreError(f"blob {digest}: fails its check") from None


def wrapped_key(cipher: Cipher, session_id: str, digest: str, key: bytes) -> str:
    """A content key as `blob_refs.sealed_key` holds it: sealed for the session, with its
    digest (a wrapping copied to another blob's row opens to a mismatch, not to a key)."""
    return cipher.seal(session_id, f"{digest}:{base64.b64encode(key).decode()}")


def _unwrapped(digest: str, sealed_key: str) -> bytes:
    named, _, key = opened(sealed_key).partition(":")
    if named != digest:
        raise StoreError(f"blob {digest}: a reference holds another blob's key")
    return base64.b64decode(key)


def content_keys(tx: Tx, digests: Sequence[str]) -> dict[str, bytes | None]:
    """The content key of each stored blob of `digests`, opened from one of its references;
    None for a blob not under a content key (the store's blob key, or one not sealed). A
    digest with no blob is absent. `StoreError` for a blob under a content key no live
    session's key opens (its sessions were deleted).

    One reference per blob is read (an instruction file shared by every session of a store
    has as many references as sessions); only when its session's key does not open it (a
    session whose key is gone and whose rows are not) are the others read."""
    found: dict[str, bytes | None] = {}
    for start in range(0, len(digests), _KEYS_PER_STATEMENT):
        chunk = list(digests[start : start + _KEYS_PER_STATEMENT])
        marks = ", ".join("?" for _ in chunk)
        rows = tx.all(
            "SELECT b.digest, (SELECT r.sealed_key FROM blob_refs r WHERE r.digest = b.digest "
            f"AND r.sealed_key IS NOT NULL LIMIT 1) FROM blobs b WHERE b.digest IN ({marks})",
            chunk,
        )
        for digest, sealed_key in rows:
            d = str(digest)
            found[d] = None if sealed_key is None else _first_opening(tx, d, str(sealed_key))
    return found


def _first_opening(tx: Tx, digest: str, sealed_key: str) -> bytes:
    """The content key `sealed_key` holds, else the first another reference opens to."""
    with contextlib.suppress(StoreError):
        return _unwrapped(digest, sealed_key)
    for (other,) in tx.all(
        "SELECT sealed_key FROM blob_refs WHERE digest = ? AND sealed_key IS NOT NULL", (digest,)
    ):
        with contextlib.suppress(StoreError):  # that session's key is gone: try the next
            return _unwrapped(digest, str(other))
    raise StoreError(f"blob {digest}: no session that holds its key is left")


def put_sealed_blobs(
    tx: Tx, cipher: Cipher, blobs: dict[str, bytes], session_id: str, now_ms: int
) -> None:
    """Store `blobs` (by digest) for `session_id` in an encrypted store: a new blob under a new
    content key, an existing one under the key it has; the session's references hold the keys.
    Two writers storing the same new blob at once: the second's row is not inserted
    (`ON CONFLICT`), and it reads the first's key once that one committed."""
    digests = sorted(blobs)
    keys = content_keys(tx, digests)
    new = [d for d in digests if d not in keys]
    if new:
        fresh = {d: os.urandom(KEY_BYTES) for d in new}
        rows = tx.all(
            "INSERT INTO blobs (digest, size, data, created_ms) VALUES "
            + ", ".join("(?, ?, ?, ?)" for _ in new)
            + " ON CONFLICT DO NOTHING RETURNING digest",
            tuple(
                v for d in new for v in (d, len(blobs[d]), seal_with(fresh[d], d, blobs[d]), now_ms)
            ),
        )
        stored = {str(r[0]) for r in rows}
        keys.update((d, fresh[d]) for d in new if d in stored)
        lost = [d for d in new if d not in stored]
        if lost:  # another writer stored them first: their keys are in its references
            keys.update(content_keys(tx, lost))
    ref_sessions(tx, cipher, session_id, digests, keys)


def ref_sessions(
    tx: Tx,
    cipher: Cipher,
    session_id: str,
    digests: Sequence[str],
    keys: dict[str, bytes | None] | None = None,
) -> None:
    """Reference `digests` from the session, each with its wrapping of the blob's content key
    (`keys`, else read from the existing references); a reference that had none gets one."""
    if keys is None:
        keys = content_keys(tx, digests)
    rows: list[tuple[str, str, str | None]] = []
    for d in digests:
        key = keys.get(d)
        rows.append(
            (session_id, d, None if key is None else wrapped_key(cipher, session_id, d, key))
        )
    for start in range(0, len(rows), _KEYS_PER_STATEMENT // 3):
        chunk = rows[start : start + _KEYS_PER_STATEMENT // 3]
        tx.send(
            "INSERT INTO blob_refs (session_id, digest, sealed_key) VALUES "
            + ", ".join("(?, ?, ?)" for _ in chunk)
            + " ON CONFLICT (session_id, digest) DO UPDATE SET sealed_key = excluded.sealed_key "
            "WHERE blob_refs.sealed_key IS NULL",
            tuple(v for row in chunk for v in row),
        )


def open_blobs(
    tx: Tx, cipher: Cipher | None, rows: Sequence[tuple[str, bytes]]
) -> dict[str, bytes]:
    """The bytes of blob rows (digest, data) as they were stored: a blob under a content key
    opened with the key a reference holds, one under the store's blob key with it, one not
    sealed unchanged."""
    if cipher is None:
        return dict(rows)
    sealed = [d for d, data in rows if data.startswith(BLOB_SEALED)]
    keys = content_keys(tx, sealed) if sealed else {}
    out: dict[str, bytes] = {}
    for digest, data in rows:
        if data.startswith(BLOB_SEALED):
            key = keys.get(digest)
            if key is None:
                raise StoreError(f"blob {digest}: no reference holds its key")
            out[digest] = _open_with(key, digest, data)
        else:
            out[digest] = open_store_blob(cipher, digest, data)
    return out
