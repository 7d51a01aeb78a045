"""Approvals that survive a restart: which calls wait for a decision, what the person deciding
is shown, and what the session's log says about them.

A call whose permission is `ask` with nobody present to answer (a worker, the server, a run
without a terminal) is not started: the reply that holds it commits with an
`approval.requested` per such call instead of the calls' `tool.started`, and the turn ends
`paused` (`error_kind` `awaiting_approval`). A decision arrives as an `approval` inbox item; its
delivery records `approval.decided` and starts the turn that runs the step (allowed calls run
once, under the usual `tool.started` write-ahead; denied ones answer the model with an error).
The step is the newest requested message whose calls have not started: this module is the one
place that reads it from the log.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:  # `session show` reads the waiting calls without the event models
    from pathlib import Path

    from pydantic import JsonValue

    from ..events import ApprovalRequested, Decision, StoredEvent
    from ..store import Store

APPROVAL_TYPES = ("approval.requested", "approval.decided")
MAX_PREVIEW = 20_000  # characters of a diff shown; the rest is summarized
WRITE_TOOLS = frozenset({"write_file", "edit_file"})


class AwaitingApproval(Exception):
    """Raised inside a turn when calls wait for a decision nobody present can give."""

    def __init__(self, requests: tuple[ApprovalRequested, ...]) -> None:
        self.requests = requests
        names = ", ".join(r.name for r in requests)
        super().__init__(f"awaiting approval of {len(requests)} call(s): {names}")


@dataclass(frozen=True)
class ApprovalStep:
    """The calls of one assistant message that wait (or waited) for decisions, not yet run.

    `decisions` maps a call id to its first decision; `pending` are the requests still
    undecided. `seq` is the log position of the first request.
    """

    message_id: str
    seq: int
    requests: tuple[ApprovalRequested, ...]
    decisions: dict[str, Decision] = field(default_factory=dict)

    @property
    def pending(self) -> tuple[ApprovalRequested, ...]:
        """The requests nobody has decided yet."""
        return tuple(r for r in self.requests if r.call_id not in self.decisions)


@dataclass(frozen=True)
class ApprovalLog:
    """What a session's log says about approvals: the open step (None when nothing waits)
    and the tools allowed `always` for the rest of the session."""

    step: ApprovalStep | None
    grants: frozenset[str]


def read_approvals(store: Store, session_id: str) -> ApprovalLog:
    """Read the open approval step and the session's `always` grants from the log."""
    events = store.events(session_id, types=APPROVAL_TYPES)
    return fold_approvals(events, lambda: {c.message_id for c in store.tool_calls(session_id)})


def fold_approvals(
    events: Sequence[StoredEvent], started: Callable[[], Collection[str]]
) -> ApprovalLog:
    """The approval log of a session from its approval events (oldest first); `started`
    gives the ids of the messages whose calls have started (read only when a step may wait)."""
    grants, step = _fold([(s.seq, vars(s.event)) for s in events], started)
    if step is None:
        return ApprovalLog(None, grants)
    message_id, seq, requests, decisions = step
    found = tuple(cast("ApprovalRequested", events[i].event) for i in requests)
    return ApprovalLog(ApprovalStep(message_id, seq, found, decisions), grants)


def waiting_requests(
    events: Sequence[tuple[int, dict[str, Any]]], started: Callable[[], Collection[str]]
) -> list[dict[str, Any]]:
    """`ApprovalStep.pending` of `fold_approvals` from the plain approval events
    (`(seq, body)`, `PlainReads.plain_events`): the bodies of the requests that wait."""
    _grants, step = _fold(events, started)
    if step is None:
        return []
    found = [events[i][1] for i in step[2]]
    return [r for r in found if r["call_id"] not in step[3]]


def _fold(
    events: Sequence[tuple[int, Mapping[str, Any]]], started: Callable[[], Collection[str]]
) -> tuple[frozenset[str], tuple[str, int, list[int], dict[str, Decision]] | None]:
    """The one reading of the approval events (`(seq, fields)`, oldest first): the `always`
    grants, and the open step (None when nothing waits): the newest requested message whose
    calls have not started, the seq of its first request, the positions of its requests (the
    first per call) and the first decision on each."""
    names: dict[str, str] = {}
    grants: set[str] = set()
    newest: str | None = None
    for _seq, ev in events:
        if ev["type"] == "approval.requested":
            names[ev["call_id"]] = ev["name"]
            newest = ev["message_id"]
        elif ev["type"] == "approval.decided" and ev["decision"] == "always":
            name = ev.get("name") or names.get(ev["call_id"])
            if name:
                grants.add(name)
    if newest is None or newest in started():
        return frozenset(grants), None
    requests: dict[str, int] = {}
    decisions: dict[str, Decision] = {}
    first = 0
    for i, (seq, ev) in enumerate(events):
        if ev["type"] == "approval.requested" and ev["message_id"] == newest:
            first = first or seq
            requests.setdefault(ev["call_id"], i)
        elif ev["type"] == "approval.decided" and ev["call_id"] in requests:
            decisions.setdefault(ev["call_id"], ev["decision"])  # the first decision holds
    return frozenset(grants), (newest, first, list(requests.values()), decisions)


def preview(name: str, args: dict[str, JsonValue], workspace: Path | None = None) -> str:
    """What a person deciding on a call is shown: the command of `shell`, a unified diff of
    `edit_file` and `write_file` (against the file as it is now: an edit's hunk has its context
    lines and the file's line numbers; the fragments alone when the file cannot be read or
    `old` does not occur exactly once), else the input as JSON."""
    if name == "shell" and isinstance(args.get("command"), str):
        return f"$ {args['command']}"
    path = args.get("path")
    if name == "edit_file" and isinstance(path, str):
        old, new = str(args.get("old", "")), str(args.get("new", ""))
        before = _current(workspace, path)
        if before is not None and old and before.count(old) == 1:  # as the edit will apply
            return _diff(path, before, before.replace(old, new))  # context, true line numbers
        return _diff(path, old, new)
    if name == "write_file" and isinstance(path, str):
        before = _current(workspace, path)
        return _diff(path, before, str(args.get("content", "")), created=before is None)
    return f"{name} {json.dumps(args, ensure_ascii=False, sort_keys=True)}"


def _current(workspace: Path | None, path: str) -> str | None:
    """The file's text now (None: it does not exist or cannot be read as a small text file)."""
    if workspace is None:
        return None
    try:
        target = (workspace / path).resolve()
        if not target.is_relative_to(workspace.resolve()) or not target.is_file():
            return None
        if target.stat().st_size > 1_000_000:
            return None
        return target.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def _diff(path: str, before: str | None, after: str, created: bool = False) -> str:
    import difflib

    lines = difflib.unified_diff(
        (before or "").splitlines(keepends=True),
        after.splitlines(keepends=True),
        fromfile="/dev/null" if created else f"a/{path}",
        tofile=f"b/{path}",
    )
    text = "".join(line if line.endswith("\n") else line + "\n" for line in lines)
    if len(text) > MAX_PREVIEW:
        cut = text[:MAX_PREVIEW].rsplit("\n", 1)[0]
        text = f"{cut}\n[... {len(text) - len(cut)} more characters of the diff ...]\n"
    return text.rstrip("\n") or f"(no change to {path})"
