"""The durable store: sessions, the event log and its projections, inbox, blobs, claims.

SQLite (the embedded default) and PostgreSQL sit behind one `SqlStore`; open either with
`open_store(url)`. Every change is events plus projection rows in one transaction. `Store` is
the protocol the surfaces read and admit through, implemented by `SqlStore` and by
`wakeful.client.RemoteStore` (`_protocol`).
"""

from ._append import ClaimToken
from ._artifacts import ARTIFACTS_PER_SESSION_CAP, Artifact, artifacts_from_metadata
from ._batch import RecoveryView
from ._claims import fence
from ._faults import Outage, is_transient
from ._media import blob_digest, media_refs
from ._open import default_db_path, open_store, resolve_db_url
from ._owner import current_owner, host_id, owner_is_dead
from ._protocol import Store
from ._reads import RetryState, ToolCallRow, TurnRow
from ._records import (
    Admission,
    Claim,
    Delivered,
    DrainStart,
    InboxItem,
    Page,
    Prelude,
    PruneCounts,
    SessionRow,
    SyncMarker,
    new_session_id,
)
from ._rewind import FILE_CHANGE_KEY, FileChange, PendingRevert, RevertPlan
from ._schedules import (
    FIRE_HISTORY,
    FireOutcome,
    FirePlan,
    MissedPolicy,
    Schedule,
    ScheduleFire,
    ScheduleKind,
    fire_input_id,
    fire_session_id,
    new_schedule_id,
)
from ._search import SearchHit, SearchPage
from ._store import SqlStore

__all__ = [
    "FIRE_HISTORY",
    "FireOutcome",
    "FirePlan",
    "MissedPolicy",
    "Schedule",
    "ScheduleFire",
    "ScheduleKind",
    "fire_input_id",
    "fire_session_id",
    "new_schedule_id",
    "ARTIFACTS_PER_SESSION_CAP",
    "FILE_CHANGE_KEY",
    "Artifact",
    "FileChange",
    "PendingRevert",
    "RevertPlan",
    "artifacts_from_metadata",
    "blob_digest",
    "Admission",
    "Claim",
    "ClaimToken",
    "Delivered",
    "DrainStart",
    "InboxItem",
    "Outage",
    "Page",
    "Prelude",
    "PruneCounts",
    "RecoveryView",
    "RetryState",
    "SearchHit",
    "SearchPage",
    "SessionRow",
    "SqlStore",
    "Store",
    "SyncMarker",
    "ToolCallRow",
    "TurnRow",
    "current_owner",
    "default_db_path",
    "fence",
    "is_transient",
    "media_refs",
    "host_id",
    "new_session_id",
    "open_store",
    "owner_is_dead",
    "resolve_db_url",
]
