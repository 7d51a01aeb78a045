"""A turn's state and its steps, as values: what the turn knows, and what happens next.

`TurnState` is everything a turn learns while it runs (its step, its allowance, its usage, its
newest reply's text and cut, a retry to clear, the tools allowed `always`); it is frozen and
the runner replaces it at each transition. The nodes say what happens next: each handler of
`TurnRunner` runs one and returns the next, in the spirit of pydantic-ai's graph nodes and
openai-agents' `NextStep` results, so the turn reads as one loop (`TurnRunner._steps`):

    run ── approvals decided? run that step's calls first ──┐
                                                            ▼
       ┌──────────────────────────────────────────────► Attempt ◄──── Retry ◄─┐
       │  the next step (with its receipt, when the      │  │  │               │
       │  boundary wrote the one built ahead)            │  │  └ a provider or ┘
       │                                                 │  │    store fault (durable wait)
    Boundary ◄── RunTools ◄───── a reply with calls ─────┘  │
       ▲           (read-only: reply and results held)      │
       │                                                    ▼ a final reply (held)
       └─────────── steers delivered with it ───────── FinalReply
                                                            │ nothing delivered
                                                            ▼
                                                     End("completed")

Two writes are held rather than made at once (the port's held-events buffer), and each has a
node that decides where it goes:

- **A read-only tool step** (`RunTools`, `Boundary.held_step`): the reply and its calls'
  results wait for the boundary's write (the delivery of steers). Before that write the
  runner builds the next step's first attempt ahead (`RequestBuilder.build_ahead`), and the
  boundary writes its receipt last in the same transaction when nothing is delivered; the
  `Attempt` that follows then carries it (`Attempt.ahead`) and sends its request without a
  write of its own. When something is delivered the receipt is not written and the attempt
  is built again from what the boundary delivered.
- **A final reply** (`FinalReply`): held, and written by the boundary's delivery, in the
  transaction that delivers the steers that arrived while it streamed (then the turn goes on,
  with a fresh allowance) or alone (then the turn ends `completed`). A transient store fault
  on that write drops the held reply and asks the step again (`Retry`, same message id).

Every other exit is an exception the loop turns into an `End`: an approval nobody present
can give (`paused`), an interrupt (`interrupted`; on a shutdown the turn stays open), any
other `WakefulError` (its terminal outcome). Every `End` writes `turn.ended` (invariant 10).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..errors import ProviderError, StoreError
from ..events import Outcome, ReceiptRecorded
from ..messages import Message, new_message_id
from ..providers import Finish, ModelRequest, Usage
from ._pricing import add_usage
from ._prompt import Section


@dataclass(frozen=True, slots=True)
class TurnState:
    """What a turn knows between its transitions (replaced, never changed in place).

    `step` counts the steps begun (`TurnResult.steps`, whatever ends the turn); `allowance` the
    steps left before `StepLimitError` (a delivered steer renews it); `final_text` and
    `truncated` describe the newest reply; `retry_pending`: a `retry.scheduled` not yet
    cleared by a recorded reply; `grants`: the tools allowed `always` in this session.
    """

    turn_id: str
    step: int = 0
    allowance: int = 0
    usage: Usage = field(default_factory=lambda: Usage(0, 0))
    final_text: str = ""
    truncated: bool = False
    retry_pending: bool = False
    grants: frozenset[str] = frozenset()

    def begin_step(self) -> TurnState:
        """The next step has begun: counted, and taken from the allowance."""
        return replace(self, step=self.step + 1, allowance=self.allowance - 1)

    def renewed(self, max_steps: int) -> TurnState:
        """A steer was delivered: the allowance starts again (it caps one request's autonomy)."""
        return replace(self, allowance=max_steps)

    def retrying(self) -> TurnState:
        """A retry is scheduled (`retry.scheduled` durable): the next reply clears it."""
        return replace(self, retry_pending=True)

    def granted(self, grants: frozenset[str]) -> TurnState:
        """The tools allowed `always` in this session are now `grants` (the same state when
        they were already: every step's calls pass here)."""
        return self if grants == self.grants else replace(self, grants=grants)

    def replied(self, text: str, finish: Finish) -> TurnState:
        """A reply streamed to its finish: its text, whether the output limit cut it, its usage
        added, and any pending retry cleared with it."""
        return replace(
            self,
            usage=add_usage(self.usage, finish.usage),
            final_text=text,
            truncated=finish.reason == "length",
            retry_pending=False,
        )


@dataclass(frozen=True, slots=True)
class Prepared:
    """An attempt's request and receipt, built before the receipt is written.

    `fresh`: built ahead of a step boundary (`RequestBuilder.build_ahead`), the held messages
    the boundary writes, which end `history` (the history the request carries)."""

    sections: list[Section]
    history: list[Message]
    request: ModelRequest
    receipt: ReceiptRecorded
    fresh: tuple[Message, ...] = ()


@dataclass(frozen=True, slots=True)
class Attempt:
    """Ask the model for the current step: physical attempt `attempt` (retries, an overflow
    compaction), its reply stored as `message_id`; `overflowed`: the step's one overflow
    compaction ran; `ahead`: this attempt, built before the boundary that wrote its receipt."""

    attempt: int = 1
    message_id: str = field(default_factory=new_message_id)
    overflowed: bool = False
    ahead: Prepared | None = None

    def again(self, *, message_id: str | None = None, overflowed: bool | None = None) -> Attempt:
        """The step's next physical attempt (never built ahead)."""
        return Attempt(
            self.attempt + 1,
            self.message_id if message_id is None else message_id,
            self.overflowed if overflowed is None else overflowed,
        )


@dataclass(frozen=True, slots=True)
class Retry:
    """Wait out `error` durably (`retry.scheduled`), then make attempt `then`."""

    then: Attempt
    error: ProviderError | StoreError


@dataclass(frozen=True, slots=True)
class RunTools:
    """Run the calls of `message`, the step's reply (already durable, or held with them)."""

    message: Message


@dataclass(frozen=True, slots=True)
class Boundary:
    """The boundary between two steps: write what is held, deliver pending steers.

    `held_step`: the port holds a read-only tool step (its reply and results), so the next
    step's first attempt may be built ahead and its receipt written by this boundary."""

    held_step: bool


@dataclass(frozen=True, slots=True)
class FinalReply:
    """The step's final reply is held: the boundary's delivery writes it with the steers that
    arrived while it streamed. `attempt`: the attempt that asked for it (asked again, with the
    same message id, when that write fails on a transient store fault)."""

    attempt: Attempt


@dataclass(frozen=True, slots=True)
class End:
    """The turn ends with `outcome` (`error` and its `kind` when it did not complete)."""

    outcome: Outcome
    error: str | None = None
    kind: str | None = None


Node = Attempt | Retry | RunTools | Boundary | FinalReply | End
