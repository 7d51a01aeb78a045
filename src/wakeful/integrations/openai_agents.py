"""wakeful as the session store of the OpenAI Agents SDK (`pip install 'wakeful[openai-agents]'`).

`WakefulSession` implements the SDK's `Session` protocol over a wakeful store (SQLite or
PostgreSQL). Every item is an ordinary wakeful message (`message.added`), so `wakeful session
show`, `wakeful log` and the inspector read an Agents SDK conversation like any other; `pop_item`
and `clear_session` append a `messages.hidden` event. Decisions are in `docs/integrations.md`.
"""

from __future__ import annotations

import contextlib
import secrets
from typing import TYPE_CHECKING, Any

from ..errors import ConflictError, UsageError
from ..events import MessageAdded, MessagesHidden, SessionEvent
from ..execution import off_loop
from ..interchange import canonical_item, item_message_ids, item_to_message, message_to_items
from ..messages import Message
from ..store import SqlStore, open_store

MAX_APPEND_ATTEMPTS = 1000  # each failed attempt means another writer's batch landed

if TYPE_CHECKING:
    from agents.items import TResponseInputItem
    from agents.memory.session_settings import SessionSettings


class WakefulSession:
    """An Agents SDK session whose items live in a wakeful session of the same id.

    `db` is a store URL (a SQLite path or `postgresql://`; None: wakeful's default database) or
    an open `SqlStore` (not closed by `close()`). The wakeful session is created on first use.
    Safe across processes: each `add_items` is one transaction, so concurrent appends all land,
    each batch contiguous, in commit order; the same batch retried concurrently lands once
    (a compare-and-append on the newest message: `SqlStore.append_if_newest`).
    """

    def __init__(
        self,
        session_id: str,
        db: str | SqlStore | None = None,
        *,
        title: str | None = None,
        session_settings: SessionSettings | None = None,
    ) -> None:
        if not session_id:
            raise UsageError("session_id must not be empty")
        self.session_id = session_id
        self.session_settings = session_settings
        self._owned = not isinstance(db, SqlStore)
        self.store: SqlStore = db if isinstance(db, SqlStore) else open_store(db)
        self._title = title
        self._ready = False

    # -- the Session protocol -----------------------------------------------------------------

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The session's items in order; with `limit` (or `session_settings.limit`), the newest
        `limit` of them, still oldest first."""
        if limit is None and self.session_settings is not None:
            limit = self.session_settings.limit
        return await off_loop(self.get_items_sync, limit)

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Append `items` as one transaction; a retry of a batch that already landed is a no-op."""
        await off_loop(self.add_items_sync, list(items))

    async def pop_item(self) -> TResponseInputItem | None:
        """Hide the newest message (durably) and return its item; None when the session is empty."""
        return await off_loop(self.pop_item_sync)

    async def clear_session(self) -> None:
        """Hide every message (durably, one event); the log keeps them."""
        await off_loop(self.clear_session_sync)

    # -- synchronous forms (the work; the protocol's coroutines run them in a thread) ----------

    def get_items_sync(self, limit: int | None = None) -> list[Any]:
        """`get_items` without an event loop."""
        if limit is None:
            return [item for m in self._messages() for item in message_to_items(m)]
        if limit <= 0:
            return []
        self._ensure()
        count = limit  # a message is one item, except one wakeful wrote itself: read more then
        while True:
            messages = self.store.last_messages(self.session_id, count)
            items = [item for m in messages for item in message_to_items(m)]
            if len(items) >= limit or len(messages) < count:
                return items[-limit:]
            count *= 2

    def add_items_sync(self, items: list[Any]) -> None:
        """`add_items` without an event loop."""
        if not items:
            return
        plain = [canonical_item(item) for item in items]
        n = len(plain)
        self._ensure()
        for _ in range(MAX_APPEND_ATTEMPTS):
            ids = self.store.last_message_ids(self.session_id, n + 1)
            if len(ids) >= n:  # a retry of a batch that landed: same anchor, same ids
                before = ids[-n - 1] if len(ids) > n else ""
                if ids[-n:] == item_message_ids(self.session_id, before, plain):
                    return
            anchor = ids[-1] if ids else None
            fresh = item_message_ids(self.session_id, anchor or "", plain)
            if set(fresh) & set(ids):  # the same items again after themselves: keep ids unique
                fresh = item_message_ids(self.session_id, f"{anchor}+{secrets.token_hex(8)}", plain)
            events: list[SessionEvent] = [
                MessageAdded(message=item_to_message(item, mid))
                for item, mid in zip(plain, fresh, strict=True)
            ]
            # Lands only if nothing was appended since `ids` was read; else look again (the
            # batch that landed meanwhile may be this one, retried concurrently elsewhere).
            if self.store.append_if_newest(self.session_id, events, anchor):
                return
        raise ConflictError(
            f"add_items: the session {self.session_id} kept changing; nothing was appended"
        )

    def pop_item_sync(self) -> Any:
        """`pop_item` without an event loop."""
        messages = self._messages()
        if not messages:
            return None
        last = messages[-1]
        self._hide([last.id], "pop_item")
        items = message_to_items(last)
        return items[-1] if items else None

    def clear_session_sync(self) -> None:
        """`clear_session` without an event loop."""
        ids = [m.id for m in self._messages()]
        if ids:
            self._hide(ids, "clear_session")

    def close(self) -> None:
        """Close the store if this session opened it."""
        if self._owned:
            self.store.close()

    # -- helpers --------------------------------------------------------------------------------

    def _messages(self) -> list[Message]:
        self._ensure()
        return self.store.messages(self.session_id)

    def _hide(self, ids: list[str], reason: str) -> None:
        self.store.append(self.session_id, [MessagesHidden(message_ids=tuple(ids), reason=reason)])

    def _ensure(self) -> None:
        if self._ready:
            return
        if self.store.find_session(self.session_id) is None:
            with contextlib.suppress(ConflictError):  # another process created it first
                self.store.create_session(
                    self.session_id, title=self._title, metadata={"created_by": "openai-agents"}
                )
        self._ready = True


__all__ = ["WakefulSession"]
