"""Events that shape a session after the fact: rewind and unrevert, history edits, artifacts,
metadata and per-extension state (the spec's `mutateHistory`, artifacts, metadata).

Invariant: each event is self-describing. A revert names the state it restores (work state,
instruction values, file contents), an unrevert the state it brings back, so a projection
applies the event without replaying the log.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from ..messages import Message


class _Event(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)
    v: int = 1


class FileRestore(BaseModel):
    """One file a revert (or unrevert) put back: `path` relative to the session's location;
    `digest` the content it now has (None: the file was removed); `replaced` the content it had
    just before (None: it did not exist)."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)
    path: str
    digest: str | None = None
    replaced: str | None = None


class SessionReverted(_Event):
    """A rewind: the messages from `from_seq` on leave the active history (their events stay in
    the log); the work state and instruction values return to what they were before `from_seq`.

    `work_state` and `instructions` are the restored values (complete); `undo_work_state` and
    `undo_instructions` the values replaced, which an unrevert brings back. The revert stays
    pending until a new input is delivered, which makes it final.
    """

    type: Literal["session.reverted"] = "session.reverted"
    from_seq: int
    turn_id: str | None = None
    input_id: str | None = None
    work_state: dict[str, JsonValue] = Field(default_factory=dict)
    instructions: dict[str, str] = Field(default_factory=dict)
    undo_work_state: dict[str, JsonValue] = Field(default_factory=dict)
    undo_instructions: dict[str, str] = Field(default_factory=dict)
    files: tuple[FileRestore, ...] = ()
    shell_calls: tuple[str, ...] = ()  # the reverted `shell` commands: not reversible
    actor: str | None = None  # who rewound (docs/access.md); None: not recorded


class SessionUnreverted(_Event):
    """The pending revert written at `revert_seq` is undone: its messages, work state and
    instruction values are back (and, with `files`, the file contents it replaced)."""

    type: Literal["session.unreverted"] = "session.unreverted"
    revert_seq: int
    work_state: dict[str, JsonValue] = Field(default_factory=dict)
    instructions: dict[str, str] = Field(default_factory=dict)
    files: tuple[FileRestore, ...] = ()
    actor: str | None = None  # who undid the rewind (docs/access.md); None: not recorded


class HistoryEdited(_Event):
    """A history edit guarded by the session's revision (`revision`: its `last_seq` when the
    edit was read). `delete_turn` hides every message of a turn (its input through its last
    reply, so no call loses its result); `replace_text` stands `message` in for the message
    of the same id; `heal_pairing` (the drop-only pairing heal written back, one event per
    healed message) stands `message` in for its own, or hides `message_ids` (messages the heal
    emptied)."""

    type: Literal["history.edited"] = "history.edited"
    op: Literal["delete_turn", "replace_text", "heal_pairing"]
    revision: int
    message_ids: tuple[str, ...] = ()
    message: Message | None = None
    turn_id: str | None = None


class ArtifactRecorded(_Event):
    """An artifact this session produced, upserted by `(kind, uri)` (see `wakeful.store`'s
    artifacts: the cap and its eviction order)."""

    type: Literal["artifact.recorded"] = "artifact.recorded"
    artifact_id: str
    kind: str
    uri: str
    label: str
    meta: JsonValue = None
    turn_id: str | None = None
    at_ms: int = 0  # when it was recorded (epoch ms): the row's created / updated time


class MetadataUpdated(_Event):
    """Session metadata merged by key: a key set to None is removed."""

    type: Literal["metadata.updated"] = "metadata.updated"
    patch: dict[str, JsonValue]


class ExtensionStateSet(_Event):
    """One value of an extension's namespace set (`value` not None) or deleted (None)."""

    type: Literal["extension_state.set"] = "extension_state.set"
    namespace: str
    key: str
    value: JsonValue = None
