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
# A listing's cursor is `updated_ms:id`; a search's is the number of hits already returned.
Cursor = Annotated[str, Field(pattern=r"^([0-9]{1,15}:[A-Za-z0-9_\-]{1,128}|[0-9]{1,9})$")]


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

    id: Annotated[str, Field(pattern=r"^[A-Za-z0-9_\-]{1,128}$")] | None = Field(
        default=None, description="The new session's id (default: a fresh one); taken: 409."
    )
    title: Short | None = None
    agent: Annotated[str, Field(pattern=r"^[A-Za-z0-9_.\-]{1,64}$")] | None = None
    model: Short | None = Field(default=None, description="A model spec, e.g. `anthropic:MODEL`.")
    metadata: dict[str, JsonValue] | None = None
    location: str | None = Field(
        default=None,
        min_length=1,
        max_length=4096,
        description="Where the session lives: an existing directory of the server's host "
        "(default: the server's workspace).",
    )
    prompt: PromptIn | None = None


class ForkIn(_In):
    """Copy the transcript through `through_seq` (default: all of it) into a new session;
    `agent`/`model` make the fork run as them (a recorded `session.updated` on the fork)."""

    through_seq: Seq | None = None
    title: Short | None = None
    agent: Annotated[str, Field(pattern=r"^[A-Za-z0-9_.\-]{1,64}$")] | None = None
    model: Short | None = Field(default=None, description="A model spec, e.g. `anthropic:MODEL`.")


class DecisionIn(_In):
    """A decision on a call that waits for approval."""

    decision: Literal["allow", "deny", "always"] = Field(
        description="allow: run it once; always: run it and allow this tool for the rest of the "
        "session; deny: do not run it (the model gets an error result)."
    )
    resume: bool = True


class CompactIn(_In):
    """Request a manual compaction (an inbox control item)."""

    tail_turns: Annotated[int, Field(ge=0, le=10_000)] | None = None
    input_id: InputId | None = None
    resume: bool = True


class MoveIn(_In):
    """Move the session to another directory of the server's host (an inbox control item)."""

    location: str = Field(min_length=1, max_length=4096, description="An existing directory.")
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
        default=None,
        description="Full-text search: sessions whose title or content holds every word "
        "(`word*`: a prefix), best match first; a whole session id finds that session.",
    )
    agent: Annotated[str, Field(pattern=r"^[A-Za-z0-9_.\-]{1,64}$")] | None = Field(
        default=None, description="Only sessions of this agent (not with `q`)."
    )
    location: Annotated[str, Field(pattern=r"^(any|this|/[^\x00]*)$", max_length=4096)] = Field(
        default="any",
        description="`any`; `this`: the server's workspace; or an absolute directory: only "
        "sessions living there (not with `q`).",
    )


class SensitiveQuery(_In):
    """`sensitive=true` asks for unredacted content (needs a token with the sensitive scope)."""

    sensitive: bool = False


class MessagesQuery(SensitiveQuery):
    """Transcript messages after a sequence number, a page of at most `limit`."""

    after_seq: Seq = 0
    limit: Annotated[int, Field(ge=1, le=1000)] | None = Field(
        default=None, description="At most this many messages (default: all that follow)."
    )


class LogQuery(SensitiveQuery):
    """The durable log after `after` (exclusive); `follow` streams Server-Sent Events."""

    after: Seq = 0
    follow: bool = False
    live: bool = Field(default=False, description="Also stream live-only deltas (no replay).")
    idle_timeout: Annotated[float, Field(ge=0, le=86_400)] | None = Field(
        default=None, description="End a followed stream after this many idle seconds."
    )
    limit: Annotated[int, Field(ge=1, le=1000)] = 1000


class AguiQuery(_In):
    """Where an AG-UI stream starts and how long it follows (docs/server.md, "AG-UI")."""

    after: Annotated[str, Field(pattern=r"^[0-9]{1,16}(:[0-9]{1,6})?$")] = Field(
        default="0",
        description="Start after this event id (`SEQ` or `SEQ:K`); "
        "`Last-Event-ID` wins when given.",
    )
    follow: bool = Field(default=True, description="Stream new events as they are committed.")
    idle_timeout: Annotated[float, Field(ge=0, le=86_400)] | None = Field(
        default=None, description="End the stream after this many idle seconds."
    )


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
    """Tokens and cost; `input_tokens` counts the cached ones too."""

    input_tokens: int
    output_tokens: int
    cost_usd: float | None = Field(description="null: a request's model had no known price.")
    unpriced_requests: int = Field(0, description="Requests whose model had no known price.")
    cache_read_tokens: int = Field(0, description="Input tokens read from the prompt cache.")
    cache_write_tokens: int = Field(0, description="Input tokens written to the prompt cache.")
    cache_hit_ratio: float | None = Field(
        None, description="cache_read_tokens / input_tokens (null: no input tokens)."
    )


class MatchOut(_Out):
    """The best matching message of a search hit (`seq` 0: the title) and text around it."""

    seq: int
    snippet: str


class SummaryOut(_Out):
    """What a listing shows beside a session (`wakeful.store.SessionSummary`)."""

    turns: int = Field(description="Turns the session ran (its runs).")
    child_sessions: int = Field(description="Sessions below it (children, theirs, ...).")
    user_messages: int = Field(description="User messages still in its transcript.")
    artifacts: int
    first_prompt: str | None = Field(description="Its first user message still there, as sent.")


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
    location: str | None = Field(
        default=None, description="The workspace root the session lives in (absolute)."
    )
    location_id: str | None = Field(default=None, description="The location's stable id.")
    waiting_for: str | None = Field(
        default=None,
        description="A worker left the session: no running worker serves this location.",
    )
    usage: UsageOut
    summary: SummaryOut | None = Field(
        default=None, description="In a listing and a session's page: what its projections count."
    )
    active: bool = Field(description="This server's process is driving the session now.")
    match: MatchOut | None = Field(
        default=None, description="With a search (`q`): where the session matched."
    )


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
    cache_read_tokens: int = Field(0, description="Of input_tokens, read from the prompt cache.")
    cache_write_tokens: int = Field(0, description="Of input_tokens, written to the cache.")
    error: str | None
    final_text: str
    truncated: bool = Field(description="The last reply stopped at the output limit.")


class AdmissionOut(_Out):
    """Where an input went."""

    session_id: str
    input_id: str
    created: bool = Field(description="False: the input id was already admitted (a no-op).")
    status: str = Field(description="pending, delivered or rejected.")
    message_id: str | None = Field(
        default=None,
        description="The transcript message the input becomes (or became), known at admission; "
        "the same when the input id is sent again. Null for a control item or a rejected input.",
    )
    turns: list[TurnSummaryOut] | None = Field(default=None, description="With `wait` only.")


class CreatedOut(_Out):
    """A new session and, when a prompt was given, its admission."""

    session: SessionOut
    admission: AdmissionOut | None = Field(description="The first prompt, when one was given.")


class ApprovalOut(_Out):
    """A call waiting for a decision, with what the person deciding is shown."""

    call_id: str
    name: str
    input: dict[str, JsonValue]
    preview: str = Field(description="The command of `shell`, the diff of a file write.")


class ApprovalsOut(_Out):
    """The calls a session waits on (empty when none)."""

    session_id: str
    status: str
    approvals: list[ApprovalOut]


class MoveOut(AdmissionOut):
    """An admitted move: where the session goes (absolute), applied at its next idle boundary."""

    location: str


class InterruptOut(_Out):
    """An interrupt request: recorded durably (`requested`; false on an idle session, where
    nothing is written); `stopped_local` if a drain here ran."""

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
    next_after: int | None = Field(
        default=None,
        description="With `limit`, a full page: pass it as `after_seq` for the next page "
        "(null: nothing follows).",
    )


class ContextOut(_Out):
    """The session's context: the active history its next request carries (after
    compactions, with hidden tool output as its stub; docs/server.md); `redacted` as in
    `MessagesOut`."""

    messages: list[Message]
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
    tokens_cache_read: int = Field(0, description="Of tokens_in, read from the prompt cache.")
    tokens_cache_write: int = Field(0, description="Of tokens_in, written to the prompt cache.")
    cache_hit_ratio: float | None = Field(None, description="tokens_cache_read / tokens_in.")
    cost_usd: float | None = Field(description="null: a request's model had no known price.")
    unpriced_requests: int = Field(0, description="Requests whose model had no known price.")
    steps: int
    retries: list[dict[str, JsonValue]]
    truncated: bool = Field(description="Its last reply stopped at the output limit.")
    reverted: bool = Field(False, description="A rewind hid it (pending or final).")
    agent: str | None = Field(None, description="The agent profile it ran as.")
    options: dict[str, JsonValue] = Field(
        default_factory=dict, description="What it ran with: model (as asked), agent, max_steps."
    )
    label: str | None = Field(None, description="A host's label: its first input's metadata.label.")
    origin: dict[str, JsonValue] = Field(
        default_factory=dict, description="Why it ran: kind, source, sender, display."
    )
    user_wait_ms: int = Field(0, description="Time its approvals waited on a person.")
    estimate_ms: int | None = Field(None, description="Median wall time of earlier completed runs.")
    parent_turn_id: str | None = Field(None, description="A child's run: the parent's turn.")
    parent_call_id: str | None = Field(None, description="A child's run: the parent's call.")
    depth: int = Field(0, description="A child's run: its depth (0: not a child's run).")
    resumed_from: str | None = Field(None, description="The child's earlier turn it resumes.")


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
    message_ids: list[str]  # complete, in request order (expanded from a base receipt)
    trace_id: str | None = None  # the OpenTelemetry trace and step span, when traced
    span_id: str | None = None


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


# -- schedules (docs/schedules.md) -------------------------------------------------------------


class ScheduleIn(_In):
    """A schedule firing `prompt` by `cron`, `every` or once `at` (exactly one of them), in
    `timezone`; to `session_id`, or (absent) to a new session per fire made from `agent`,
    `model` and `location` (defaults: the server's)."""

    prompt: Text = Field(min_length=1)
    cron: Short | None = Field(default=None, description="A five-field cron expression.")
    every: Short | None = Field(default=None, description="An interval: 30s, 5m, 2h, 1d.")
    at: Short | None = Field(default=None, description="Once, at an ISO 8601 time.")
    timezone: Short = Field(default="UTC", description="An IANA time zone, e.g. Europe/Paris.")
    session_id: Annotated[str, Field(pattern=r"^[A-Za-z0-9_\-]{1,128}$")] | None = None
    name: Short | None = None
    title: Short | None = None
    missed: Literal["skip", "once"] = Field(
        default="skip", description="Fires missed in downtime: skip them, or fire once."
    )
    grace_ms: Annotated[int, Field(ge=0, le=MAX_INT)] = Field(
        default=60_000, description="How late a fire may still be taken as on time."
    )
    delivery: Literal["steer", "queue"] = "steer"
    agent: Annotated[str, Field(pattern=r"^[A-Za-z0-9_.\-]{1,64}$")] | None = None
    model: Short | None = None
    location: str | None = Field(default=None, min_length=1, max_length=4096)


class ScheduleFireOut(_Out):
    """One fire: when it was due and taken, and what it admitted (or why not)."""

    schedule_id: str
    due_ms: int
    fired_ms: int
    outcome: Literal["fired", "caught_up", "skipped", "failed"]
    session_id: str | None
    input_id: str | None
    missed: int
    error: str | None


class ScheduleOut(_Out):
    """A schedule with its next fire time (`next_fire`, ISO in its time zone) and last fire."""

    id: str
    name: str | None
    kind: Literal["cron", "interval", "once"]
    spec: str
    every: str = Field(description="When it fires, as a person reads it.")
    timezone: str
    prompt: str
    session_id: str | None
    template: dict[str, JsonValue]
    delivery: Literal["steer", "queue"]
    missed: Literal["skip", "once"]
    grace_ms: int
    enabled: bool
    next_fire_ms: int | None
    next_fire: str | None
    created_ms: int
    updated_ms: int
    last_fire: ScheduleFireOut | None
    fires: list[ScheduleFireOut] | None = Field(
        default=None, description="Recent fires, newest first (one schedule's read only)."
    )


class SchedulesOut(_Out):
    """Every schedule, oldest first."""

    schedules: list[ScheduleOut]


class DeletedOut(_Out):
    """What was deleted."""

    id: str
    deleted: bool
