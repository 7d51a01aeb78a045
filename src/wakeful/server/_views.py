"""Pure view helpers of the inspector: messages into display parts, times, digests.

No I/O and no HTML here: templates (autoescaped) render what these return. Receipts read as a
step timeline: each says what changed since the request before it (`receipt_changes`). A tool
call is shown once, with its result (from a later message) paired to it by call id; the result's own message
then shows only what else it holds. `app.js` pairs the same way for messages that arrive live.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass

from ..messages import (
    CompactSummaryBlock,
    ImageBlock,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
    full_output,
    tool_result_text,
)


@dataclass(frozen=True, slots=True)
class Part:
    """One displayable piece of a message.

    `kind` is text, tool_call, tool_result, image, thinking, summary or other. Folded parts
    (everything but text and images) render inside a <details> whose summary is `title`. A
    tool call carries its `call_id`, its key argument `arg`, its paired `result` (None while it
    runs) and, for `edit_file`, the `diff` as (path, old, new).
    """

    kind: str
    title: str
    body: str = ""
    src: str | None = None  # image source: a data: URL or the media route
    error: bool = False
    call_id: str = ""
    arg: str = ""
    result: Part | None = None
    diff: tuple[str, str, str] | None = None

    @property
    def preview(self) -> str:
        """The first line of the body, shortened (a tool result's summary)."""
        first = next((line for line in self.body.splitlines() if line.strip()), "")
        return first[:80] + ("…" if len(first) > 80 else "")


KEY_ARGS = ("command", "path", "pattern", "query", "url", "name")  # what a call is shown by


def iso(ms: int | None) -> str:
    """Epoch milliseconds as a short UTC time."""
    if ms is None:
        return ""
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).strftime("%Y-%m-%d %H:%M:%S")


def short(digest: str, n: int = 12) -> str:
    """The first `n` characters of a digest."""
    return digest[:n]


def _pretty(value: object) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def _image(block: ImageBlock, media: str) -> Part:
    if block.data is not None:
        return Part(
            "image",
            block.name or block.media_type,
            src=f"data:{block.media_type};base64,{block.data}",
        )
    return Part("image", block.name or block.media_type, src=f"{media}/{block.ref}")


def key_arg(call: ToolCallBlock) -> str:
    """The argument a call is known by (its command, path, ...), on one line."""
    for key in KEY_ARGS:
        value = call.input.get(key)
        if isinstance(value, str) and value.strip():
            line = " ".join(value.split())
            return line[:100] + ("…" if len(line) > 100 else "")
    return ""


def _result(block: ToolResultBlock, media: str) -> Part:
    """A result's part; one the model was given cut (the cap on tool results) links its whole
    output (`src`, the media route; `arg`, its size)."""
    label = "✗ tool result (error)" if block.is_error else "← tool result"
    kept = full_output(block.metadata)
    src, size = (None, "") if kept is None else (f"{media}/{kept[0]}", f"{kept[1]} bytes")
    return Part(
        "tool_result",
        label,
        tool_result_text(block.output),
        error=block.is_error,
        call_id=block.call_id,
        src=src,
        arg=size,
    )


def _call(block: ToolCallBlock, result: ToolResultBlock | None, media: str) -> Part:
    diff = None
    if block.name == "edit_file":
        path, old, new = (block.input.get(k) for k in ("path", "old", "new"))
        if isinstance(path, str) and isinstance(old, str) and isinstance(new, str):
            diff = (path, old, new)
    return Part(
        "tool_call",
        block.name,
        _pretty(block.input),
        call_id=block.id,
        arg=key_arg(block),
        result=None if result is None else _result(result, media),
        diff=diff,
    )


def transcript(
    messages: list[tuple[int, Message]], media: str
) -> list[tuple[int, Message, list[Part]]]:
    """Each message with its display parts, tool calls paired with their results; a message
    left with nothing to show (only results shown with their calls) is left out. `media` is
    the session's media route (with the mount prefix)."""
    results = {
        b.call_id: b for _seq, m in messages for b in m.blocks if isinstance(b, ToolResultBlock)
    }
    called: set[str] = set()
    out = []
    for seq, message in messages:
        shown = []
        for part in parts(message, media, results):
            if part.kind == "tool_result" and part.call_id in called:
                continue
            called.update([part.call_id] if part.kind == "tool_call" else [])
            shown.append(part)
        if shown:
            out.append((seq, message, shown))
    return out


def parts(
    message: Message, media: str, results: dict[str, ToolResultBlock] | None = None
) -> list[Part]:
    """The display parts of a message, in block order (tool calls with their `results`)."""
    out: list[Part] = []
    for block in message.blocks:
        if isinstance(block, TextBlock):
            out.append(Part("text", "", block.text))
        elif isinstance(block, ToolCallBlock):
            out.append(_call(block, (results or {}).get(block.id), media))
        elif isinstance(block, ToolResultBlock):
            out.append(_result(block, media))
        elif isinstance(block, ImageBlock) and block.media_type.startswith("image/"):
            out.append(_image(block, media))
        elif isinstance(block, ThinkingBlock):
            out.append(Part("thinking", "thinking", block.text))
        elif isinstance(block, CompactSummaryBlock):
            out.append(
                Part(
                    "summary",
                    f"compaction summary (through seq {block.through_seq})",
                    block.summary,
                )
            )
        else:
            data = block.model_dump(mode="json", exclude_none=True)
            data.pop("data", None)  # bulk bytes are not worth showing as text
            out.append(Part("other", block.type, _pretty(data)))
    return out


def receipt_changes(receipts: list[dict[str, object]]) -> list[dict[str, object]]:
    """Each receipt (as `receipt_json` gives it) with `changes`: against the receipt before it,
    the sections `added`, `changed` (another digest) and `removed`, how many stayed the `same`,
    the `new_messages` in its history, and its section `digests` by id; the first one has `first: True` and every section
    under `added`. `session.js` computes the same for receipts that arrive live."""
    out: list[dict[str, object]] = []
    before: dict[str, str] | None = None
    messages: set[str] = set()
    for r in receipts:
        sections = [s for s in r["sections"] if isinstance(s, dict)]  # type: ignore[attr-defined]  # receipt_json: a list
        now = {str(s["id"]): str(s["digest"]) for s in sections}
        ids = [str(m) for m in r["message_ids"]]  # type: ignore[attr-defined]  # receipt_json: a list
        prev = before or {}
        changes = {
            "first": before is None,
            "added": [k for k in now if k not in prev],
            "changed": [k for k in now if k in prev and prev[k] != now[k]],
            "removed": [k for k in prev if k not in now],
            "same": sum(1 for k in now if prev.get(k) == now[k]),
            "new_messages": sum(1 for m in ids if m not in messages),
            "digests": now,
        }
        out.append(r | {"changes": changes})
        before, messages = now, set(ids)
    return out
