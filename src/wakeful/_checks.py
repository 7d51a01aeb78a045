"""The after-the-fact check of docs/design.md's invariants on what a store holds, shared by the
crash, fault and concurrency tests and `bench/bench_fleet.py` and `bench/bench_torture.py`
(which must run from a clean clone with the project's environment only, so neither imports the
other's files).

`check_session` asserts them on one session; `LEDGER` and `ledger_lines` read the file a
workload's `shell` calls append to, so that no side effect is found twice. The workload itself
is here too: `job_rule` / `job_script` (scripted turns of ledger-writing tool calls, a durable
retry and a streamed answer) and `kill_after` (the SIGKILL of a driver).
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

from .events import (
    Delivery,
    InputDelivered,
    InputEnqueued,
    InputRejected,
    MessageAdded,
    SessionCreated,
    StoredEvent,
    ToolCallStarted,
)
from .messages import drop_invalid_pairings, is_wire_valid, to_wire
from .store import SqlStore

LEDGER = "ledger.txt"


def create_session(
    store: SqlStore,
    sid: str,
    model: str,
    prompts: Sequence[str],
    *,
    delivery: Delivery = "queue",
    workspace: Path | None = None,
) -> None:
    """Create `sid` on `model` and admit `prompts` (queued: one turn each)."""
    meta = {"workspace": str(workspace)} if workspace else None
    created = SessionCreated(title=sid, agent="build", model=model, metadata=meta)
    for prompt in prompts:
        store.admit(sid, None, "user", {"text": prompt}, delivery, create=created)


def write_script(path: Path, rules: list[dict[str, object]], **top: object) -> str:
    """Write a scripted-provider script; return its model spec."""
    path.write_text(json.dumps({"rules": rules, **top}))
    return f"scripted:{path}"


def shell(command: str) -> dict[str, object]:
    """A scripted `shell` tool call."""
    return {"name": "shell", "input": {"command": command}}


def job_rule(tag: str) -> dict[str, object]:
    """Replies for the prompt `job TAG`: four steps of ledger-writing tool calls, a durable
    retry wait, a tool whose side effect can be cut in the middle, and a streamed answer."""
    during = (
        f"echo {tag}.2a >> {LEDGER}; "
        f'if [ "$WAKEFUL_CRASH_AT" = tool.during ]; then kill -9 $PPID; exit 1; fi; '
        f"echo {tag}.2b >> {LEDGER}"
    )
    return {
        "match": f"^job {re.escape(tag)}$",
        "replies": [
            {
                "tool_calls": [
                    shell(f"echo {tag}.1a >> {LEDGER}"),
                    shell(f"echo {tag}.1b >> {LEDGER}"),
                ]
            },
            {"text": "checking", "tool_calls": [shell(during)]},
            {
                "tool_calls": [shell(f"echo {tag}.3 >> {LEDGER}")],
                "error": {"kind": "rate_limit", "times": 1, "retry_after_ms": 150},
            },
            {"text": f"job {tag} finished: " + "all ledger lines are written. " * 4},
        ],
    }


def job_script(path: Path, tags: Iterable[str], *, chunk_delay_ms: int = 3) -> str:
    """A script answering `job TAG` for every tag (see `job_rule`)."""
    return write_script(path, [job_rule(t) for t in tags], chunk_delay_ms=chunk_delay_ms)


def kill_after(proc: subprocess.Popen[str], seconds: float) -> bool:
    """SIGKILL `proc` after `seconds` unless it exited first; return whether it was killed."""
    try:
        proc.wait(timeout=seconds)
        return False
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        return True


def epochs(store: SqlStore, sid: str) -> list[tuple[int, int | None]]:
    """(seq, fencing epoch) of every event of a session, in seq order."""
    with store.backend.transaction(write=False) as tx:
        rows = tx.all("SELECT seq, epoch FROM events WHERE session_id = ? ORDER BY seq", (sid,))
    return [(int(s), None if e is None else int(e)) for s, e in rows]


def twice(store: SqlStore, sid: str, events: Sequence[StoredEvent]) -> str:
    """The failure message for a message stored twice: each copy's event, epoch and neighbours."""
    by_id: dict[str, list[int]] = {}
    for e in events:
        if isinstance(e.event, MessageAdded):
            by_id.setdefault(e.event.message.id, []).append(e.seq)
        elif isinstance(e.event, InputDelivered):
            mid = e.event.message.id if e.event.message else e.event.message_id
            if mid is not None:
                by_id.setdefault(mid, []).append(e.seq)
    epoch = dict(epochs(store, sid))
    lines = [f"{sid}: a message stored twice"]
    for mid, seqs in by_id.items():
        if len(seqs) > 1:
            lines.append(f"message {mid} at seq {seqs}")
            for e in events:
                if any(abs(e.seq - s) <= 3 for s in seqs):
                    body = e.event.model_dump_json()[:600]
                    lines.append(f"  {e.seq} epoch={epoch.get(e.seq)} {e.event.type} {body}")
    return "\n".join(lines)


def ledger_lines(workdir: Path) -> Counter[str]:
    """How often each line occurs in the ledger."""
    path = workdir / LEDGER
    return Counter(path.read_text().split()) if path.exists() else Counter()


def check_session(store: SqlStore, sid: str, ledger: Counter[str] | None = None) -> dict[str, int]:
    """Assert docs/design.md's invariants on one session as stored; return a few counts.

    Inputs delivered exactly once (or rejected), nothing pending; turns terminal; no tool call
    running after the final drain (docs/execution.md: no orphaned running call survives the
    next drain); the transcript valid as persisted (and `drop_invalid_pairings` finds
    nothing); `seq` gap-free; fencing epochs never decrease; with a ledger, no side effect
    twice and every completed call's side effects present.
    """
    events = store.events(sid)
    assert [e.seq for e in events] == list(range(1, len(events) + 1)), "event seq gap"
    assert store.get_session(sid).last_seq == len(events)
    fenced = [e for _s, e in epochs(store, sid) if e is not None]
    assert fenced == sorted(fenced), f"{sid}: a write under an older epoch followed a newer one"

    enqueued = [e.event.input_id for e in events if isinstance(e.event, InputEnqueued)]
    settled = Counter(
        e.event.input_id for e in events if isinstance(e.event, InputDelivered | InputRejected)
    )
    assert len(enqueued) == len(set(enqueued))
    assert all(settled[i] == 1 for i in enqueued), f"{sid}: input not delivered exactly once"
    assert set(settled) == set(enqueued)
    assert store.pending(sid) == []
    _check_transcript(store, sid, events)

    turns = store.turns(sid)
    assert all(t.status != "running" for t in turns), f"{sid}: a turn is not terminal"
    calls = store.tool_calls(sid)
    running = [c.call_id for c in calls if c.status == "running"]
    assert not running, f"{sid}: tool calls still running after the final drain: {running}"
    if ledger is not None:
        _check_ledger(store, sid, ledger)
    completed = sum(t.status == "completed" for t in turns)
    return {"turns": len(turns), "completed": completed, "calls": len(calls), "events": len(events)}


def _check_transcript(store: SqlStore, sid: str, events: Sequence[StoredEvent]) -> None:
    messages = store.messages(sid)
    assert len({m.id for m in messages}) == len(messages), twice(store, sid, events)
    in_transcript = Counter((m.metadata or {}).get("input_id") for m in messages)
    delivered = [e.event for e in events if isinstance(e.event, InputDelivered)]
    for d in delivered:  # a control item becomes no message; any other input exactly one
        became = d.message is not None or getattr(d, "message_id", None) is not None
        assert in_transcript[d.input_id] == int(became), f"{sid}: {d.input_id} in the transcript"
    assert is_wire_valid(to_wire(messages))
    # Aborted output (an interrupt cut it short, 001) is kept but never sent: the rest must be
    # wire-valid as it is.
    sent = [m for m in messages if not m.aborted]
    assert is_wire_valid(sent), f"{sid}: the persisted transcript is not wire-valid"
    assert drop_invalid_pairings(messages) == messages


def _check_ledger(store: SqlStore, sid: str, ledger: Counter[str]) -> None:
    status = {c.call_id: c.status for c in store.tool_calls(sid)}
    for ev in store.events(sid, types=["tool.started"]):
        started = ev.event
        assert isinstance(started, ToolCallStarted)
        command = str(started.input.get("command", ""))
        lines = re.findall(r"echo (\S+) >>", command)
        if status[started.call_id] == "completed":
            assert all(ledger[line] == 1 for line in lines), (sid, command, ledger)
    assert all(n == 1 for n in ledger.values()), f"a side effect ran twice: {ledger}"
