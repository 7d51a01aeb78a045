"""Rewind and unrevert (opencode's revert semantics) and history edits, as store operations.

A revert is one `session.reverted` event: the messages from a point on leave the active history
(their events stay in the log), the work state and instruction values return to what they were
before that point. It stays pending, and `unrevert` undoes it, until a new input is delivered.
Invariant: every operation here is one transaction that first checks the session is not being
driven (no live claim, no unfinished turn) and, when given, that its revision (`last_seq`) is
the one the caller read: a stale revision is a `ConflictError` and nothing is written.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..errors import ConflictError, NotFoundError, UsageError
from ._append import append_events
from ._backend import Tx
from ._cipher import opened
from ._claims import _alive
from ._records import last_seq_sql
from ._transcript import transcript_in
from ._typed_events import typed, types_in

if TYPE_CHECKING:
    from pydantic import JsonValue

    from ..clock import Clock
    from ..events import FileRestore, HistoryEdited, SessionReverted, StoredEvent
    from ..messages import Message
    from ._backend import Backend

FILE_CHANGE_KEY = "file_change"  # tool-result metadata: {"path", "before", "after"} (digests)
SHELL_TOOL = "shell"
_STATE_TYPES = ("work_state.updated", "session.reverted", "session.unreverted")
# A `messages` row `m` that is an instruction change's system note: `instructions._sync` writes
# the note in the same append as its `instructions.updated`, right after it (seq + 1); what else
# may follow a delta (a session's first delta has no note) is a delivery, never a system message.
# A note records session state, not a turn's conversation: a history edit never hides one (the
# stored values would run ahead of what later requests show); a rewind to one starts at its delta.
INSTRUCTION_NOTE = (
    "(m.role = 'system' AND EXISTS (SELECT 1 FROM events d WHERE d.session_id = m.session_id "
    "AND d.seq = m.seq - 1 AND d.type = 'instructions.updated'))"
)


@dataclass(frozen=True, slots=True)
class FileChange:
    """What the reverted turns did to one file: its content before the first change and after
    the last (SHA-256 digests of blobs in the store; None: the file did not exist)."""

    path: str
    before: str | None
    after: str | None


@dataclass(frozen=True, slots=True)
class RevertPlan:
    """What a revert to `from_seq` would do, read at `revision` (the session's `last_seq`)."""

    session_id: str
    from_seq: int
    revision: int
    turn_id: str | None
    input_id: str | None
    hidden: int  # messages the revert hides
    files: tuple[FileChange, ...] = ()
    shell_calls: tuple[str, ...] = ()
    first: Message | None = None  # the first message hidden (a prompt, to edit and resend)


@dataclass(frozen=True, slots=True)
class PendingRevert:
    """A revert that an unrevert can still undo; `files`: what undoing it does to files
    (`before`: the content the revert left, `after`: the content it replaced)."""

    session_id: str
    revert_seq: int
    from_seq: int
    hidden: int
    files: tuple[FileChange, ...] = field(default=())


class RewindMixin:
    """Rewind, unrevert and history edits of `SqlStore`."""

    backend: Backend
    clock: Clock

    # -- rewind ------------------------------------------------------------------------------

    def plan_revert(
        self,
        session_id: str,
        *,
        turn_id: str | None = None,
        input_id: str | None = None,
        message_id: str | None = None,
    ) -> RevertPlan:
        """What reverting to just before the turn `turn_id`, the input `input_id` or the
        message `message_id` (none given: the newest turn) would hide and undo. Writes
        nothing; `NotFoundError` for an unknown session or target, `UsageError` for a target
        already hidden."""
        with self.backend.transaction(write=False) as tx:
            return _plan(tx, session_id, turn_id, input_id, message_id)

    def revert(
        self,
        session_id: str,
        *,
        turn_id: str | None = None,
        input_id: str | None = None,
        message_id: str | None = None,
        revision: int | None = None,
        files: Sequence[FileRestore] = (),
        actor: str | None = None,
    ) -> StoredEvent:
        """Revert the session to just before a turn, an input or a message (see `plan_revert`)
        in one transaction; `files` records the file contents the caller restored, `actor`
        who rewound. Refused
        (nothing written) while the session is being driven (`ConflictError`) or when
        `revision` is not the session's `last_seq` (`ConflictError`)."""
        from ..events import SessionReverted

        with self.backend.transaction(write=True) as tx:
            _check_writable(tx, session_id, revision, self.clock.now_ms())
            plan = _plan(tx, session_id, turn_id, input_id, message_id)
            work, instructions = _state_before(tx, session_id, plan.from_seq)
            undo_work, undo_instructions = _undo_state(tx, session_id)
            event = SessionReverted(
                from_seq=plan.from_seq,
                turn_id=plan.turn_id,
                input_id=plan.input_id,
                work_state=work,
                instructions=instructions,
                undo_work_state=undo_work,
                undo_instructions=undo_instructions,
                files=tuple(files),
                shell_calls=plan.shell_calls,
                actor=actor,
            )
            [stored] = append_events(tx, session_id, [event], self.clock.now_ms())
            return stored

    def pending_revert(self, session_id: str) -> PendingRevert | None:
        """The session's revert that `unrevert` can undo, or None."""
        with self.backend.transaction(write=False) as tx:
            if tx.one("SELECT 1 FROM sessions WHERE id = ?", (session_id,)) is None:
                raise NotFoundError(f"no session {session_id}")
            return _pending(tx, session_id)

    def unrevert(
        self,
        session_id: str,
        *,
        revision: int | None = None,
        files: Sequence[FileRestore] = (),
        actor: str | None = None,
    ) -> StoredEvent:
        """Undo the pending revert: its messages, work state and instruction values are back;
        `files` records the file contents the caller put back, `actor` who undid it. `UsageError` when there is no
        pending revert (none, or a new input made it final)."""
        from ..events import SessionUnreverted

        with self.backend.transaction(write=True) as tx:
            _check_writable(tx, session_id, revision, self.clock.now_ms())
            pending = _pending(tx, session_id)
            if pending is None:
                raise UsageError(f"session {session_id} has no revert to undo")
            first = _revert_events(tx, session_id)[0]
            event = SessionUnreverted(
                revert_seq=pending.revert_seq,
                work_state=dict(first.undo_work_state),
                instructions=dict(first.undo_instructions),
                files=tuple(files),
                actor=actor,
            )
            [stored] = append_events(tx, session_id, [event], self.clock.now_ms())
            return stored

    def live_compactions(self, session_id: str) -> list[StoredEvent]:
        """The session's `compaction.ended` events whose summary is still in the transcript
        (a rewind or history edit can hide one), oldest first: where active history starts."""
        from ..events import StoredEvent, load_event

        with self.backend.transaction(write=False) as tx:
            rows = tx.all(
                "SELECT id, seq, at_ms, data FROM events WHERE session_id = ? "
                f"AND type = 'compaction.ended' AND {typed()} ORDER BY seq",
                (session_id,),
            )
            found = [
                StoredEvent(int(r[0]), session_id, int(r[1]), int(r[2]), load_event(r[3]))
                for r in rows
            ]
            return visible_compactions(tx, session_id, found)

    # -- history edits -------------------------------------------------------------------------

    def edit_history(
        self,
        session_id: str,
        *,
        revision: int,
        delete_turn: str | None = None,
        message_id: str | None = None,
        text: str | None = None,
        heal_pairing: bool = False,
    ) -> StoredEvent:
        """One atomic read-modify-write of the history, guarded by `revision` (the session's
        `last_seq` the caller read; a stale one is a `ConflictError`, nothing written):
        `delete_turn` hides every message of that turn, from its input to its last reply (so
        no tool call loses its result); `message_id` with `text` replaces the text of a message
        that holds text only (a tool call or result is never edited); `heal_pairing` writes
        the drop-only pairing heal back (`messages.drop_invalid_pairings`: duplicate calls and
        results, results without their call, and messages that leaves empty; it fabricates
        nothing), a `UsageError` when there is nothing to heal. Returns the last event written."""
        if (delete_turn is not None) + (message_id is not None) + heal_pairing != 1:
            raise UsageError("give a turn to delete, a message whose text to replace, or heal")
        with self.backend.transaction(write=True) as tx:
            _check_writable(tx, session_id, revision, self.clock.now_ms())
            if heal_pairing:
                events = _heal_pairing(tx, session_id, revision)
            elif delete_turn is not None:
                events = [_delete_turn(tx, session_id, delete_turn, revision)]
            else:
                if text is None or not text.strip():
                    raise UsageError("the replacement text is empty")
                assert message_id is not None
                events = [_replace_text(tx, session_id, message_id, text, revision)]
            return append_events(tx, session_id, events, self.clock.now_ms())[-1]


def _check_writable(tx: Tx, session_id: str, revision: int | None, now: int) -> None:
    row = tx.one(
        f"SELECT {last_seq_sql(tx.kind)} FROM sessions WHERE id = ?" + tx.row_lock(), (session_id,)
    )
    if row is None:
        raise NotFoundError(f"no session {session_id}")
    if revision is not None and int(row[0]) != revision:
        raise ConflictError(
            f"session {session_id} changed (revision {int(row[0])}, not {revision}): read it again"
        )
    claim = tx.one(
        "SELECT owner, lease_until_ms FROM claims WHERE session_id = ? AND released = 0",
        (session_id,),
    )
    if claim is not None and _alive(str(claim[0]), int(claim[1]), now):
        raise ConflictError(f"session {session_id} is being driven: interrupt it first")
    if tx.one("SELECT 1 FROM turns WHERE session_id = ? AND status = 'running'", (session_id,)):
        raise ConflictError(
            f"session {session_id} has an unfinished turn: resume or interrupt it first"
        )


def _visible_seq(tx: Tx, session_id: str, seq: int) -> bool:
    row = tx.one(
        "SELECT reverted FROM messages WHERE session_id = ? AND seq = ?", (session_id, seq)
    )
    return row is not None and row[0] is None


def _target(
    tx: Tx, session_id: str, turn_id: str | None, input_id: str | None, message_id: str | None
) -> tuple[int, str | None, str | None]:
    """The first `seq` a revert hides, with the turn and input it names."""
    if sum(x is not None for x in (turn_id, input_id, message_id)) > 1:
        raise UsageError("name one of a turn, an input or a message to revert to")
    if input_id is not None:
        input_id = _unique_id(tx, session_id, input_id, "in_", "delivered input", _INPUT_IDS)
        row = tx.one(
            "SELECT settled_seq FROM inbox WHERE session_id = ? AND input_id = ? "
            "AND status = 'delivered' AND message_id IS NOT NULL",
            (session_id, input_id),
        )
        assert row is not None  # `_INPUT_IDS` found it in this transaction
        return int(row[0]), None, input_id
    if message_id is not None:
        message_id = _unique_id(tx, session_id, message_id, "msg_", "visible message", _MESSAGE_IDS)
        row = tx.one(
            f"SELECT m.seq, {INSTRUCTION_NOTE} FROM messages m WHERE m.session_id = ? "
            "AND m.message_id = ? AND m.reverted IS NULL",
            (session_id, message_id),
        )
        assert row is not None  # `_MESSAGE_IDS` found it in this transaction
        return int(row[0]) - (1 if row[1] else 0), None, None  # a note: from its delta on
    if turn_id is None:
        newest = tx.one(
            "SELECT turn_id FROM turns WHERE session_id = ? ORDER BY started_seq DESC LIMIT 1",
            (session_id,),
        )
        if newest is None:
            raise UsageError(f"session {session_id} has no turn to revert")
        turn_id = str(newest[0])
    return _turn_start(tx, session_id, turn_id), turn_id, None


# The ids a revert can name, among those whose first `?` characters are `?`: the delivered inputs
# of a session and its visible messages (what `_target` reverts to).
_INPUT_IDS = (
    "SELECT input_id FROM inbox WHERE session_id = ? AND substr(input_id, 1, ?) = ? "
    "AND status = 'delivered' AND message_id IS NOT NULL ORDER BY input_id LIMIT 6"
)
_MESSAGE_IDS = (
    "SELECT message_id FROM messages WHERE session_id = ? AND substr(message_id, 1, ?) = ? "
    "AND reverted IS NULL ORDER BY message_id LIMIT 6"
)


def _unique_id(tx: Tx, session_id: str, ref: str, mark: str, what: str, sql: str) -> str:
    """The one id `sql` selects in the session that is `ref` or starts with it (or with `mark`,
    the ids' own prefix, + `ref`): every id by a unique prefix (docs/cli.md). An exact id
    wins; none is a `NotFoundError`, several a one-line `UsageError` listing them."""
    found: list[str] = []
    for key in [ref] if ref.startswith(mark) else [ref, f"{mark}{ref}"]:
        ids = [str(r[0]) for r in tx.all(sql, (session_id, len(key), key))]
        if key in ids:
            return key
        found += [i for i in ids if i not in found]
    if not found:
        raise NotFoundError(f"no {what} {ref} in session {session_id}")
    if len(found) > 1:
        more = ", ..." if len(found) > 5 else ""
        raise UsageError(f"{what} id prefix {ref!r} is ambiguous: {', '.join(found[:5])}{more}")
    return found[0]


def _turn_start(tx: Tx, session_id: str, turn_id: str) -> int:
    """The first `seq` of a turn: its earliest delivered input, else its `turn.started`."""
    from ..events import TurnStarted, load_event

    row = tx.one(
        "SELECT started_seq FROM turns WHERE session_id = ? AND turn_id = ?", (session_id, turn_id)
    )
    if row is None:
        raise NotFoundError(f"no turn {turn_id} in session {session_id}")
    started = int(row[0])
    data = tx.one("SELECT data FROM events WHERE session_id = ? AND seq = ?", (session_id, started))
    event = load_event(data[0]) if data is not None else None
    seqs = [started]
    if isinstance(event, TurnStarted):
        for iid in event.input_ids:
            got = tx.one(
                "SELECT settled_seq FROM inbox WHERE session_id = ? AND input_id = ? "
                "AND message_id IS NOT NULL",
                (session_id, iid),
            )
            if got is not None and got[0] is not None:
                seqs.append(int(got[0]))
    return min(seqs)


def _plan(
    tx: Tx, session_id: str, turn_id: str | None, input_id: str | None, message_id: str | None
) -> RevertPlan:
    last = tx.one(f"SELECT {last_seq_sql(tx.kind)} FROM sessions WHERE id = ?", (session_id,))
    if last is None:
        raise NotFoundError(f"no session {session_id}")
    from_seq, turn, iid = _target(tx, session_id, turn_id, input_id, message_id)
    hidden = transcript_in(tx, session_id, from_seq - 1)
    if not hidden:
        raise UsageError(f"nothing to revert: session {session_id} shows nothing from there on")
    if iid is not None and not _visible_seq(tx, session_id, from_seq):
        raise UsageError("that input is already reverted")
    files, shells = _effects([m for _seq, m in hidden])
    return RevertPlan(
        session_id, from_seq, int(last[0]), turn, iid, len(hidden), files, shells, hidden[0][1]
    )


def _effects(messages: Sequence[Message]) -> tuple[tuple[FileChange, ...], tuple[str, ...]]:
    """The file changes the file tools recorded in `messages` (per path: the content before
    the first change and after the last) and the `shell` commands they ran."""
    from ..messages import ToolCallBlock, ToolResultBlock

    first: dict[str, str | None] = {}
    last: dict[str, str | None] = {}
    shells: list[str] = []
    for message in messages:
        for block in message.blocks:
            if isinstance(block, ToolCallBlock) and block.name == SHELL_TOOL:
                shells.append(str(block.input.get("command", "")))
            if isinstance(block, ToolResultBlock) and block.metadata and not block.is_error:
                change = block.metadata.get(FILE_CHANGE_KEY)
                if not isinstance(change, dict) or not isinstance(change.get("path"), str):
                    continue
                path = str(change["path"])
                before, after = change.get("before"), change.get("after")
                first.setdefault(path, before if isinstance(before, str) else None)
                last[path] = after if isinstance(after, str) else None
    changes = tuple(FileChange(p, first[p], last[p]) for p in first)
    return changes, tuple(shells)


def _state_before(
    tx: Tx, session_id: str, from_seq: int
) -> tuple[dict[str, JsonValue], dict[str, str]]:
    """The work state as it stood just before `from_seq`, folded from the log, and the
    instruction values a rewind leaves: none. A committed revert clears instruction state
    (003), so the next step boundary reads the sources and establishes a fresh baseline, the
    epoch's initial values, rendered in the system prompt (`instructions._sync`)."""
    from ..events import SessionReverted, SessionUnreverted, WorkStateUpdated, load_event

    work: dict[str, JsonValue] = {}
    rows = tx.all(
        f"SELECT data FROM events WHERE session_id = ? AND seq < ? AND {types_in(_STATE_TYPES)} "
        "ORDER BY seq",
        (session_id, from_seq, *_STATE_TYPES),
    )
    for (data,) in rows:
        event = load_event(data)
        if isinstance(event, WorkStateUpdated):
            work[event.kind] = event.value
        elif isinstance(event, SessionReverted | SessionUnreverted):
            work = dict(event.work_state)
    return {k: v for k, v in work.items() if v is not None}, {}


def _undo_state(tx: Tx, session_id: str) -> tuple[dict[str, JsonValue], dict[str, str]]:
    """What an unrevert restores: the state before the first revert still pending, else now."""
    pending = _revert_events(tx, session_id)
    if pending:
        return dict(pending[0].undo_work_state), dict(pending[0].undo_instructions)
    work = {
        str(kind): json.loads(opened(value))
        for kind, value in tx.all(
            "SELECT kind, value FROM work_state WHERE session_id = ?", (session_id,)
        )
    }
    values: dict[str, str] = {
        str(k): str(d)
        for k, d in tx.all(
            "SELECT source_key, digest FROM instruction_state WHERE session_id = ?", (session_id,)
        )
    }
    return {k: v for k, v in work.items() if v is not None}, values


def _revert_events(tx: Tx, session_id: str) -> list[SessionReverted]:
    """The pending reverts' events, oldest first."""
    from ..events import SessionReverted, load_event

    out: list[SessionReverted] = []
    for (data,) in tx.all(
        "SELECT e.data FROM reverts r JOIN events e ON e.session_id = r.session_id "
        "AND e.seq = r.revert_seq WHERE r.session_id = ? ORDER BY r.revert_seq",
        (session_id,),
    ):
        event = load_event(data)
        assert isinstance(event, SessionReverted)
        out.append(event)
    return out


def _pending(tx: Tx, session_id: str) -> PendingRevert | None:
    rows = tx.all(
        "SELECT revert_seq, from_seq FROM reverts WHERE session_id = ? ORDER BY revert_seq",
        (session_id,),
    )
    if not rows:
        return None
    newest = int(rows[-1][0])
    moved = tx.one(
        "SELECT 1 FROM messages WHERE session_id = ? AND seq > ? AND reverted IS NULL",
        (session_id, newest),
    )
    if moved is not None:  # the session went on (a compaction summary): the revert is final
        return None
    hidden = tx.one(
        "SELECT COUNT(*) FROM messages WHERE session_id = ? AND reverted IS NOT NULL", (session_id,)
    )
    # Undoing puts each file back to what the earliest revert replaced, from what the latest left.
    before: dict[str, str | None] = {}
    after: dict[str, str | None] = {}
    for event in _revert_events(tx, session_id):
        for restore in event.files:
            before[restore.path] = restore.digest
            after.setdefault(restore.path, restore.replaced)
    files = tuple(FileChange(p, before[p], after[p]) for p in after)
    return PendingRevert(
        session_id, newest, min(int(r[1]) for r in rows), int(hidden[0]) if hidden else 0, files
    )


def _delete_turn(tx: Tx, session_id: str, turn_id: str, revision: int) -> HistoryEdited:
    """Every visible message from the turn's start to the next turn's start (or the end),
    except instruction notes (`INSTRUCTION_NOTE`: the next turn's prelude, a change between
    two steps), which stay where they are."""
    from ..events import HistoryEdited

    start = _turn_start(tx, session_id, turn_id)
    after = tx.all(
        "SELECT t.started_seq, t.turn_id FROM turns t JOIN turns own ON own.session_id = "
        "t.session_id AND own.turn_id = ? WHERE t.session_id = ? AND t.started_seq > "
        "own.started_seq ORDER BY t.started_seq",
        (turn_id, session_id),
    )
    end = min((_turn_start(tx, session_id, str(t)) for _s, t in after), default=2**62)
    rows = tx.all(
        "SELECT m.message_id FROM messages m WHERE m.session_id = ? AND m.seq >= ? AND m.seq < ? "
        f"AND m.reverted IS NULL AND NOT {INSTRUCTION_NOTE} ORDER BY m.seq",
        (session_id, start, end),
    )
    if not rows:
        raise UsageError(f"turn {turn_id} shows no message to delete")
    return HistoryEdited(
        op="delete_turn",
        revision=revision,
        turn_id=turn_id,
        message_ids=tuple(str(r[0]) for r in rows),
    )


def _heal_pairing(tx: Tx, session_id: str, revision: int) -> list[HistoryEdited]:
    """The drop-only pairing heal of the visible transcript as history edits: one per message
    it changed (its healed body) and one hiding the messages it emptied."""
    from ..events import HistoryEdited
    from ..messages import drop_invalid_pairings

    before = [m for _seq, m in transcript_in(tx, session_id, 0, None)]
    after = drop_invalid_pairings(before)  # unchanged messages come back as the same objects
    same = {id(m) for m in before}
    changed = [m for m in after if id(m) not in same]
    present = {m.id for m in after}
    gone = tuple(m.id for m in before if m.id not in present)
    if not changed and not gone:
        raise UsageError(f"session {session_id}: every tool call and result already pair")
    edits = [
        HistoryEdited(op="heal_pairing", revision=revision, message_ids=(m.id,), message=m)
        for m in changed
    ]
    if gone:
        edits.append(HistoryEdited(op="heal_pairing", revision=revision, message_ids=gone))
    return edits


def _replace_text(
    tx: Tx, session_id: str, message_id: str, text: str, revision: int
) -> HistoryEdited:
    from ..events import HistoryEdited
    from ..messages import TextBlock

    row = tx.one(
        "SELECT seq FROM messages WHERE session_id = ? AND message_id = ? AND reverted IS NULL",
        (session_id, message_id),
    )
    if row is None:
        raise NotFoundError(f"no visible message {message_id} in session {session_id}")
    [(_seq, message)] = transcript_in(tx, session_id, int(row[0]) - 1, int(row[0]))
    if not message.blocks or not all(isinstance(b, TextBlock) for b in message.blocks):
        raise UsageError(
            f"message {message_id} holds more than text (a tool call or result): not editable"
        )
    first = message.blocks[0]
    assert isinstance(first, TextBlock)
    new = message.model_copy(update={"blocks": (first.model_copy(update={"text": text}),)})
    return HistoryEdited(
        op="replace_text", revision=revision, message_ids=(message_id,), message=new
    )


def visible_compactions(tx: Tx, session_id: str, found: list[StoredEvent]) -> list[StoredEvent]:
    """Those of the session's `compaction.ended` events `found` (oldest first) whose summary
    message is still in the transcript, read in `tx` (a rewind or history edit can hide one)."""
    from ..events import CompactionEnded

    ids = [e.event.summary_message_id for e in found if isinstance(e.event, CompactionEnded)]
    visible: set[str] = set()
    for start in range(0, len(ids), 500):
        chunk = ids[start : start + 500]
        marks = ", ".join("?" for _ in chunk)
        visible |= {
            str(r[0])
            for r in tx.all(
                f"SELECT message_id FROM messages WHERE session_id = ? "
                f"AND reverted IS NULL AND message_id IN ({marks})",
                (session_id, *chunk),
            )
        }
    return [
        e
        for e in found
        if isinstance(e.event, CompactionEnded) and e.event.summary_message_id in visible
    ]
