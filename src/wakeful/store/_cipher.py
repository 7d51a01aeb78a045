"""Encryption at rest: the codec between a store's rows and what they mean (docs/encryption.md).

An encrypted store seals, with AES-GCM under the session's data key, every text that holds
content: event bodies, titles, metadata, work and extension state. A sealed text is
`\\x1fwk1:<store id>:<session id>:<base64 of nonce, ciphertext and tag>`, authenticated with
its session id, so a reader needs no other column to open it. Blob bytes are sealed under a
content key per blob that the sessions using it hold (`_blob_keys.py`; the store's blob key
only for a blob stored without a session). Ids, seqs, times, statuses, types and sizes stay
clear: claims, fencing, listing and retention never need a key. Search indexes keyed hashes of
words (`word_tokens`), never words; a value compared without being read (an input's digest, an
artifact's uri) is kept as a keyed hash (`keyed`).

Invariant: opening passes a text that is not sealed through unchanged, so a store being
encrypted (`encrypt_store`) reads rows of both kinds, and an unencrypted store pays one
character comparison per row.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING

from ..errors import StoreError, UsageError
from ._keys import (
    KEY_BYTES,
    NONCE_BYTES,
    KeyMismatchError,
    KeyProvider,
    Keyring,
    check_context,
    session_context,
)

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

SEALED = "\x1f"  # the first character of a sealed text (never the first of JSON or of a title)
_TEXT = SEALED + "wk1:"
_BLOB = b"\x1fwkb1:"
_WORD = re.compile(r"[^\W_]+")  # the words search indexes (`_search._WORD`, without `*`)
TOKEN_HEX = 16  # a word's keyed hash in the index: 64 bits as hex
KEYED = SEALED + "wkh1:"  # the first characters of a keyed hash in a column (`Cipher.keyed`)
KEYED_HEX = 32  # a keyed column value: 128 bits as hex

# Every cipher this process opened, by store id: a sealed text names its store, so any reader
# (the event codec's hook included) opens it without being handed the store.
_CIPHERS: dict[str, Cipher] = {}


class Cipher:
    """One encrypted store's keys in this process: the master key, its keyring, the store's
    search and blob keys, and the data keys unwrapped so far (created on a session's first
    sealed write)."""

    def __init__(self, store_id: str, master: KeyProvider, keyring: Keyring, url: str) -> None:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        assert keyring.head is not None
        self.store_id = store_id
        self.master = master
        self.keyring = keyring
        self.url = url
        ctx = check_context(store_id)
        self._search = master.unwrap(keyring.head.search, ctx)
        self._blob = AESGCM(master.unwrap(keyring.head.blob, ctx))
        self._keys: dict[str, AESGCM] = {}
        self._lock = threading.Lock()

    # -- data keys ------------------------------------------------------------------------------

    def _aead(self, session_id: str, *, create: bool) -> AESGCM:
        aead = self._keys.get(session_id)
        if aead is not None:
            return aead
        with self._lock:
            wrapped = self.keyring.wrapped.get(session_id)
            if wrapped is None:
                self.keyring.load()  # another process may have added it
                wrapped = self.keyring.wrapped.get(session_id)
            if wrapped is None and create:
                wrapped = self._new_key(session_id)
            if wrapped is None:
                raise StoreError(
                    f"session {session_id}: its data key is not in the keyring "
                    f"{self.keyring.path} (the session was deleted; its rows cannot be read)"
                )
            aead = self._unwrapped(session_id, wrapped)
            self._keys[session_id] = aead
            return aead

    def _new_key(self, session_id: str) -> bytes:
        with self.keyring.locked():
            self.keyring.load()
            assert self.keyring.head is not None
            if self.keyring.head.key_id != self.master.key_id:
                raise StoreError(
                    f"keyring {self.keyring.path} was rotated to master key "
                    f"{self.keyring.head.key_id}: restart this process with that key"
                )
            wrapped = self.keyring.wrapped.get(session_id)
            if wrapped is None:
                ctx = session_context(self.store_id, session_id)
                wrapped = self.master.wrap(os.urandom(KEY_BYTES), ctx)
                self.keyring.append(session_id, wrapped)
            return wrapped

    def _unwrapped(self, session_id: str, wrapped: bytes) -> AESGCM:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        try:
            key = self.master.unwrap(wrapped, session_context(self.store_id, session_id))
        except KeyMismatchError:
            raise StoreError(
                f"session {session_id}: its data key in {self.keyring.path} does not open with "
                f"master key {self.master.key_id}"
            ) from None
        return AESGCM(key)

    # -- texts ----------------------------------------------------------------------------------

    def seal(self, session_id: str, text: str) -> str:
        """`text` sealed under the session's data key (the key is made on first use)."""
        nonce = os.urandom(NONCE_BYTES)
        body = self._aead(session_id, create=True).encrypt(
            nonce, text.encode(), session_id.encode()
        )
        sealed = base64.b64encode(nonce + body).decode()
        return f"{_TEXT}{self.store_id}:{session_id}:{sealed}"

    def open_text(self, session_id: str, body: str) -> str:
        """The text `seal` sealed for `session_id` (the part after the session id)."""
        from cryptography.exceptions import InvalidTag

        raw = base64.b64decode(body)
        try:
            plain = self._aead(session_id, create=False).decrypt(
                raw[:NONCE_BYTES], raw[NONCE_BYTES:], session_id.encode()
            )
        except InvalidTag:
            raise StoreError(f"session {session_id}: a sealed row fails its check") from None
        return plain.decode()

    # -- blobs ----------------------------------------------------------------------------------

    def seal_blob(self, digest: str, data: bytes) -> bytes:
        """Blob bytes sealed under the store's blob key, bound to their digest."""
        nonce = os.urandom(NONCE_BYTES)
        return _BLOB + nonce + self._blob.encrypt(nonce, data, digest.encode())

    def open_blob(self, digest: str, data: bytes) -> bytes:
        """Blob bytes as stored, opened when sealed."""
        from cryptography.exceptions import InvalidTag

        if not data.startswith(_BLOB):
            return data
        raw = data[len(_BLOB) :]
        try:
            return self._blob.decrypt(raw[:NONCE_BYTES], raw[NONCE_BYTES:], digest.encode())
        except InvalidTag:
            raise StoreError(f"blob {digest}: fails its check") from None

    # -- search ---------------------------------------------------------------------------------

    def token(self, word: str) -> str:
        """A normalized word's keyed hash, as the index holds it."""
        mac = hmac.new(self._search, word.lower().encode(), hashlib.sha256)
        return mac.hexdigest()[:TOKEN_HEX]

    def word_tokens(self, text: str) -> str:
        """The text as the index of an encrypted store holds it: its words' keyed hashes."""
        return " ".join(self.token(w) for w in _WORD.findall(text))

    def keyed(self, purpose: str, value: str) -> str:
        """`value`'s keyed hash (under the search key, separated by `purpose`), marked as one:
        what an encrypted store keeps of a value it must compare or look up without reading
        it (an input's content digest, an artifact's uri). Equal values give equal hashes."""
        mac = hmac.new(self._search, f"{purpose}\x00{value}".encode(), hashlib.sha256)
        return KEYED + mac.hexdigest()[:KEYED_HEX]

    # -- deletion -------------------------------------------------------------------------------

    def forget(self, session_ids: Iterable[str]) -> None:
        """Destroy the data keys of `session_ids`: the keyring is rewritten without them."""
        gone = set(session_ids)
        if not gone:
            return
        with self._lock, self.keyring.locked():
            self.keyring.load(force=True)
            assert self.keyring.head is not None
            if gone & self.keyring.wrapped.keys():
                kept = {s: k for s, k in self.keyring.wrapped.items() if s not in gone}
                self.keyring.rewrite(self.keyring.head, kept)
            for sid in gone:
                self._keys.pop(sid, None)


def register(cipher: Cipher) -> None:
    """Make `cipher` the one that opens texts sealed for its store in this process."""
    from ..events import set_sealed_opener

    _CIPHERS[cipher.store_id] = cipher
    set_sealed_opener(open_sealed)


def open_sealed(text: str) -> str:
    """A sealed text opened by its store's cipher (`StoreError` when this process has no key
    for that store)."""
    try:
        store_id, session_id, body = text[len(_TEXT) :].split(":", 2)
    except ValueError:
        raise StoreError("a sealed row is damaged") from None
    cipher = _CIPHERS.get(store_id)
    if cipher is None or not text.startswith(_TEXT):
        raise StoreError(f"a row sealed for store {store_id}, and no key for it is open")
    return cipher.open_text(session_id, body)


def opened(text: str) -> str:
    """`text` as it was before it was sealed (a text that is not sealed, unchanged)."""
    return open_sealed(text) if text.startswith(SEALED) else text


def opened_or_none(text: str | None) -> str | None:
    """`opened` for a column that may be NULL."""
    return None if text is None else opened(text)


def cipher_for(store_id: str) -> Cipher:
    """The open cipher of `store_id` (`UsageError` when none is)."""
    cipher = _CIPHERS.get(store_id)
    if cipher is None:
        raise UsageError(f"store {store_id}: no key is open for it")
    return cipher


def sealed(cipher: Cipher | None, session_id: str, text: str) -> str:
    """`text` as an encrypted store writes it (sealed for the session), else unchanged; a text
    already sealed is left as it is."""
    if cipher is None or text.startswith(SEALED):
        return text
    return cipher.seal(session_id, text)


def sealed_or_none(cipher: Cipher | None, session_id: str, text: str | None) -> str | None:
    """`sealed` for a column that may be NULL."""
    return None if text is None else sealed(cipher, session_id, text)


def keyed(cipher: Cipher | None, purpose: str, value: str) -> str:
    """`value` as an encrypted store keeps a value it compares without reading (`Cipher.keyed`);
    unchanged in an unencrypted store, and a value already keyed is left as it is."""
    if cipher is None or value.startswith(KEYED):
        return value
    return cipher.keyed(purpose, value)


def open_blob(cipher: Cipher | None, digest: str, data: bytes) -> bytes:
    """Blob bytes as they were stored before sealing (unchanged in an unencrypted store)."""
    return data if cipher is None else cipher.open_blob(digest, data)
