"""The `runtime.work_state` section: goal, plan, todos and jobs regenerated from the store.

Bounded: at most 64 entries per collection and 16 KiB overall; when a cap bites, the section
says so, so the model knows it is not seeing everything.
"""

from __future__ import annotations

import json

from pydantic import JsonValue

# Its section id: a `note.` section, sent after the history (the prompt's cached prefix) and
# never inside it, so a todo update does not throw the provider's prompt cache away.
WORK_STATE_SECTION = "note.runtime.work_state"
MAX_ENTRIES = 64
MAX_BYTES = 16 * 1024
ORDER = ("goal", "plan", "todos", "jobs")


def _lines(kind: str, value: JsonValue) -> tuple[list[str], int]:
    if isinstance(value, list):
        shown = value[:MAX_ENTRIES]
        lines = [f"## {kind}"]
        for entry in shown:
            if isinstance(entry, dict):
                status = entry.get("status", "")
                content = entry.get("content", json.dumps(entry, ensure_ascii=False))
                lines.append(f"- [{status}] {content}" if status else f"- {content}")
            else:
                lines.append(f"- {entry}")
        return lines, len(value) - len(shown)
    return [f"## {kind}", str(value)], 0


def render_work_state(state: dict[str, JsonValue]) -> str:
    """Render work state within its caps; empty string when there is none."""
    out: list[str] = []
    notes: list[str] = []
    for kind in ORDER:
        if kind not in state or state[kind] in (None, "", []):
            continue
        lines, hidden = _lines(kind, state[kind])
        out += lines
        if hidden:
            notes.append(f"{hidden} more {kind} entries not shown (cap {MAX_ENTRIES})")
    if not out:
        return ""
    text = "# Work state\n" + "\n".join(out)
    if len(text.encode()) > MAX_BYTES:
        cut = text.encode()[: MAX_BYTES - 200].decode(errors="ignore")
        text = cut.rsplit("\n", 1)[0]
        notes.append(f"work state truncated to {MAX_BYTES // 1024} KiB")
    if notes:
        text += "\n\n(" + "; ".join(notes) + ")"
    return text
