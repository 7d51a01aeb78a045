"""The one cap on what a tool call hands the model, for every kind of tool (built-in, MCP, user).

A result whose text is over `MAX_RESULT_BYTES` (UTF-8) reaches the model as its head and its
tail around one notice (`notice`); the whole text is kept as a blob of the session, named in
the result's metadata under `full_output` (`ref`: its SHA-256 digest, `bytes`: its size), so
the person can read all of it (`wakeful session show --output CALL`, the inspector's link).
Media parts of a result pass as they are. A tool that could not keep all of its text (the
shell keeps at most `MAX_KEPT_BYTES` of what a command prints) names the bytes it dropped in its
metadata under `DROPPED`, and the notice says so.
"""

from __future__ import annotations

from ...messages import FULL_OUTPUT, TextBlock, ToolResultBlock, tool_result_text
from ...store import blob_digest

MAX_RESULT_BYTES = 64 * 1024
# The most of one output a tool keeps for the person (the shell's spool: its first
# `MAX_KEPT_BYTES` and its last bytes); beyond it the middle is dropped and the notice says so.
MAX_KEPT_BYTES = 16 * 1024 * 1024
DROPPED = "output_dropped"  # metadata: bytes of the output the tool itself could not keep


def notice(total: int, shown: int, digest: str, dropped: int = 0) -> str:
    """The one notice the model reads in place of the middle of a result that was cut: how much
    of how much was left out, the cap, and where the whole is (the blob of the result), or, when
    the tool could not keep all of it (`dropped` bytes), how much of it the blob lacks."""
    kept = f"the person can read the whole output, kept as blob {digest[:12]}"
    if dropped:
        kept = (
            f"the person can read the output, kept as blob {digest[:12]}, but for {dropped} bytes "
            f"of its middle (at most {MAX_KEPT_BYTES // (1024 * 1024)} MiB is kept)"
        )
    return (
        f"\n[... {total - shown} of {total} bytes of this result omitted (the cap is "
        f"{MAX_RESULT_BYTES // 1024} KiB); {kept}; ask for a narrower result if you need the "
        "middle ...]\n"
    )


def _head_tail(data: bytes, digest: str, dropped: int) -> str:
    """`data` cut to the cap: two thirds head, one third tail, split on character bounds."""
    room = MAX_RESULT_BYTES - len(notice(len(data) + dropped, 0, digest, dropped).encode())
    head = data[: room * 2 // 3].decode("utf-8", errors="ignore")
    tail = data[len(data) - room // 3 :].decode("utf-8", errors="ignore")
    shown = len(head.encode()) + len(tail.encode())
    total = len(data) + dropped
    return head + notice(total, shown, digest, dropped) + tail


def cap_result(result: ToolResultBlock) -> tuple[ToolResultBlock, bytes | None]:
    """`result` as the model may read it, and the blob of its whole text when it was cut
    (None: the result is within the cap and returned as it is)."""
    text = (
        tool_result_text(result.output)
        if isinstance(result.output, str)
        else "\n".join(p.text for p in result.output if isinstance(p, TextBlock))
    )
    if len(text) * 4 <= MAX_RESULT_BYTES:  # within the cap whatever the encoding
        return result, None
    data = text.encode("utf-8", errors="surrogatepass")
    if len(data) <= MAX_RESULT_BYTES:
        return result, None
    digest = blob_digest(data)
    dropped = (result.metadata or {}).get(DROPPED)
    cut = _head_tail(data, digest, dropped if isinstance(dropped, int) else 0)
    if isinstance(result.output, str):
        output: str | tuple[object, ...] = cut
    else:  # the text parts become one, where the first was; media parts stay
        parts: list[object] = []
        for part in result.output:
            if not isinstance(part, TextBlock):
                parts.append(part)
            elif not any(isinstance(p, TextBlock) for p in parts):
                parts.append(TextBlock(text=cut))
        output = tuple(parts)
    metadata = dict(result.metadata or {})
    metadata[FULL_OUTPUT] = {"ref": digest, "bytes": len(data)}
    capped = result.model_copy(update={"output": output, "metadata": metadata})
    return capped, data
