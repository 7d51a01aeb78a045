"""How `Runtime` sets up a session's turns here (`SetupMixin`): the `RunContext` built from
the session's row, its place's configuration, its agent and this process's tools, and the port
hooks that publish the turn's live events (to tracing, the hooks, the open event streams and the
single `listener`). Built in a worker thread: it reads the store.

What a context takes from its place and agent alone (the agent resolved with its tools, the
instruction sources of the workspace and the agent's skills, the price table, the permission
policy) is the same for every session of the runtime at that place with that agent: it is built
once (`Equipment`) and shared by their contexts, until the place's configuration is read again
(a new `Place`), a tool is registered (`Toolbox.generation`) or the session's MCP switches
differ. A place whose configuration names MCP servers is equipped afresh for each context: a
server's tools and instruction text follow its state, which may change while the process runs.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

from ..config import DEFAULT_PERMISSIONS
from ..instructions import Source, agent_sources, host_sources, workspace_sources
from ..runner import (
    LEGACY_KINDS,
    Agent,
    AskResult,
    LiveEvent,
    LiveListener,
    PermissionPolicy,
    PriceTable,
    RunContext,
    Tool,
    ToolContext,
    Tracing,
    resolve_agent,
)
from ..store import LocalStore, SessionRow
from ._delegation import delegation_of
from ._mcp_switch import switched_off
from ._off_loop import off_loop
from ._port import PortHooks, SessionSetup
from ._rates import StoreRates
from ._refresh import Known, KnownFacts, refresher
from ._scope_budgets import scope_limits
from ._writes import drive_reads

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from pydantic import JsonValue

    from ..providers import Provider
    from ..store import DriveReads
    from ._children import Children
    from ._coordinator import Coordinator
    from ._event_stream import Streams
    from ._hooks import Hooks
    from ._place import Place
    from ._shaping import ToolState
    from ._toolbox import Toolbox

    Seen = DriveReads | None  # a drive's reads made already (a worker's batch recovery)

log = logging.getLogger("wakeful.runtime")

# The retry jitter of every turn this process drives: one generator per process (seeded from
# the OS once, again in a forked child), not one per context (`random.Random()` reads 2.5 KB
# of OS entropy to seed itself, ~16 µs per recovered session).
_JITTER = random.Random()
os.register_at_fork(after_in_child=_JITTER.seed)

EQUIPMENT_KEPT = 256
"""At most this many `Equipment`s kept per runtime (places x agents x MCP switches); past it
the cache starts over."""


@dataclass(frozen=True, slots=True)
class Equipment:
    """What a session's context takes from its place and agent (see the module docstring):
    shared by every context built for the same `place`, agent and tools. Read-only."""

    place: Place  # (held: the cache's key names it by identity)
    agent: Agent
    tools: Mapping[str, Tool]
    sources: tuple[Source, ...]  # the workspace's, the agent's skills', the MCP servers'
    prices: PriceTable
    policy: PermissionPolicy


class SetupMixin:
    """A session's turn context and live-event publishing for `Runtime`."""

    store: LocalStore
    toolbox: Toolbox
    children: Children
    coordinator: Coordinator
    ask: Callable[[str, dict[str, object]], Awaitable[AskResult]] | None
    tracing: Tracing | None
    hooks: Hooks
    listener: LiveListener | None
    agent_name: str
    model: str
    _streams: Streams
    _tool_state: ToolState  # the tools' extension state, through the runtime's checks
    _equipment: dict[tuple[object, ...], Equipment] | None = None  # (`_equipped`)

    if TYPE_CHECKING:  # the `Runtime`'s own (`PlacesMixin`)

        def place(self, location: str | None) -> Place: ...
        def _provider(self, spec: str, place: Place) -> Provider: ...

    def _context(
        self, session_id: str, interrupt: asyncio.Event, seen: Seen = None, had: Known = None
    ) -> SessionSetup:
        """The session's turn context and port hooks here (a thread: reads the store; not
        the row and facts `seen` by a worker's batch recovery, nor facts `had`)."""
        seen = seen or drive_reads(self.store, session_id)  # one read (issue 36)
        row, known = seen.row, had or KnownFacts(seen.facts)
        place = self.place(row.location)
        if row.waiting_for is not None:  # a worker left it; this driver serves its location
            self.store.claims.clear_wait(session_id)
        config = place.config
        top = row.parent_id is None  # delegation is one level deep: only top-level sessions
        kit = self._equipped(row, place, seen.facts.switches, delegation=top)
        agent = kit.agent
        spec = row.model or agent.model or self.model
        settle = None
        if not top and delegation_of(self.store, session_id) == "background":
            settle = self.children.settler(session_id, row.parent_id or "", row.agent)
        self._provider(spec, place)  # built here: an unbuildable model blocks before any claim
        ctx = RunContext(
            providers=partial(self._provider, place=place),
            model_spec=spec,
            agent=agent,
            tools=kit.tools,
            tool_context=ToolContext(
                workspace=place.root,
                session_id=session_id,
                delegate=self.children if top else None,
                state=self._tool_state,
            ),
            shutdown=self.coordinator.options.shutdown,
            policy=kit.policy,
            ask=self.ask,
            retry=config.retry,
            compaction=config.compaction,
            interrupt=interrupt,
            rng=_JITTER,
            instruction_sources=[*kit.sources, *host_sources(known.entries)],
            trace_ids=self.tracing.ids if self.tracing is not None else None,
            prices=kit.prices,
            loop_guard=config.loop_guard,
            budget=config.budgets,
            spend=partial(off_loop, self.store.spend.budget, row.root_id, session_id),
            rates=StoreRates(self.store, config) if config.rate_limits else None,
            scopes=scope_limits(self.store, config.budgets, row.root_id, agent.name),
            refresh=refresher(
                known,
                (row.agent, row.model),
                place,
                lambda: self._context(session_id, interrupt, had=known).ctx,
            ),
        )
        return SessionSetup(ctx, PortHooks(listener=self._publish, settle=settle), known, seen)

    def _equipped(
        self, row: SessionRow, place: Place, mcp: dict[str, JsonValue], *, delegation: bool
    ) -> Equipment:
        """The `Equipment` of a session at `place` with `row`'s agent: the one built for the
        same place, agent, tools and MCP switches, else built now (and kept, unless the place
        names MCP servers: see the module docstring)."""
        name = row.agent or self.agent_name
        toolbox = self.toolbox
        off = switched_off(mcp)
        key = (id(place), name, delegation, off, id(toolbox), toolbox.generation)
        kept = self._equipment if self._equipment is not None else {}
        found = kept.get(key)
        if found is not None and found.place is place:
            return found
        kit = self._equip(name, place, off, delegation=delegation)
        if not place.config.mcp.servers:
            if len(kept) >= EQUIPMENT_KEPT or self._equipment is None:
                self._equipment = kept = {}
            kept[key] = kit
        return kit

    def _equip(
        self, name: str, place: Place, off: frozenset[str], *, delegation: bool
    ) -> Equipment:
        """The agent `name` at `place` (its own, else this runtime's), with its tools resolved
        and the MCP servers' instruction sources (`Toolbox.for_agent`; the servers in `off`,
        switched off in the session (`/mcp`), are listed as off), and the rest of what a
        context takes from the place (`Equipment`)."""
        config, root = place.config, place.root
        agent = resolve_agent(name, config, list(self.toolbox.registered))
        agent, tools, mcp_sources = self.toolbox.for_agent(
            agent, root, config, delegation=delegation, off=off
        )
        sources = (
            *workspace_sources(root, config.instructions),
            *agent_sources(root, agent.skills),
            *mcp_sources,
        )
        policy = PermissionPolicy(config.permissions, builtin=DEFAULT_PERMISSIONS)
        return Equipment(place, agent, tools, sources, PriceTable.of(config.prices), policy)

    def _publish(self, event: LiveEvent) -> None:
        """Every live event of a session driven here: to tracing, the hooks, the open event
        streams, and the single `listener` (the kinds it always received)."""
        if self.tracing is not None:
            try:
                self.tracing.observe(event)
            except Exception:  # tracing observes; it never breaks a turn
                log.exception("tracing failed on a %s event", event.kind)
        self.hooks.emit_live(event)
        self._streams.publish(event)
        if self.listener is not None and event.kind in LEGACY_KINDS:
            self.listener(event)
