"""What a step sends: its sections, its history resolved for the wire, its request and receipt.

`RequestBuilder` is the one code path that builds an attempt's request and receipt, whether
after the step boundary (`build`) or before it, for the boundary to write the receipt
(`build_ahead`); `written` decides whether an attempt built ahead may be sent as it is. What
it keeps between steps are memos of what it read, each valid for the runner's life: the
session's work state (kept as the store holds it by `committed`), the agent's tools section,
the media blobs its messages refer to, and the wire copy's settled prefix (`WireBuilder`).
Invariant: an attempt built ahead is sent only when the history then read is, message for
message, the one its request carries (identity, `ActiveHistory.expect`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from pydantic import JsonValue

from .._ids import new_receipt_id
from ..errors import NotFoundError
from ..events import MessageAdded, SessionEvent, WorkStateUpdated
from ..instructions import Baseline
from ..messages import Message, Repair, WireBuilder, shared_prefix
from ..store import media_refs
from ._active import ActiveHistory
from ._compaction import Compactor
from ._context import Interrupted, RunContext
from ._media import MediaResolver
from ._port import SessionPort
from ._prompt import (
    ReceiptChain,
    Section,
    build_request,
    make_receipt,
    params_section,
    request_digest,
    tools_section,
)
from ._turn_state import Prepared
from ._work_state import WORK_STATE_SECTION, render_work_state
from .tools import tool_spec

log = logging.getLogger("wakeful.runner")


class RequestBuilder:
    """Builds the requests and receipts of one runner's steps (see the module docstring)."""

    def __init__(
        self,
        ctx: RunContext,
        port: SessionPort,
        history: ActiveHistory,
        compaction: Compactor,
        receipts: ReceiptChain,
    ) -> None:
        self.ctx = ctx
        self.port = port
        self.history = history
        self.compaction = compaction
        self.receipts = receipts
        self._wire = WireBuilder()  # to_wire, linear in what each step added
        self._repairs: set[tuple[str, str | None, int]] = set()  # pairing repairs published
        self._tools_section: Section | None = None  # the agent's tools: until a switch (`use`)
        self._work: dict[str, JsonValue] | None = None  # the session's work state, once read
        self._blobs: dict[str, bytes] = {}  # media blobs read through the port, by digest
        self._scanned: set[str] = set()  # messages whose media refs were read
        self._scanned_history: tuple[Message, ...] = ()  # the history `_resolved` last read
        self._with_refs = [0]  # [i]: how many of its first i messages hold media refs
        self._media = MediaResolver(self._blob)  # media refs, resolved for the wire
        self._options: dict[str, JsonValue] | None = None  # the run options last put in a receipt
        # The system sections, kept while the context and the instruction baseline are the same
        # objects (the port hands out the same baseline while the sources read the same).
        self._head: tuple[RunContext, Baseline, list[Section]] | None = None

    def use(self, ctx: RunContext) -> None:
        """Build requests under `ctx` from now on (the session's agent or model was switched):
        the tools section is built again from its agent."""
        self.ctx = ctx
        self._tools_section = None

    def committed(self, events: Sequence[SessionEvent]) -> None:
        """Keep the work-state copy what the store now holds after `events` committed."""
        if self._work is not None:
            for event in events:
                if isinstance(event, WorkStateUpdated):
                    self._work[event.kind] = event.value

    async def messages(self) -> list[Message]:
        """Active history (after the newest compaction boundary), read incrementally."""
        await self.history.refresh()
        return self.history.messages()

    # -- an attempt's request ---------------------------------------------------------------

    async def build(self, turn_id: str, step: int, attempt: int) -> Prepared:
        """The attempt built after the step boundary: instructions first (a change lands in
        history), then the history; a proactive compaction before the request rebuilds both."""
        sections = await self.sections(attempt)
        history = await self.messages()
        if await self.compaction.before_request(turn_id, step, sections):
            sections = await self.sections(attempt)  # the boundary started a new epoch
            history = await self.messages()
        if self.ctx.interrupt.is_set():
            raise Interrupted
        return await self._prepare(turn_id, step, attempt, sections, history)

    async def build_ahead(
        self, turn_id: str, step: int, held: Sequence[SessionEvent]
    ) -> Prepared | None:
        """The first attempt of `step`, built before the boundary that ends a read-only tool
        step (its `held` events: the reply first, then its results), for that boundary to write
        its receipt: exactly as `build` would build it after the boundary when nothing is
        delivered there. None when it could differ or cannot be known without the store: the
        held events are not such a step, an interrupt is set, an instruction source changed (a
        delta is due), compaction would run before the request, or a tracing SDK records spans
        (the receipt names the step's span, opened by `step_start`)."""
        if not (held and isinstance(held[0], MessageAdded)):
            return None
        if held[0].message.role != "assistant" or self.ctx.interrupt.is_set():
            return None
        if self.ctx.trace_ids is not None and self.ctx.trace_ids(self.port.session_id) is not None:
            return None
        base = self.port.instructions_unchanged(self.compaction.generation)
        if base is None:
            return None
        sections = await self.sections(1, base)
        fresh = tuple(e.message for e in held if isinstance(e, MessageAdded))
        if await self.compaction.due(sections, fresh):
            return None
        history = self.history.messages()  # a copy: the held messages go on its end
        history += fresh
        return await self._prepare(turn_id, step, 1, sections, history, fresh)

    async def written(self, ahead: Prepared | None) -> Prepared | None:
        """`ahead`, whose receipt the step boundary wrote, when the active history now read is,
        message for message (by identity: `expect`), the one its request carries. A mismatch
        (which a correct port never produces) leaves that receipt without a request, as an
        interrupt after `receipt.after` does, and the attempt is built again (None)."""
        if ahead is None:
            return None
        await self.history.refresh()
        if self.history.reads(ahead.history):
            return ahead
        sid = self.port.session_id
        log.warning("the receipt %s written ahead does not match %s", ahead.receipt.receipt_id, sid)
        return None

    async def _prepare(
        self,
        turn_id: str,
        step: int,
        attempt: int,
        sections: list[Section],
        history: list[Message],
        fresh: tuple[Message, ...] = (),
    ) -> Prepared:
        """The attempt's request from `sections` and `history`, and its receipt (not written;
        without the step span's trace ids, which exist once `step_start` is published)."""
        ctx = self.ctx
        request = build_request(
            sections, await self._resolved(history), ctx.provider.name, self._wire_repaired
        )
        receipt = make_receipt(
            sections,
            history,
            request_digest(ctx.provider, request),
            receipt_id=new_receipt_id(),
            turn_id=turn_id,
            step=step,
            attempt=attempt,
            model=ctx.recorded_model,
            base=self.receipts.last,
            options=self._run_options(step),
        )
        return Prepared(sections, history, request, receipt, fresh)

    def _run_options(self, step: int) -> dict[str, JsonValue] | None:
        """The run options for a receipt: a turn's first step records them, a later step only
        when they changed (a context resolved again); a receipt stays small otherwise."""
        options = self.ctx.run_options()
        if step > 1 and options == self._options:
            return None
        self._options = options
        return options

    # -- its parts --------------------------------------------------------------------------

    async def sections(self, attempt: int, base: Baseline | None = None) -> list[Section]:
        """The sections of an attempt's request; `base`: the instruction baseline, when the
        caller has it (else it is read, after a delta when a source changed)."""
        ctx = self.ctx
        if base is None:
            base = await self.port.instructions(self.compaction.generation)
        head = self._head
        if head is None or head[0] is not ctx or head[1] is not base:  # a switch, a new baseline
            system = [Section("system.agent", f"agent:{ctx.agent.name}", ctx.agent.system_prompt)]
            system += [
                Section(f"system.instructions.{key}", key, text) for key, text in base.values
            ]
            head = self._head = (ctx, base, system)
        sections = list(head[2])
        if self._work is None:  # read once: after that only this runner's tool steps change it
            self._work = await self.port.work_state()
        work = render_work_state(self._work)
        if work:  # after the history: a todo update must not change the cached prefix
            sections.append(Section(WORK_STATE_SECTION, "store", work))
        if self._tools_section is None:  # the agent's tools: built once per agent (`use`)
            specs = [tool_spec(ctx.tools[name]) for name in ctx.agent.tools if name in ctx.tools]
            self._tools_section = tools_section(specs, f"agent:{ctx.agent.name}")
        sections.append(self._tools_section)
        tail = await self.compaction.tail_section()
        if tail is not None:  # the `tail` strategy's hide point: older tool results hidden
            sections.append(tail)
        sections.append(
            params_section(
                ctx.provider.model, ctx.provider.max_output_tokens, attempt, self.port.session_id
            )
        )
        return sections

    async def _resolved(self, history: Sequence[Message]) -> list[Message]:
        """`history` with media refs resolved for the wire (`_media.py`): the blobs the messages
        refer to are read through the port first, each once per runner."""
        kept = shared_prefix(self._scanned_history, history)  # in C; only what is new is read
        with_refs = self._with_refs
        del with_refs[kept + 1 :]
        for message in history[kept:]:
            refs = list(media_refs(message))
            with_refs.append(with_refs[-1] + bool(refs))
            if message.id not in self._scanned:
                self._scanned.add(message.id)
                for ref in refs:
                    if ref not in self._blobs and (data := await self.port.blob(ref)) is not None:
                        self._blobs[ref] = data
        self._scanned_history = tuple(history)
        if not with_refs[-1]:  # no media by reference: the messages go as they are
            return history if isinstance(history, list) else list(history)
        return self._media(history)

    def _blob(self, digest: str) -> bytes:
        try:
            return self._blobs[digest]
        except KeyError:
            raise NotFoundError(f"no blob {digest}") from None

    def _wire_repaired(self, messages: Sequence[Message], provider: str) -> list[Message]:
        """The wire copy of a request; each pairing repair is published (once per runner)."""

        def on_repair(repair: Repair) -> None:
            # A call's repair is the same repair at any position (a compaction moves it).
            key = (repair.kind, repair.call_id, repair.index if repair.call_id is None else -1)
            if key not in self._repairs:
                self._repairs.add(key)
                data: dict[str, JsonValue] = {
                    "repair": repair.kind,
                    "call_id": repair.call_id,
                    "index": repair.index,
                }
                self.port.publish("pairing_repair", data)

        return self._wire(messages, provider, on_repair=on_repair)
