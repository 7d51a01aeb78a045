"""Child sessions: what the `task` tool delegates to, in the foreground or the background.

A child is a real session (`parent_id`, `root_id`, its own events and usage) whose
`session.created` metadata says how it was delegated (`"delegation": "foreground"` or
`"background"`). A foreground child is driven inside the parent's tool call, and its final text
is the call's result. A background child runs on its own; when a turn of it settles, its report
is admitted to the parent's inbox (kind `subagent_report`) in the same transaction as the
child's `turn.ended`, and then the parent is woken. That order is what makes the report
impossible to lose: a crash before the commit leaves the child's turn open (it is recovered and
settles later), a crash after it leaves the report pending in the parent's inbox, which every
driver of the parent promotes.

Delegation is one level deep: children are not offered the `task` tool.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from pydantic import JsonValue

from ..events import InputKind, SessionCreated, TurnEnded
from ..runner import TurnResult, crash_point
from ..runner._jobs import REPORT_PREFIX
from ..runner.tools import Delegation, Lineage, ToolFailure
from ..store import ClaimToken, LocalStore, new_session_id
from ._delegation import delegation_of, lineage_of
from ._off_loop import off_loop
from ._writes import end_child

if TYPE_CHECKING:
    from ._coordinator import Coordinator

REPORT_KIND: InputKind = "subagent_report"  # also `runner._jobs.REPORT_KIND`


def _next_label(taken: dict[str, str], n: int) -> str:
    """`child-N` for the parent's Nth child, or the next number a label the model chose left
    free."""
    while f"child-{n}" in taken:
        n += 1
    return f"child-{n}"


def report_text(child_id: str, agent: str | None, end: TurnEnded, result: TurnResult) -> str:
    """The text of a background child's report, as the parent's model reads it."""
    body = result.final_text or end.error or "(no final message)"
    return (
        f"Report from child session {child_id} (agent {agent or 'default'}, {end.outcome}):\n{body}"
    )


class Children:
    """The `Delegator` a `Runtime` gives its top-level sessions' tools."""

    def __init__(
        self,
        store: LocalStore,
        coordinator: Coordinator,
        *,
        default_agent: str,
        check_agent: Callable[[str, str | None], object],
        workspace: str,
    ) -> None:
        self.store = store
        self.coordinator = coordinator
        self.default_agent = default_agent
        self._check_agent = check_agent
        self._workspace = workspace

    async def delegate(
        self,
        parent_id: str,
        prompt: str,
        agent: str | None,
        background: bool,
        *,
        lineage: Lineage | None = None,
    ) -> Delegation:
        """Create a child of `parent_id` with `prompt` admitted (or admit it to the earlier
        child `lineage.resume`); drive it (see the module doc). The child's `session.created`
        metadata and its input's metadata record its lineage (`docs/execution.md`, "Children")."""
        lineage = lineage or Lineage()
        if lineage.resume is not None:
            child_id = await off_loop(self._resumed, parent_id, prompt, lineage, background)
        else:
            child_id = await off_loop(self._created, parent_id, prompt, agent, background, lineage)
        drive = self.coordinator.wake(child_id)
        if background:
            jobs = await off_loop(self._jobs_with, parent_id, child_id, prompt)
            return Delegation(child_id, jobs=jobs)
        try:
            results = await asyncio.shield(drive)
        except asyncio.CancelledError:  # the parent's call was interrupted: stop the child too
            if not drive.done():
                self.coordinator.interrupt(child_id)
            await asyncio.gather(drive, return_exceptions=True)
            raise
        turns = [t for r in results for t in r.turns]
        if not turns:
            return Delegation(child_id, "failed", "the child session did not run")
        last = turns[-1]
        return Delegation(child_id, last.outcome, last.final_text or last.error or "")

    def _jobs_with(
        self, parent_id: str, child_id: str, prompt: str
    ) -> tuple[dict[str, JsonValue], ...]:
        """The parent's work-state `jobs` with the background child `child_id` in it, running
        (replacing an entry of an earlier turn of the same child): the task tool writes it, and
        the parent's runner marks it done when the child's report arrives (`runner/_jobs.py`)."""
        jobs = self.store.work_state(parent_id).get("jobs")
        kept = (
            [j for j in jobs if isinstance(j, dict) and j.get("id") != child_id]
            if isinstance(jobs, list)
            else []
        )
        found = lineage_of(self.store, child_id)
        label = found.label if found and found.label else child_id
        entry: dict[str, JsonValue] = {
            "id": child_id,
            "label": label,
            "status": "running",
            "content": f"{label} ({child_id}): {prompt[:80]}",
        }
        return (*kept, entry)

    def _created(
        self, parent_id: str, prompt: str, agent: str | None, background: bool, lineage: Lineage
    ) -> str:
        """A new child of `parent_id` with `prompt` admitted: its id."""
        name = agent or self.default_agent
        parent = self.store.get_session(parent_id)
        # An unknown agent (at the parent's location) is the model's error, before anything exists.
        self._check_agent(name, parent.location)
        labels = self._labels(parent_id)
        if lineage.label is not None and lineage.label in labels:
            raise ToolFailure(
                f"task: {lineage.label} already names child session {labels[lineage.label]}; "
                f"resume={lineage.label} continues it, or give another label"
            )
        child_id = new_session_id()
        above = lineage_of(self.store, parent_id)
        label = lineage.label or _next_label(labels, len(self.store.children(parent_id)) + 1)
        marks: dict[str, JsonValue] = {
            "label": label,
            "depth": (above.depth if above else 0) + 1,
            "parent_turn_id": lineage.turn_id,
            "parent_call_id": lineage.call_id,
        }
        created = SessionCreated(
            title=prompt[:80],
            agent=name,
            model=parent.model,
            parent_id=parent_id,
            metadata={
                "workspace": parent.location or self._workspace,
                "delegation": "background" if background else "foreground",
                **marks,
            },
        )
        payload: dict[str, JsonValue] = {"text": prompt, "metadata": marks}
        self.store.admit(child_id, None, "user", payload, create=created)
        return child_id

    def _labels(self, parent_id: str) -> dict[str, str]:
        """The labels of `parent_id`'s children: label -> child session id."""
        out: dict[str, str] = {}
        for row in self.store.children(parent_id):
            found = lineage_of(self.store, row.id)
            if found is not None and found.label is not None:
                out.setdefault(found.label, row.id)
        return out

    def _resumed(self, parent_id: str, prompt: str, lineage: Lineage, background: bool) -> str:
        """`prompt` admitted to `lineage.resume` (the label or id of an earlier child of
        `parent_id`) as a new turn that names the child's last turn (`resumed_from`): the
        child's id."""
        child_id = self._labels(parent_id).get(str(lineage.resume), str(lineage.resume))
        child = self.store.find_session(child_id)
        if child is None or child.parent_id != parent_id:
            raise ToolFailure(f"task: {child_id} is not a child session of this session")
        mode = delegation_of(self.store, child_id)
        if (mode == "background") != background:
            raise ToolFailure(f"task: child {child_id} runs in the {mode}; resume it so")
        found = lineage_of(self.store, child_id)
        started = self.store.events(child_id, types=["turn.started"])
        last = getattr(started[-1].event, "turn_id", None) if started else None
        marks: dict[str, JsonValue] = {
            "label": lineage.label or (found.label if found else None),
            "depth": found.depth if found else 1,
            "parent_turn_id": lineage.turn_id,
            "parent_call_id": lineage.call_id,
            "resumed_from": last,
        }
        self.store.admit(child_id, None, "user", {"text": prompt, "metadata": marks})
        return child_id

    def settler(
        self, child_id: str, parent_id: str, agent: str | None
    ) -> Callable[[TurnEnded, TurnResult, ClaimToken | None], Awaitable[None]]:
        """The `settle` hook of a background child's port: end the turn, report, wake the
        parent."""

        async def settle(end: TurnEnded, result: TurnResult, claim: ClaimToken | None) -> None:
            payload: dict[str, JsonValue] = {
                "text": report_text(child_id, agent, end, result),
                "origin": {"kind": "event", "source": "subagent", "sender": child_id},
                "metadata": {"child_session_id": child_id, "outcome": end.outcome},
            }

            def report() -> None:
                end_child(
                    self.store,
                    child_id,
                    end,
                    claim,
                    parent_id=parent_id,
                    input_id=f"{REPORT_PREFIX}{child_id}_{end.turn_id}",
                    kind=REPORT_KIND,
                    payload=payload,
                )
                # In the unit's thread, right after its commit (the parent's drain, whose
                # unit may be waiting for the write lock, can deliver the report first).
                crash_point("child.reported")

            await off_loop(report)
            self.coordinator.wake(parent_id)

        return settle
