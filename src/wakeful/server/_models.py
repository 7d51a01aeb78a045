"""The shapes of the HTTP API: request bodies, query parameters and responses (pydantic v2).

These models are the single source of the OpenAPI document (`_openapi`), and every handler
builds its response through one of them, so what the document promises is what is sent.
Strings that reach the store refuse NUL characters (PostgreSQL cannot hold them in text).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, model_validator

from ..messages import Message

MAX_INT = 2**53  # JSON-safe; also keeps SQLite's 64-bit integers from overflowing
Text = Annotated[str, Field(pattern=r"^[^\x00]*$", max_length=1_000_000)]
Short = Annotated[str, Field(pattern=r"^[^\x00]*$", max_length=500)]
InputId = Annotated[str, Field(pattern=r"^[A-Za-z0-9_.:\-]{1,128}$")]
Seq = Annotated[int, Field(ge=0, le=MAX_INT)]
Cursor = Annotated[str, Field(pattern=r"^[0-9]{1,15}:[A-Za-z0-9_\-]{1,128}$")]


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


# -- requests --------------------------------------------------------------------------------


class PromptIn(_In):
    """One input to admit: `text`, or provider-neutral `blocks` (exactly one of them)."""

    text: Text | None = None
    blocks: list[dict[str, JsonValue]] | None = Field(default=None, min_length=1, max_length=256)
    input_id: InputId | None = Field(
        default=None, description="Idempotency key: the same id and content is a no-op."
    )
    delivery: Literal["steer", "queue"] = "steer"
    resume: bool = Field(default=True, description="Wake the session's drain after admission.")
    wait: bool = Field(default=False, description="Answer after the drain ends, with its turns.")
    metadata: dict[str, JsonValue] | None = None

    @model_validator(mode="after")
    def _one_body(self) -> PromptIn:
        if (self.text is None) == (self.blocks is None):
            raise ValueError("give exactly one of `text` or `blocks`")
        if self.text is not None and not self.text.strip():
            raise ValueError("`text` is empty")
        return self


class CreateSessionIn(_In):
    """A new session, optionally with its first prompt."""

    title: Short | None = None
    agent: Annotated[str, Field(pattern=r"^[A-Za-z0-9_.\-]{1,64}$")] | None = None
    model: Short | None = Field(default=None, description="A model spec, e.g. `anthropic:MODEL`.")
    metadata: dict[str, JsonValue] | None = None
    prompt: PromptIn | None = None


class ForkIn(_In):
    """Copy the transcript through `through_seq` (default: all of it) into a new session."""

    through_seq: Seq | None = None
    title: Short | None = None


class CompactIn(_In):
    """Request a manual compaction (an inbox control item)."""

    tail_turns: Annotated[int, Field(ge=0, le=10_000)] | None = None
    input_id: InputId | None = None
    resume: bool = True


# -- query parameters ------------------------------------------------------------------------


class ListQuery(_In):
    """Filters and paging of `GET /sessions`."""

    roots: bool = Field(default=True, description="Only top-level sessions.")
    archived: Literal["false", "true", "all"] = "false"
    limit: Annotated[int, Field(ge=1, le=500)] = 50
    cursor: Cursor | None = None
    q: Annotated[str, Field(pattern=r"^[^\x00]*$", max_length=200)] | None = Field(
        default=None, description="Case-insensitive search in id and title."
    )


class SensitiveQuery(_In):
    """`sensitive=true` asks for unredacted content (needs a token with the sensitive scope)."""

    sensitive: bool = False


class MessagesQuery(SensitiveQuery):
    """Transcript messages after a sequence number."""

    after_seq: Seq = 0


class LogQuery(SensitiveQuery):
    """The durable log after `after` (exclusive); `follow` streams Server-Sent Events."""

    after: Seq = 0
    follow: bool = False
    live: bool = Field(default=False, description="Also stream live-only deltas (no replay).")
    idle_timeout: Annotated[float, Field(ge=0, le=86_400)] | None = Field(
        default=None, description="End a followed stream after this many idle seconds."
    )
    limit: Annotated[int, Field(ge=1, le=1000)] = 1000


# -- responses -------------------------------------------------------------------------------


class ErrorOut(_Out):
    """Every 4xx/5xx body: a stable `error` code and a human `reason`."""

    error: str
    reason: str


class HealthOut(_Out):
    """Liveness and the server's version."""

    status: Literal["ok"]
    version: str


class UsageOut(_Out):
    """Tokens and cost."""

    input_tokens: int
    output_tokens: int
    cost_usd: float


class SessionOut(_Out):
    """A session row (the same fields as `wakeful session list --format json`)."""

    id: str
    parent_id: str | None
    root_id: str
    forked_from: str | None
    fork_seq: int | None
    title: str | None
    agent: str | None
    model: str | None
    status: str
    archived: bool
    created_ms: int
    updated_ms: int
    last_seq: int
    usage: UsageOut
    active: bool = Field(description="This server's process is driving the session now.")


class ClaimOut(_Out):
    """The session's unreleased write-ahead claim (a record, not proof the owner lives)."""

    owner: str
    epoch: int
    lease_until_ms: int
    attempts: int


class SessionDetailOut(SessionOut):
    """A session with its children, pending count, work state and claim."""

    children: list[str]
    pending: int
    work_state: dict[str, JsonValue]
    claim: ClaimOut | None


class SessionPageOut(_Out):
    """A page of sessions; pass `next_cursor` as `cursor` for the next one."""

    sessions: list[SessionOut]
    next_cursor: str | None


class TurnSummaryOut(_Out):
    """How a turn driven for a `wait: true` prompt ended."""

    turn_id: str
    outcome: str
    steps: int
    input_tokens: int
    output_tokens: int
    error: str | None
    final_text: str


class AdmissionOut(_Out):
    """Where an input went."""

    session_id: str
    input_id: str
    created: bool = Field(description="False: the input id was already admitted (a no-op).")
    status: str = Field(description="pending, delivered or rejected.")
    turns: list[TurnSummaryOut] | None = Field(default=None, description="With `wait` only.")


class CreatedOut(_Out):
    """A new session and, when a prompt was given, its admission."""

    session: SessionOut
    admission: AdmissionOut | None = Field(description="The first prompt, when one was given.")


class InterruptOut(_Out):
    """An interrupt request: recorded durably; `stopped_local` if a drain here ran."""

    session_id: str
    requested: bool
    stopped_local: bool = Field(description="A drain of this process was running and stopped.")


class CountsOut(_Out):
    """What a delete removed."""

    sessions: int
    roots: int
    children: int
    events: int
    messages: int


class MessageOut(_Out):
    """A transcript message at its `seq`."""

    seq: int
    message: Message


class MessagesOut(_Out):
    """The transcript; `redacted` says whether instruction text was hidden."""

    messages: list[MessageOut]
    redacted: bool


class InboxItemOut(_Out):
    """An admitted input not delivered yet."""

    input_id: str
    seq: int
    kind: str
    delivery: str
    status: str
    payload: dict[str, JsonValue]


class PendingOut(_Out):
    """The pending inbox in enqueue order."""

    items: list[InboxItemOut]


class RunOut(_Out):
    """A turn as a run record: outcome, times, usage, steps and retries."""

    id: str
    input_ids: list[str]
    status: str
    outcome: str | None
    started_ms: int
    ended_ms: int | None
    error: str | None
    tokens_in: int
    tokens_out: int
    cost_usd: float
    steps: int
    retries: list[dict[str, JsonValue]]


class TurnsOut(_Out):
    """The session's turns in start order."""

    turns: list[RunOut]


class SessionUsageOut(UsageOut):
    """Usage in total and per turn."""

    turns: list[UsageOut]


class SectionOut(_Out):
    """One prompt section: id, exact source, digest and size; content when allowed."""

    id: str
    source: str
    digest: str
    bytes: int | None
    content: str | None = Field(description="Section text; null when redacted or absent.")
    redacted: bool


class ReceiptOut(_Out):
    """The receipt of one physical attempt."""

    receipt_id: str
    turn_id: str | None
    step: int
    attempt: int
    model: str
    purpose: str
    request_digest: str
    sections: list[SectionOut]
    message_ids: list[str]


class ReceiptsOut(_Out):
    """Every receipt of the session."""

    receipts: list[ReceiptOut]
    redacted: bool


class EventOut(_Out):
    """A durable event (as `wakeful log --format jsonl` prints it)."""

    id: int
    session_id: str
    seq: int
    at_ms: int
    type: str
    data: dict[str, JsonValue]


class EventsOut(_Out):
    """A page of the log."""

    events: list[EventOut]
    next_after: int = Field(description="Pass as `after` to read on.")
    redacted: bool
