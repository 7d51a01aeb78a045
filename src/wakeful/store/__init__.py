"""The durable store: sessions, the event log and its projections, inbox, blobs, claims.

SQLite (the embedded default) and PostgreSQL sit behind one `SqlStore`; open either with
`open_store(url)`. Every change is events plus projection rows in one transaction.
"""

from ._append import ClaimToken
from ._claims import fence
from ._open import default_db_path, open_store, resolve_db_url
from ._reads import RetryState, ToolCallRow, TurnRow
from ._records import (
    Admission,
    Claim,
    Delivered,
    DrainStart,
    InboxItem,
    Page,
    PruneCounts,
    SessionRow,
    SyncMarker,
)
from ._store import SqlStore, new_session_id

Store = SqlStore

__all__ = [
    "Admission",
    "Claim",
    "ClaimToken",
    "Delivered",
    "DrainStart",
    "InboxItem",
    "Page",
    "PruneCounts",
    "RetryState",
    "SessionRow",
    "SqlStore",
    "Store",
    "SyncMarker",
    "ToolCallRow",
    "TurnRow",
    "default_db_path",
    "fence",
    "new_session_id",
    "open_store",
    "resolve_db_url",
]
