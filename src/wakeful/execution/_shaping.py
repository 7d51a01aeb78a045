"""The `Runtime`'s operations that shape a session after the fact: rewind and unrevert (with
files), history edits, artifacts, metadata and extension state (`docs/rewind.md`).

Invariant: a rewind or history edit never races a driver. On a session being driven, a rewind
is an interrupt followed by the revert, in that order; the store refuses the write itself while
a live claim or an unfinished turn remains.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import JsonValue

from ..errors import ConflictError, UsageError
from ..events import FileRestore
from ..runner import crash_point
from ..store import Artifact, LocalStore
from ._hooks import HookEvent, HookKind, Hooks
from ._mcp_switch import MCP_NAMESPACE, switched_off
from ._off_loop import off_loop
from ._rewind import (
    FileMove,
    RewindResult,
    completed_before,
    prompt_text,
    restore_files,
    revert_moves,
    unrevert_moves,
)

if TYPE_CHECKING:
    from ._place import Place

SETTLE_POLL_S = 0.05


class ShapingMixin:
    """Rewind, history edits, artifacts, metadata and extension state of `Runtime`."""

    store: LocalStore
    busy: Callable[[str], bool]  # `Runtime.busy`
    interrupt: Callable[..., bool]  # `Runtime.interrupt` (session id, `actor=`)
    actor: str  # `Runtime.actor`
    place: Callable[[str | None], Place]  # `Runtime.place`
    hooks: Hooks  # `Runtime.hooks`

    async def _settle(self, session_id: str, wait_s: float, actor: str | None = None) -> None:
        """Interrupt the session's turn if one runs (as `actor`), and wait until no driver
        holds it."""
        if not await off_loop(self.busy, session_id):
            return
        self.interrupt(session_id, actor=actor)
        deadline = time.monotonic() + wait_s
        while await off_loop(self.busy, session_id):
            if time.monotonic() > deadline:
                raise ConflictError(
                    f"session {session_id} is still driven {wait_s:g}s after the interrupt"
                )
            await asyncio.sleep(SETTLE_POLL_S)

    def _root(self, session_id: str) -> Path:
        return self.place(self.store.get_session(session_id).location).root

    async def _restore(
        self, session_id: str, moves: list[FileMove], force: bool
    ) -> tuple[list[FileRestore], tuple[str, ...]]:
        """Apply a rewind's (or its undo's) file `moves` at the session's root, keeping what
        each replaces as a blob: the files restored, and the paths completed before a
        conflict (`FileConflictError`, unless `force`)."""
        root = await off_loop(self._root, session_id)
        restored = await off_loop(
            restore_files,
            root,
            moves,
            self.store.get_blob,
            force=force,
            keep=lambda data: self.store.put_blob(data, session_id),
        )
        return restored, completed_before(moves, restored)

    async def rewind(
        self,
        session_id: str,
        *,
        turn_id: str | None = None,
        input_id: str | None = None,
        message_id: str | None = None,
        files: bool = False,
        force: bool = False,
        revision: int | None = None,
        wait_s: float = 30.0,
        actor: str | None = None,
    ) -> RewindResult:
        """Revert the session to just before a turn, an input or a message (none named: its
        newest turn), recorded as `actor`'s (default: this runtime's). The later messages leave the active history (not the log), the work
        state and instruction values return to what they were; `unrevert` undoes it until a
        new input is delivered. With `files`, the files those turns changed are restored
        (`FileConflictError` lists files changed since by anything else, unless `force`).
        A driven session is interrupted first; `revision`, when given, must be the session's
        `last_seq` (`ConflictError` otherwise, nothing written)."""
        actor = actor or self.actor
        await self._settle(session_id, wait_s, actor)
        plan = await off_loop(
            self.store.shaping.plan_revert,
            session_id,
            turn_id=turn_id,
            input_id=input_id,
            message_id=message_id,
        )
        if revision is not None and plan.revision != revision:
            raise ConflictError(
                f"session {session_id} changed (revision {plan.revision}, not {revision})"
            )
        restored: list[FileRestore] = []
        completed: tuple[str, ...] = ()
        if files and plan.files:
            restored, completed = await self._restore(session_id, revert_moves(plan.files), force)
            crash_point("rewind.files")
        stored = await off_loop(
            lambda: self.store.shaping.revert(
                session_id,
                turn_id=plan.turn_id,
                input_id=plan.input_id,
                message_id=message_id,
                revision=plan.revision,
                files=restored,
                actor=actor,
            )
        )
        return RewindResult(
            session_id,
            stored.seq,
            plan.from_seq,
            plan.hidden,
            files_restored=tuple(r.path for r in restored),
            files_left=() if files else tuple(c.path for c in plan.files),
            shell_calls=plan.shell_calls,
            prompt=None if plan.first is None else prompt_text(plan.first),
            files_completed=completed,
        )

    async def unrevert(
        self,
        session_id: str,
        *,
        force: bool = False,
        wait_s: float = 30.0,
        actor: str | None = None,
    ) -> RewindResult:
        """Undo the session's pending rewind (`UsageError` when there is none, or a new input
        made it final): its messages, work state and instruction values come back, and the
        files it restored return to what it replaced (`FileConflictError` for files changed
        since, unless `force`). Recorded as `actor`'s (default: this runtime's)."""
        actor = actor or self.actor
        await self._settle(session_id, wait_s, actor)
        pending = await off_loop(self.store.pending_revert, session_id)
        if pending is None:
            raise UsageError(f"session {session_id} has no rewind to undo")
        restored: list[FileRestore] = []
        completed: tuple[str, ...] = ()
        if pending.files:
            restored, completed = await self._restore(session_id, unrevert_moves(pending), force)
        stored = await off_loop(
            lambda: self.store.shaping.unrevert(session_id, files=restored, actor=actor)
        )
        return RewindResult(
            session_id,
            stored.seq,
            pending.from_seq,
            pending.hidden,
            files_restored=tuple(r.path for r in restored),
            files_completed=completed,
        )

    def edit_history(
        self,
        session_id: str,
        *,
        revision: int,
        delete_turn: str | None = None,
        message_id: str | None = None,
        text: str | None = None,
        heal_pairing: bool = False,
    ) -> int:
        """Delete a turn, replace a message's text, or write the drop-only pairing heal back
        (`heal_pairing`), guarded by `revision` (see `LocalStore.shaping.edit_history`); return the
        session's new revision."""
        return self.store.shaping.edit_history(
            session_id,
            revision=revision,
            delete_turn=delete_turn,
            message_id=message_id,
            text=text,
            heal_pairing=heal_pairing,
        ).seq

    # -- artifacts, metadata, extension state (their reads: `Runtime.reads`) ---------------

    def add_artifact(
        self, session_id: str, kind: str, uri: str, label: str, meta: JsonValue = None
    ) -> Artifact:
        """Record an artifact of the session (see `LocalStore.shaping.add_artifact`)."""
        return self.store.shaping.add_artifact(session_id, kind, uri, label, meta)

    def update_metadata(self, session_id: str, patch: dict[str, JsonValue]) -> dict[str, JsonValue]:
        """Merge `patch` into the session's metadata (None removes a key); return the result.
        The `metadata_updated` hook gets the patch and the merged object."""
        merged = self.store.shaping.update_metadata(session_id, patch)
        self._written("metadata_updated", session_id, {"patch": patch, "metadata": merged})
        return merged

    def set_extension_state(
        self, session_id: str, namespace: str, key: str, value: JsonValue
    ) -> None:
        """Store one value under an extension's namespace (see `LocalStore.shaping.set_extension_state`);
        the `extension_state_set` hook gets it."""
        self.store.shaping.set_extension_state(session_id, namespace, key, value)
        self._written(
            "extension_state_set",
            session_id,
            {"namespace": namespace, "key": key, "value": value, "deleted": False},
        )

    def delete_extension_state(self, session_id: str, namespace: str, key: str) -> bool:
        """Remove one extension value; whether there was one (the `extension_state_set` hook
        gets a removal, `value` null and `deleted` true, only when there was)."""
        found = self.store.shaping.delete_extension_state(session_id, namespace, key)
        if found:
            self._written(
                "extension_state_set",
                session_id,
                {"namespace": namespace, "key": key, "value": None, "deleted": True},
            )
        return found

    def mcp_switches(self, session_id: str) -> dict[str, bool]:
        """The MCP servers configured where the session runs, each with whether it is on in
        the session (`_mcp_switch.py`), by name."""
        row = self.store.get_session(session_id)
        servers = self.place(row.location).config.mcp.servers
        off = switched_off(self.store.extension_state(session_id, MCP_NAMESPACE))
        return {name: name not in off for name in sorted(servers)}

    def switch_mcp(self, session_id: str, name: str, on: bool) -> bool:
        """Switch the MCP server `name` on or off in the session from its next drain
        (`_mcp_switch.py`); `UsageError` when no server of that name is configured where it
        runs (nothing written). Returns whether it changed."""
        switches = self.mcp_switches(session_id)
        if name not in switches:
            known = ", ".join(switches) or "none is configured"
            raise UsageError(f"no MCP server {name} where this session runs ({known})")
        if switches[name] == on:
            return False
        if on:
            self.delete_extension_state(session_id, MCP_NAMESPACE, name)
        else:
            self.set_extension_state(session_id, MCP_NAMESPACE, name, False)
        return True

    def _written(self, kind: HookKind, session_id: str, data: dict[str, JsonValue]) -> None:
        """Tell the hooks of a metadata or extension-state write (after it committed)."""
        if self.hooks:
            self.hooks.emit(HookEvent(kind, session_id, data, self.store.clock.now_ms()))


class ToolState:
    """The `StateBackend` the runtime gives its tools: a session's extension state through the
    runtime's own methods (bounds checked, hooks told)."""

    def __init__(
        self, runtime: ShapingMixin, reads: Callable[[str, str], dict[str, JsonValue]]
    ) -> None:
        self._rt = runtime
        self._read = reads

    def read(self, session_id: str, namespace: str) -> dict[str, JsonValue]:
        """Every value of `namespace` in the session, by key."""
        return self._read(session_id, namespace)

    def write(self, session_id: str, namespace: str, key: str, value: JsonValue) -> None:
        """Store one value (see `Runtime.set_extension_state`)."""
        self._rt.set_extension_state(session_id, namespace, key, value)

    def delete(self, session_id: str, namespace: str, key: str) -> bool:
        """Remove one value (see `Runtime.delete_extension_state`)."""
        return self._rt.delete_extension_state(session_id, namespace, key)
