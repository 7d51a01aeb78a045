"""A drain's context kept current (issue 37 item 22) without a read per step (issue 36 item 1).

A context is built for the session's `(agent, model)` as its row says, with the host's
instruction entries (extension state `instructions`) among its instruction sources. Either may
change while a drain runs (`Runtime.switch`, `set_extension_state`, in this process or another).
The drain's units of work that start a turn or end a step (`_writes.start_drain`,
`promote_or_release`, `promote_step`) read them under the session lock they take anyway
(`SessionWrite.facts`: no statement of its own, no commit) and hand them to the drive's
`KnownFacts`. Before each turn and after each step boundary the runner asks
`RunContext.refresh`, which compares what the units saw with what the context was built for
and builds it again when the agent or model changed; else it answers None without touching
the store. The host's entries are read from the same `KnownFacts` by the instruction sync, as
of the drive's last such unit. A boundary that finds either changed does not write the receipt
built ahead of it (`promote_step`): the next step is built afresh, on the new context.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ..runner import Refresh, RunContext
from ..store import SessionFacts
from ._off_loop import off_loop
from ._place import Place, is_current

if TYPE_CHECKING:
    from pydantic import JsonValue


class KnownFacts:
    """What a drive knows of its session's agent, model and host instruction entries: read
    once with its first context, then as its units of work hand them back (see the module)."""

    def __init__(self, facts: SessionFacts) -> None:
        self.facts = facts

    def entries(self) -> dict[str, JsonValue]:
        """The host's instruction entries, as last seen (an instruction source's read)."""
        return self.facts.instructions

    def noticed(self, facts: SessionFacts | None) -> bool:
        """Keep `facts` (None: nothing was read); whether they are what was known."""
        if facts is None:
            return True
        same = facts == self.facts
        self.facts = facts
        return same


def refresher(
    known: KnownFacts,
    seen: tuple[str | None, str | None],
    place: Place,
    rebuild: Callable[[], RunContext],
) -> Refresh:
    """The `refresh` of a context built for the session's `(agent, model)` `seen` at `place`;
    it is built anew by `rebuild` (in a worker thread: it reads the store and the
    configuration) when the units saw another agent or model, or (`files`) the place's
    configuration files were edited since (`_place.is_current`: a few `stat` calls, no store
    access). Those are made on the loop, as the instruction sources are read there every step
    (`InstructionSync.unchanged`): a hop to a worker thread and back cost more CPU than the
    calls (57 against 50 us) and, on a loaded machine, a wait for each thread's time slice.
    Without `files` (a step boundary's second look, just after its write) only the facts are
    compared. Nothing leaves the loop unless the context is built again."""

    async def refresh(*, files: bool = True) -> RunContext | None:
        same = (known.facts.agent, known.facts.model) == seen
        if same and (not files or is_current(place)):
            return None
        return await off_loop(rebuild)

    return refresh


Known = KnownFacts | None
"""What a caller passes when it may know the facts already (None: read them)."""
