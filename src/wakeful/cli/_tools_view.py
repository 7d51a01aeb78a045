"""How a tool call and its result read on a terminal: the call's key arguments on one line
(`shell  ls -la`, `write_file  notes.txt (120 bytes)`), a short result line, and a call paired
with its result in a transcript. `run`, `chat` and `session show` all print through here, so a
call looks the same wherever a person meets it. Pure functions of the call; the caller makes
the text `printable`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..messages import full_output, result_text, speaker
from ._common import printable

if TYPE_CHECKING:  # `session show` prints transcripts without the runner or pydantic
    from pydantic import JsonValue

    from ..runner import LiveEvent

WIDTH = 100  # a summary line is cut here (the stored value stays whole)


def _one_line(text: str, width: int = WIDTH) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _size(text: str) -> str:
    n = len(text.encode("utf-8"))
    return f"{n} byte{'s' if n != 1 else ''}"


def call_summary(name: str, args: Mapping[str, JsonValue]) -> str:
    """`NAME  KEY ARGUMENTS` for a call: the command of `shell`, the path (and the size of
    the content) of file tools, the pattern of `grep`, the prompt of `task`; any other tool
    shows its arguments as `key=value`."""

    def s(key: str) -> str:
        value = args.get(key)
        return value if isinstance(value, str) else ""

    if name == "shell":
        detail = s("command")
    elif name == "write_file":
        detail = f"{s('path')} ({_size(s('content'))})"
    elif name == "edit_file":
        detail = (
            f"{s('path')} (-{len(s('old').splitlines()) or 1} +{len(s('new').splitlines())} lines)"
        )
    elif name in ("read_file", "list_files"):
        detail = s("path") or "."
    elif name == "grep":
        detail = f"{s('pattern')!r} in {s('path') or '.'}"
    elif name == "task":
        detail = s("prompt")
    else:
        detail = " ".join(f"{k}={v}" for k, v in args.items())
    return f"{name}  {_one_line(detail)}".rstrip()


def result_summary(text: str, is_error: bool) -> str:
    """One short line for a result: its first line, and how many lines there are."""
    lines = text.strip().splitlines()
    head = _one_line(lines[0], 80) if lines else "(no output)"
    more = f"  (+{len(lines) - 1} lines)" if len(lines) > 1 else ""
    return f"{'✗' if is_error else '✓'} {head}{more}"


def transcript_lines(messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """A transcript as `(label, body)` entries: text messages as they are, each tool call
    with its result right under it (`→ shell  ls -la` then the output), results never
    repeated on their own. Calls without a result yet read `(no result yet)`. The messages are
    plain dumps (`PlainReads.plain_messages`: `model_dump(mode="json", exclude_none=True)`)."""
    results = {b["call_id"]: b for m in messages for b in m["blocks"] if b["type"] == "tool_result"}
    out: list[tuple[str, str]] = []
    for m in messages:
        cut = (
            ", truncated at the output limit" if (m.get("metadata") or {}).get("truncated") else ""
        )
        if m["aborted"]:  # output an interrupt cut short: shown, never sent to a model
            cut = ", aborted (not sent to the model)"
        text = "".join(b["text"] for b in m["blocks"] if b["type"] == "text")
        calls = [b for b in m["blocks"] if b["type"] == "tool_call"]
        who = speaker(m["role"], m.get("metadata"))
        if text:
            out.append((f"{who}{cut}", text))
        elif not calls and not any(b["type"] == "tool_result" for b in m["blocks"]):
            out.append((f"{who}{cut}", ", ".join(b["type"] for b in m["blocks"])))
        for call in calls:
            result = results.get(call["id"])
            body = "(no result yet)"
            if result is not None:
                body = _indent(result_text(result["output"]), 20)
                if result["is_error"]:
                    body = "  ✗ error: " + body[2:]
                kept = full_output(result.get("metadata"))
                if kept is not None:  # the model was given it cut to the cap on tool results
                    body += (
                        f"\n  (cut for the model; the whole output, {kept[1]} bytes: "
                        f"session show --output {call['id']})"
                    )
            out.append((f"→ {call_summary(call['name'], call['input'])}", body))
    return out


def _indent(text: str, max_lines: int) -> str:
    """At most `max_lines` lines of a tool's output (the rest counted), each indented."""
    lines = text.rstrip("\n").splitlines() or ["(no output)"]
    shown = lines[:max_lines]
    if len(lines) > max_lines:
        shown.append(f"… {len(lines) - max_lines} more lines (session show --format json)")
    return "\n".join("  " + line for line in shown)


def tool_line(ev: LiveEvent) -> str:
    """What `run` and `chat` print for a live `tool_start` (`→ shell  ls -la`) or `tool_end`
    (`  ✓ shell: first line of the output  (+N lines)`), control characters escaped."""
    name = str(ev.data.get("name"))
    if ev.kind == "tool_start":
        args = ev.data.get("input")
        return printable(f"→ {call_summary(name, args if isinstance(args, dict) else {})}")
    summary = result_summary(str(ev.data.get("output") or ""), bool(ev.data.get("is_error")))
    return printable(f"  {summary[:2]}{name}: {summary[2:]}")
