"""What a non-admin caller sees of listings: only the sessions whose root they own.

The store lists and searches every session; a user's page is read from its pages, keeping the
owned rows, until it is full or the store has no more (docs/access.md says what this costs).
Invariant: a page and its cursor never show, or skip past, a session the caller cannot see
without saying so: the cursor continues after the last row looked at, owned or not.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ..execution import off_loop
from ..store import Page, SearchHit, SearchPage, SessionRow
from ._state import ServerState

SCAN = 200  # rows asked of the store per page while filling a user's page


@dataclass(frozen=True, slots=True)
class Found:
    """A page of sessions, where each matched a search (by id: none), and the next cursor."""

    sessions: list[SessionRow]
    next_cursor: str | None
    matches: dict[str, SearchHit] = field(default_factory=dict)


async def owned_roots(state: ServerState, user: str | None) -> set[str]:
    """The root sessions `user` owns (none for no user)."""
    if user is None:
        return set()
    return await off_loop(state.runtime.store.access.owned_roots, user)


async def owned_listing(
    list_page: Callable[[str | None, int], Page], owned: set[str], cursor: str | None, limit: int
) -> Found:
    """A page of up to `limit` owned sessions from `list_page(cursor, size)` (a bound
    `list_sessions`), continuing from `cursor`."""
    rows: list[SessionRow] = []
    while owned:
        page = await off_loop(list_page, cursor, max(limit, SCAN))
        for i, row in enumerate(page.sessions):
            if row.root_id in owned:
                rows.append(row)
                if len(rows) == limit:
                    more = i < len(page.sessions) - 1 or page.next_cursor is not None
                    return Found(rows, f"{row.updated_ms}:{row.id}" if more else None)
        cursor = page.next_cursor
        if cursor is None:
            break
    return Found(rows, None)


async def owned_search(
    search: Callable[[int, int], SearchPage], owned: set[str], offset: int, limit: int
) -> Found:
    """A page of up to `limit` hits in owned sessions from `search(offset, size)` (a bound
    `search`), continuing from hit number `offset` of the whole search."""
    hits: list[SearchHit] = []
    while owned:
        page = await off_loop(search, offset, max(limit, SCAN))
        for i, hit in enumerate(page.hits):
            if hit.session.root_id in owned:
                hits.append(hit)
                if len(hits) == limit:
                    more = i < len(page.hits) - 1 or page.next_offset is not None
                    return _hits(hits, str(offset + i + 1) if more else None)
        if page.next_offset is None:
            break
        offset = page.next_offset
    return _hits(hits, None)


def _hits(hits: list[SearchHit], cursor: str | None) -> Found:
    return Found([h.session for h in hits], cursor, {h.session.id: h for h in hits})
