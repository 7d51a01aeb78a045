"""`Store`: what the surfaces (the CLI, a server's clients) read and admit through a store.

Two classes implement it in full: `SqlStore` (a database on this machine, SQLite or
PostgreSQL) and `wakeful.client.RemoteStore` (a `wakeful serve` server over HTTP). Code written
against `Store` (listing, showing, following, searching, admitting, forking, archiving,
deleting) runs unchanged against either and never asks which one it holds; mypy checks both
against this protocol. What only a session's driver does (claims, appends, promotion) and what
only a local database offers (pruning, blobs, importing) are `SqlStore`'s alone: callers that
need them hold a `SqlStore` (the runtime opens one; the CLI's `local_runtime` refuses a server
URL with one line).

Beside it, capabilities a caller asks for by protocol, never by class (the CLI and the runner
never name `SqlStore`, `tests/test_layers.py`): `PlainReads`, stored bodies read as plain JSON
without building models (a local store has them; `isinstance(store, PlainReads)` asks), and
`ReceiptReads`, what rebuilds a recorded request from its receipt.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ._reads import RetryState, ToolCallRow, TurnRow
from ._records import (
    Admission,
    AdmissionRequest,
    Claim,
    ClaimState,
    Delivered,
    DriveReads,
    InboxItem,
    InstructionState,
    Page,
    Prelude,
    PruneCounts,
    SessionRow,
    SessionSummary,
    SyncMarker,
)
from ._search import SearchPage

if TYPE_CHECKING:
    from pydantic import JsonValue

    from ..clock import Clock
    from ..events import (
        Delivery,
        InputKind,
        PlainEvent,
        ReceiptRecorded,
        SessionCreated,
        SessionEvent,
        StoredEvent,
    )
    from ..messages import Message
    from ._access import Access
    from ._append import ClaimToken
    from ._batch import RecoveryView
    from ._claims import Claims, IsDead
    from ._facts import SessionFacts
    from ._feed import Feed
    from ._opening import TurnOpening
    from ._rates import RateBuckets
    from ._rewind import PendingRevert
    from ._schedules import Schedules
    from ._shaping import Shaping
    from ._usage import Spend


class Store(Protocol):
    """A store's sessions as the surfaces use them (see the module docstring)."""

    @property
    def url(self) -> str:
        """Where the data lives (a path, a PostgreSQL URL, or a server's base URL)."""
        ...

    def close(self) -> None:
        """Release connections."""
        ...

    # -- sessions -------------------------------------------------------------------------

    def get_session(self, session_id: str) -> SessionRow:
        """The session's row; `NotFoundError` if there is none."""
        ...

    def find_session(self, session_id: str) -> SessionRow | None:
        """The session's row, or None."""
        ...

    def resolve_session_id(self, ref: str) -> str:
        """The full id of the session `ref` (an id or a unique prefix) names; `NotFoundError`,
        or `AmbiguousIdError` listing the candidates."""
        ...

    def session_summaries(self, session_ids: Sequence[str]) -> dict[str, SessionSummary]:
        """What a listing shows beside each session: runs, child sessions, user messages,
        artifacts, first prompt."""
        ...

    def children(self, session_id: str) -> list[SessionRow]:
        """The session's child sessions, oldest first."""
        ...

    def high_water(self, session_id: str) -> int:
        """The session's newest `seq`; `NotFoundError` if unknown."""
        ...

    def list_sessions(
        self,
        *,
        roots_only: bool = True,
        archived: bool | None = False,
        limit: int = 50,
        cursor: str | None = None,
        agent: str | None = None,
        location: str | None = None,
    ) -> Page:
        """A page of sessions, newest first (of `agent`, at `location`, when given)."""
        ...

    def search(
        self,
        text: str,
        *,
        roots_only: bool = False,
        archived: bool | None = False,
        limit: int = 20,
        offset: int = 0,
    ) -> SearchPage:
        """Sessions whose content holds every word of `text`, best first."""
        ...

    def fork(self, session_id: str, through_seq: int | None = None, **fields: Any) -> SessionRow:
        """A new session holding the messages through `through_seq`; the parent is untouched."""
        ...

    def set_archived(self, session_id: str, archived: bool = True) -> None:
        """Set or clear the reversible archive marker."""
        ...

    def delete(self, session_id: str, *, actor: str | None = None) -> PruneCounts:
        """Delete a session and its descendants for good; its tombstone names `actor` (who
        deleted it: docs/access.md)."""
        ...

    # -- state read from projections --------------------------------------------------------

    def work_state(self, session_id: str) -> dict[str, JsonValue]:
        """Goal, plan, todos and jobs by kind."""
        ...

    def current_claim(self, session_id: str) -> Claim | None:
        """The session's unreleased claim, or None (a record, not proof of life)."""
        ...

    def tool_calls(self, session_id: str, status: str | None = None) -> list[ToolCallRow]:
        """Tool calls of the session in start order, optionally only those with `status`
        (`running` until the call ends)."""
        ...

    def receipts(self, session_id: str) -> list[ReceiptRecorded]:
        """The session's prompt receipts, oldest first."""
        ...

    # -- transcript and inbox -------------------------------------------------------------

    def messages(
        self, session_id: str, after_seq: int = 0, limit: int | None = None
    ) -> list[Message]:
        """The transcript in log order: after `after_seq`, at most `limit` messages."""
        ...

    def messages_with_seq(
        self, session_id: str, after_seq: int = 0, limit: int | None = None
    ) -> list[tuple[int, Message]]:
        """The transcript with each message's `seq` (a page: after `after_seq`, at most
        `limit`; the next starts after the last `seq` returned)."""
        ...

    def pending(self, session_id: str) -> list[InboxItem]:
        """Pending inbox items in enqueue order."""
        ...

    def admit(
        self,
        session_id: str,
        input_id: str | None,
        kind: InputKind,
        payload: dict[str, JsonValue],
        delivery: Delivery = "steer",
    ) -> Admission:
        """Admit one input durably (idempotent by `input_id`)."""
        ...

    # -- the log ----------------------------------------------------------------------------

    def events(
        self, session_id: str, after: int = 0, limit: int | None = None, types: Sequence[str] = ()
    ) -> list[StoredEvent]:
        """Durable events with `seq > after`, in order (optionally of some types)."""
        ...

    def log(
        self,
        session_id: str,
        after: int = 0,
        *,
        follow: bool = False,
        idle_timeout_s: float | None = None,
        stop: Callable[[], bool] | None = None,
    ) -> Iterator[StoredEvent | SyncMarker]:
        """Durable events after `after`; with `follow`, a `SyncMarker` then live events."""
        ...

    def log_all(
        self,
        after_id: int = 0,
        *,
        follow: bool = False,
        idle_timeout_s: float | None = None,
        stop: Callable[[], bool] | None = None,
    ) -> Iterator[StoredEvent | SyncMarker]:
        """The instance-wide log in its order (`events_since`); same contract as `log`."""
        ...


@runtime_checkable
class PlainReads(Protocol):
    """Reads of stored bodies as plain JSON, exactly as their models would dump them, without
    building a model (cold start, issue 25): a local store's; ask with `isinstance`."""

    def plain_events(
        self, session_id: str, after: int = 0, limit: int | None = None, types: Sequence[str] = ()
    ) -> list[PlainEvent]:
        """`Store.events` with each body as plain JSON."""
        ...

    def plain_log(
        self,
        session_id: str,
        after: int = 0,
        *,
        follow: bool = False,
        idle_timeout_s: float | None = None,
        stop: Callable[[], bool] | None = None,
    ) -> Iterator[PlainEvent | SyncMarker]:
        """`Store.log` with each body as plain JSON."""
        ...

    def plain_messages(self, session_id: str) -> list[dict[str, Any]]:
        """`Store.messages` as plain dumps (`model_dump(mode="json", exclude_none=True)`)."""
        ...

    def pending_ids(self, session_id: str) -> list[str]:
        """The input ids of `Store.pending`, read without decoding the items."""
        ...


@runtime_checkable
class PlainStore(Store, PlainReads, Protocol):
    """A `Store` with `PlainReads` (a local one): what `session show` reads plainly."""


@runtime_checkable
class ReceiptReads(Protocol):
    """What rebuilds a recorded request from its receipt: blobs and the messages as they read
    when it was recorded (a local store's; ask with `isinstance`)."""

    def get_blob(self, digest: str) -> bytes:
        """The bytes of a blob; `NotFoundError` if absent."""
        ...

    def receipt_message_ids(self, session_id: str, receipt_id: str) -> tuple[str, ...]:
        """The complete message ids of one receipt (a chain of receipts read back)."""
        ...

    def receipt_messages(self, session_id: str, receipt_id: str) -> dict[str, Message]:
        """The messages, by id, as the log held them when the receipt was recorded."""
        ...


class SessionWrite(Protocol):
    """One write transaction on one session under one claim (`SqlStore.write`): what is
    written through it commits together when its block ends, or nothing does; every event it
    writes is fenced by its claim (`ClaimLostError` rolls the whole unit back). Synchronous:
    a unit never spans an `await` (docs/store.md, "Units of work")."""

    @property
    def session_id(self) -> str:
        """The session this unit writes."""
        ...

    @property
    def claim(self) -> ClaimToken | None:
        """The claim the unit's writes are fenced by (None: unfenced)."""
        ...

    @property
    def stored(self) -> list[StoredEvent]:
        """The events the unit wrote, as stored (complete once the unit has ended)."""
        ...

    def append(self, events: Sequence[SessionEvent], blobs: Sequence[bytes] = ()) -> None:
        """Write `events` after what the unit wrote so far, and `blobs` referenced by it."""
        ...

    def promote(
        self,
        *,
        idle: bool,
        input_id: str | None = None,
        start_turn: str | None = None,
        prelude: Prelude | None = None,
    ) -> list[Delivered]:
        """Deliver the next inbox items (steers; one queued item when idle; only `input_id`
        when given), starting `start_turn` with delivered messages, `prelude` before them."""
        ...

    def admit(
        self,
        input_id: str,
        kind: InputKind,
        payload: dict[str, JsonValue],
        delivery: Delivery = "steer",
        *,
        into: str | None = None,
    ) -> Admission:
        """Admit an input to this session (or to the session `into`), idempotent by id."""
        ...

    def facts(self) -> SessionFacts:
        """The session's agent, model and host instruction entries, read under the unit's lock
        (in the lock's round trip when asked first)."""
        ...

    def claim_state(self) -> ClaimState:
        """Lock the session and read how its claim and work stand, and its facts with them
        (`facts` then reads nothing): one round trip."""
        ...

    def take_claim(self, owner: str, lease_ms: int, is_dead: IsDead | None = None) -> Claim | None:
        """Take the session's claim (None: a live driver holds it); later writes use it."""
        ...

    # A unit's last reads: what the unit leaves, read after its writes and answered with its
    # commit (no round trip of their own on PostgreSQL). Each returns a function to call once
    # the unit has ended.

    def release_and_look(self) -> Callable[[], tuple[bool, bool]]:
        """Release the unit's claim if it is still the session's, and look at the inbox as the
        unit leaves it: whether it was released, whether an item is pending."""
        ...

    def opening(
        self, approval_types: Sequence[str], usage_window: int
    ) -> Callable[[], TurnOpening | None]:
        """What a turn reads before its first step, its history included, as this unit leaves
        the session (what it wrote so far included): a read the caller would otherwise make
        after the commit; None for a session with a compaction (read after the unit)."""
        ...

    def messages_after(self, seq: int) -> Callable[[], list[tuple[int, Message]]]:
        """The transcript's messages after `seq` as the unit leaves it, with their `seq`."""
        ...


class SessionRead(Protocol):
    """One read of a session (`SqlStore.read`): what a driver reads together, in one call
    (one snapshot on SQLite; batched on PostgreSQL, each statement its own snapshot)."""

    @property
    def session_id(self) -> str:
        """The session read."""
        ...

    def opening(
        self, approval_types: Sequence[str], usage_window: int, *, history: bool = False
    ) -> TurnOpening:
        """What a turn reads before its first step, batched (with `history`: the transcript
        too, when the session has no compaction)."""
        ...

    def recent_events(self, window: int, types: Sequence[str]) -> list[StoredEvent]:
        """The events of `types` among the session's newest `window` events, in order."""
        ...

    def any_pending(self) -> bool:
        """Whether the inbox holds a pending item; `NotFoundError` for an unknown session."""
        ...

    def pending(self) -> list[InboxItem]:
        """Pending inbox items in enqueue order."""
        ...

    def facts(self) -> SessionFacts:
        """The session's agent, model and host instruction entries."""
        ...

    def pending_facts(self) -> tuple[bool, SessionFacts]:
        """`any_pending` and the session's facts, in one round trip."""
        ...

    def drive(self) -> DriveReads:
        """The session's row as stored and its facts (the `/mcp` switches among them), its
        instruction state and the log's newest event id, in one round trip: what a drive's
        context is built from."""
        ...

    def messages_after(self, seq: int) -> list[tuple[int, Message]]:
        """The transcript's messages stored after `seq`, with their `seq`."""
        ...


class LocalStore(Store, PlainReads, ReceiptReads, Protocol):
    """What execution needs of a store on this machine (`SqlStore` implements it): the
    surfaces' `Store`, the units of work (`write`, `read`), the aggregates (`claims`, `feed`,
    `schedules`, `access`, `shaping`, `rates`, `spend`) and a driver's own reads and writes. Execution is annotated with
    it; only the modules that open a store name the class (`tests/test_layers.py`)."""

    @property
    def clock(self) -> Clock:
        """The store's clock (a test's fake one, or the system's)."""
        ...

    @property
    def claims(self) -> Claims:
        """Claims and the workers' placement notes (`store/_claims.py`)."""
        ...

    @property
    def feed(self) -> Feed:
        """The instance-wide log (`store/_feed.py`)."""
        ...

    @property
    def schedules(self) -> Schedules:
        """The schedules and their fires (`store/_schedules.py`)."""
        ...

    @property
    def access(self) -> Access:
        """Users, their tokens, session owners and share links (`store/_access.py`)."""
        ...

    @property
    def shaping(self) -> Shaping:
        """Rewind, history edits, metadata, extension state, artifacts (`store/_shaping.py`)."""
        ...

    @property
    def rates(self) -> RateBuckets:
        """The shared rate limits' buckets (`store/_rates.py`)."""
        ...

    @property
    def spend(self) -> Spend:
        """What a budget counts: a root's, an agent's, a user's spend (`store/_usage.py`)."""
        ...

    def write(
        self, session_id: str, claim: ClaimToken | None = None
    ) -> AbstractContextManager[SessionWrite]:
        """Open a unit of work on `session_id` under `claim` (`SessionWrite`)."""
        ...

    def read(self, session_id: str) -> AbstractContextManager[SessionRead]:
        """Open one read of `session_id` (`SessionRead`)."""
        ...

    def create_session(
        self, session_id: str | None = None, *, events: Sequence[SessionEvent] = (), **fields: Any
    ) -> SessionRow:
        """Insert a session row and its `session.created` event, then `events`, in one
        transaction; return the row."""
        ...

    def admit(
        self,
        session_id: str,
        input_id: str | None,
        kind: InputKind,
        payload: dict[str, JsonValue],
        delivery: Delivery = "steer",
        *,
        create: SessionCreated | None = None,
        actor: str | None = None,
    ) -> Admission:
        """Admit one input durably, recording who admits it (`actor`); with `create`, a
        session not there yet is inserted in the same transaction."""
        ...

    def admit_together(self, requests: Sequence[AdmissionRequest]) -> list[Admission | Exception]:
        """Admit each request as `admit` would, in one write transaction; each one's outcome
        in order (its `Admission`, or the error `admit` raises for it)."""
        ...

    def input(self, session_id: str, input_id: str) -> InboxItem:
        """One inbox item by id; `NotFoundError` if unknown."""
        ...

    def append(
        self,
        session_id: str,
        events: Sequence[SessionEvent],
        claim: ClaimToken | None = None,
        *,
        blobs: Sequence[bytes] = (),
    ) -> list[StoredEvent]:
        """Append events and their projections (and `blobs`) in one transaction; with
        `claim`, fenced."""
        ...

    def append_batch(
        self,
        batches: Sequence[tuple[str, Sequence[SessionEvent], ClaimToken]],
        blobs: Mapping[str, Sequence[bytes]] | None = None,
    ) -> set[str]:
        """Append each session's events, fenced by its claim, in one transaction, with its
        `blobs` (by session id) stored and referenced; return the sessions written (one whose
        claim is gone is left out)."""
        ...

    def put_blob(self, data: bytes, session_id: str | None = None) -> str:
        """Store bytes once by SHA-256 and return the digest; with a session, reference it."""
        ...

    def get_blobs(self, digests: Sequence[str]) -> dict[str, bytes]:
        """The bytes of each blob in `digests`, by digest; `NotFoundError` if any is absent."""
        ...

    def recovery_views(
        self, session_ids: Sequence[str], types: Sequence[str] = ()
    ) -> dict[str, RecoveryView]:
        """Each named session as recovery reads it, in one read transaction."""
        ...

    def openings(
        self, session_ids: Sequence[str], approval_types: Sequence[str], usage_window: int
    ) -> dict[str, tuple[TurnOpening, list[tuple[int, Message]]]]:
        """Each named session's turn opening and whole transcript, in one read."""
        ...

    def turns(self, session_id: str) -> list[TurnRow]:
        """Turns of a session in start order."""
        ...

    def retry_state(self, session_id: str) -> RetryState | None:
        """The session's pending retry, or None."""
        ...

    def instruction_state(self, session_id: str) -> InstructionState:
        """What an instruction delta is planned from, from one snapshot."""
        ...

    def live_compactions(self, session_id: str) -> list[StoredEvent]:
        """The `compaction.ended` events a rewind or history edit has not hidden."""
        ...

    def pending_revert(self, session_id: str) -> PendingRevert | None:
        """The session's revert still pending (undoable), if any."""
        ...

    def extension_state(self, session_id: str, namespace: str) -> dict[str, JsonValue]:
        """The session's extension state in `namespace`, by key."""
        ...
