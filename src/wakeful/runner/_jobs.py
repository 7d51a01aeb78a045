"""Background children in the work state's `jobs` (issue 37 item 24).

The `task` tool adds a background child to its session's `jobs`, `running`
(`execution/_children.py`); when the child's report is delivered to the session, its runner
marks the entry with the child's outcome (`completed`, `failed`, ...), in a `work_state.updated`
it commits before the step that reads the report. The model sees its jobs in the work-state
note of every request, as it sees its todos.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import JsonValue

from ..messages import Message

REPORT_KIND = "subagent_report"  # the input kind of a background child's report
REPORT_PREFIX = "report_"  # how the input id of a report begins: report_<child>_<turn>


def reports_in(messages: Sequence[Message]) -> list[tuple[str, str]]:
    """(child session id, outcome) of each child report among `messages`."""
    out = []
    for message in messages:
        meta = message.metadata or {}
        child, outcome = meta.get("child_session_id"), meta.get("outcome")
        if meta.get("kind") == REPORT_KIND and isinstance(child, str):
            out.append((child, outcome if isinstance(outcome, str) else "completed"))
    return out


def settled_jobs(jobs: JsonValue, reports: Sequence[tuple[str, str]]) -> list[JsonValue] | None:
    """`jobs` with each reported child's entry given its outcome as status (an entry added for
    a child it does not list); None when nothing changes."""
    entries: list[JsonValue] = list(jobs) if isinstance(jobs, list) else []
    changed = False
    for child, outcome in reports:
        found = [e for e in entries if isinstance(e, dict) and e.get("id") == child]
        if not found:
            entries.append({"id": child, "content": f"child {child}", "status": outcome})
            changed = True
        for entry in found:
            if isinstance(entry, dict) and entry.get("status") != outcome:
                entries[entries.index(entry)] = {**entry, "status": outcome}
                changed = True
    return entries if changed else None
