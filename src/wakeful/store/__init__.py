"""The durable store: sessions, the event log and its projections, inbox, blobs, claims.

SQLite (the embedded default) and PostgreSQL sit behind one `SqlStore`; open either with
`open_store(url)`. Every change is events plus projection rows in one transaction. `Store` is
the protocol the surfaces read and admit through, implemented by `SqlStore` and by
`wakeful.client.RemoteStore` (`_protocol`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_names

if TYPE_CHECKING:
    from .._ids import (
        new_schedule_id,
        new_session_id,
    )
    from ._access import (
        SCOPES,
        Access,
        Scope,
        ShareLink,
        UserToken,
        check_user_name,
        cookie_digest,
        parse_scopes,
        token_digest,
    )
    from ._append import MESSAGE_MAX_BYTES, ClaimToken
    from ._artifacts import ARTIFACTS_PER_SESSION_CAP, Artifact, artifacts_from_metadata
    from ._batch import RecoveryView
    from ._claims import fence
    from ._encryption import keyring_path
    from ._facts import SessionFacts
    from ._faults import Outage, is_transient
    from ._feed import Feed
    from ._filemap import DirectoryFileMap, FileMap, FileMapNames, file_map_store
    from ._inbox import sent_message_id
    from ._keys import (
        KeyProvider,
        LocalMasterKey,
        master_key_from,
        new_master_key,
        parse_master_key,
    )
    from ._media import blob_digest, media_refs
    from ._open import (
        default_db_path,
        encrypt_store_at,
        memory_store,
        open_store,
        resolve_db_url,
        rotate_key_at,
    )
    from ._opening import TurnOpening
    from ._owner import current_owner, host_id, owner_is_dead
    from ._protocol import (
        LocalStore,
        PlainReads,
        PlainStore,
        ReceiptReads,
        SessionRead,
        SessionWrite,
        Store,
    )
    from ._rates import Rate
    from ._reads import InstructionState, RetryState, ToolCallRow, TurnRow
    from ._ready import Reservation
    from ._records import (
        Admission,
        AdmissionRequest,
        Claim,
        ClaimState,
        Delivered,
        DrainStart,
        InboxItem,
        Page,
        Prelude,
        PruneCounts,
        SessionRow,
        SessionSummary,
        SyncMarker,
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
    )
    from ._search import SearchHit, SearchPage
    from ._store import SqlStore
    from ._usage import USAGE_BY, UsageGroup, UsageRecord, UsageReport, since_ms, usage_report

# Every name loads from its module on first use: `open_store` needs the store class and its
# parts, not the protocol, the fault helpers or logging (cold start of `session list`, issue 25).
_LAZY = {
    "SCOPES": "wakeful.store._access",
    "Access": "wakeful.store._access",
    "Scope": "wakeful.store._access",
    "ShareLink": "wakeful.store._access",
    "UserToken": "wakeful.store._access",
    "check_user_name": "wakeful.store._access",
    "cookie_digest": "wakeful.store._access",
    "parse_scopes": "wakeful.store._access",
    "token_digest": "wakeful.store._access",
    "ClaimToken": "wakeful.store._append",
    "MESSAGE_MAX_BYTES": "wakeful.store._append",
    "TurnOpening": "wakeful.store._opening",
    "ARTIFACTS_PER_SESSION_CAP": "wakeful.store._artifacts",
    "Artifact": "wakeful.store._artifacts",
    "artifacts_from_metadata": "wakeful.store._artifacts",
    "RecoveryView": "wakeful.store._batch",
    "encrypt_store_at": "wakeful.store._open",
    "keyring_path": "wakeful.store._encryption",
    "rotate_key_at": "wakeful.store._open",
    "KeyProvider": "wakeful.store._keys",
    "LocalMasterKey": "wakeful.store._keys",
    "master_key_from": "wakeful.store._keys",
    "new_master_key": "wakeful.store._keys",
    "parse_master_key": "wakeful.store._keys",
    "fence": "wakeful.store._claims",
    "Outage": "wakeful.store._faults",
    "Feed": "wakeful.store._feed",
    "DirectoryFileMap": "wakeful.store._filemap",
    "FileMap": "wakeful.store._filemap",
    "FileMapNames": "wakeful.store._filemap",
    "file_map_store": "wakeful.store._filemap",
    "is_transient": "wakeful.store._faults",
    "blob_digest": "wakeful.store._media",
    "media_refs": "wakeful.store._media",
    "default_db_path": "wakeful.store._open",
    "sent_message_id": "wakeful.store._inbox",
    "open_store": "wakeful.store._open",
    "USAGE_BY": "wakeful.store._usage",
    "UsageGroup": "wakeful.store._usage",
    "UsageRecord": "wakeful.store._usage",
    "UsageReport": "wakeful.store._usage",
    "usage_report": "wakeful.store._usage",
    "since_ms": "wakeful.store._usage",
    "memory_store": "wakeful.store._open",
    "resolve_db_url": "wakeful.store._open",
    "current_owner": "wakeful.store._owner",
    "host_id": "wakeful.store._owner",
    "owner_is_dead": "wakeful.store._owner",
    "LocalStore": "wakeful.store._protocol",
    "PlainReads": "wakeful.store._protocol",
    "PlainStore": "wakeful.store._protocol",
    "ReceiptReads": "wakeful.store._protocol",
    "Store": "wakeful.store._protocol",
    "SessionRead": "wakeful.store._protocol",
    "SessionWrite": "wakeful.store._protocol",
    "ClaimState": "wakeful.store._records",
    "SessionFacts": "wakeful.store._facts",
    "InstructionState": "wakeful.store._reads",
    "RetryState": "wakeful.store._reads",
    "ToolCallRow": "wakeful.store._reads",
    "TurnRow": "wakeful.store._reads",
    "Admission": "wakeful.store._records",
    "AdmissionRequest": "wakeful.store._records",
    "Claim": "wakeful.store._records",
    "Reservation": "wakeful.store._ready",
    "Delivered": "wakeful.store._records",
    "DrainStart": "wakeful.store._records",
    "InboxItem": "wakeful.store._records",
    "Page": "wakeful.store._records",
    "Prelude": "wakeful.store._records",
    "PruneCounts": "wakeful.store._records",
    "SessionRow": "wakeful.store._records",
    "SessionSummary": "wakeful.store._records",
    "SyncMarker": "wakeful.store._records",
    "new_session_id": "wakeful._ids",
    "FILE_CHANGE_KEY": "wakeful.store._rewind",
    "FileChange": "wakeful.store._rewind",
    "PendingRevert": "wakeful.store._rewind",
    "RevertPlan": "wakeful.store._rewind",
    "FIRE_HISTORY": "wakeful.store._schedules",
    "FireOutcome": "wakeful.store._schedules",
    "FirePlan": "wakeful.store._schedules",
    "MissedPolicy": "wakeful.store._schedules",
    "Schedule": "wakeful.store._schedules",
    "ScheduleFire": "wakeful.store._schedules",
    "ScheduleKind": "wakeful.store._schedules",
    "fire_input_id": "wakeful.store._schedules",
    "fire_session_id": "wakeful.store._schedules",
    "new_schedule_id": "wakeful._ids",
    "SearchHit": "wakeful.store._search",
    "SearchPage": "wakeful.store._search",
    "SqlStore": "wakeful.store._store",
    "Rate": "wakeful.store._rates",
}

__getattr__ = lazy_names(__name__, _LAZY, globals())

__all__ = [
    "KeyProvider",
    "LocalMasterKey",
    "encrypt_store_at",
    "keyring_path",
    "master_key_from",
    "new_master_key",
    "parse_master_key",
    "rotate_key_at",
    "SCOPES",
    "Access",
    "Scope",
    "ShareLink",
    "UserToken",
    "check_user_name",
    "cookie_digest",
    "parse_scopes",
    "token_digest",
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
    "AdmissionRequest",
    "Claim",
    "Reservation",
    "ClaimState",
    "ClaimToken",
    "MESSAGE_MAX_BYTES",
    "Delivered",
    "DirectoryFileMap",
    "DrainStart",
    "SessionFacts",
    "Feed",
    "FileMap",
    "FileMapNames",
    "InboxItem",
    "Outage",
    "InstructionState",
    "Page",
    "Prelude",
    "PruneCounts",
    "Rate",
    "RecoveryView",
    "RetryState",
    "SearchHit",
    "SearchPage",
    "SessionRead",
    "SessionRow",
    "SessionSummary",
    "SessionWrite",
    "SqlStore",
    "LocalStore",
    "PlainReads",
    "PlainStore",
    "ReceiptReads",
    "Store",
    "SyncMarker",
    "ToolCallRow",
    "TurnOpening",
    "TurnRow",
    "USAGE_BY",
    "UsageGroup",
    "UsageRecord",
    "UsageReport",
    "usage_report",
    "since_ms",
    "current_owner",
    "default_db_path",
    "fence",
    "file_map_store",
    "is_transient",
    "media_refs",
    "memory_store",
    "host_id",
    "new_session_id",
    "open_store",
    "owner_is_dead",
    "resolve_db_url",
    "sent_message_id",
]
