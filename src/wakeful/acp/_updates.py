"""What an editor is shown: wakeful's messages and log events as ACP session updates (pure).

One presentation of a tool call (its title, kind, locations, diff) serves both the live
stream of a prompt and the replay of `session/load`, so an editor shows a call the same way
whether it watched it run or loaded the session later. Nothing here does I/O.

Live, reply text and reasoning arrive as deltas (`TextChunk`, `ReasoningChunk`), so a
committed assistant message contributes only its tool calls; replayed, the whole message is
shown. A tool result is a `tool_call_update` of the call it answers (completed or failed).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TypeAlias

from acp.schema import (
    AgentMessageChunk,
    AgentPlanUpdate,
    AgentThoughtChunk,
    ContentToolCallContent,
    FileEditToolCallContent,
    PlanEntry,
    TextContentBlock,
    ToolCallLocation,
    ToolCallProgress,
    ToolCallStart,
    ToolCallUpdate,
    ToolKind,
    UserMessageChunk,
)
from pydantic import JsonValue

from ..events import MessageAdded, SessionEvent, ToolCallStarted, WorkStateUpdated
from ..messages import (
    Message,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
    tool_result_text,
)

Update: TypeAlias = (
    UserMessageChunk
    | AgentMessageChunk
    | AgentThoughtChunk
    | ToolCallStart
    | ToolCallProgress
    | AgentPlanUpdate
)

# How each built-in tool reads in an editor: its ACP kind and the input key it is known by.
_KINDS: dict[str, ToolKind] = {
    "read_file": "read",
    "list_files": "read",
    "grep": "search",
    "write_file": "edit",
    "edit_file": "edit",
    "shell": "execute",
    "todo_write": "think",
    "plan_write": "think",
    "goal_set": "think",
    "task": "other",
}
_KNOWN_BY = {"shell": "command", "grep": "pattern", "task": "description"}
_PLAN_STATUS = frozenset({"pending", "in_progress", "completed"})


def _text(text: str) -> TextContentBlock:
    return TextContentBlock(type="text", text=text)


def tool_kind(name: str) -> ToolKind:
    """The ACP kind of a tool (`other` for tools wakeful does not know by name)."""
    return _KINDS.get(name, "other")


def tool_title(name: str, args: Mapping[str, JsonValue]) -> str:
    """One line naming the call: the tool and the argument it is known by (`shell: $ ls`)."""
    key = _KNOWN_BY.get(name, "path")
    value = args.get(key)
    if not isinstance(value, str) or not value:
        return name
    shown = f"$ {value}" if name == "shell" else value
    first = shown.splitlines()[0] if shown.strip() else shown
    return f"{name}: {first[:200]}"


def _locations(args: Mapping[str, JsonValue], root: Path) -> list[ToolCallLocation] | None:
    path = args.get("path")
    if not isinstance(path, str) or not path:
        return None
    return [ToolCallLocation(path=str(root / path))]


def _diff(name: str, args: Mapping[str, JsonValue], root: Path) -> list[FileEditToolCallContent]:
    path = args.get("path")
    if not isinstance(path, str) or not path:
        return []
    where = str(root / path)
    if name == "edit_file":
        old, new = args.get("old"), args.get("new")
        if isinstance(old, str) and isinstance(new, str):
            return [FileEditToolCallContent(type="diff", path=where, old_text=old, new_text=new)]
    if name == "write_file" and isinstance(content := args.get("content"), str):
        return [FileEditToolCallContent(type="diff", path=where, new_text=content)]
    return []


def call_started(call: ToolCallBlock, root: Path) -> ToolCallStart:
    """A call the model made, not run yet (`pending`), with its diff when it edits a file."""
    args = dict(call.input)
    diff = _diff(call.name, args, root)
    return ToolCallStart(
        session_update="tool_call",
        tool_call_id=call.id,
        title=tool_title(call.name, args),
        kind=tool_kind(call.name),
        status="pending",
        raw_input=args,
        locations=_locations(args, root),
        content=list(diff) or None,
    )


def call_asked(
    call_id: str, name: str, args: Mapping[str, JsonValue], root: Path, preview: str
) -> ToolCallUpdate:
    """The call a permission request is about: what `call_started` shows, plus the exact
    command or diff a person decides on (`docs/approvals.md`, "What is shown")."""
    content: list[ContentToolCallContent | FileEditToolCallContent] = list(_diff(name, args, root))
    if not content:
        content.append(ContentToolCallContent(type="content", content=_text(preview)))
    return ToolCallUpdate(
        tool_call_id=call_id,
        title=tool_title(name, args),
        kind=tool_kind(name),
        status="pending",
        raw_input=dict(args),
        locations=_locations(args, root),
        content=content,
    )


def call_running(call_id: str) -> ToolCallProgress:
    """The call's side effects begin (its `tool.started` is durable)."""
    return ToolCallProgress(
        session_update="tool_call_update", tool_call_id=call_id, status="in_progress"
    )


def call_ended(result: ToolResultBlock) -> ToolCallProgress:
    """The call's result: `completed`, or `failed` for an error result, with its text."""
    text = tool_result_text(result.output)
    return ToolCallProgress(
        session_update="tool_call_update",
        tool_call_id=result.call_id,
        status="failed" if result.is_error else "completed",
        content=[ContentToolCallContent(type="content", content=_text(text))],
        raw_output={"output": text, "is_error": result.is_error},
    )


def plan(todos: JsonValue) -> AgentPlanUpdate | None:
    """The session's todo list as the editor's plan (None when it is not a list of todos)."""
    if not isinstance(todos, list):
        return None
    entries: list[PlanEntry] = []
    for todo in todos:
        if not isinstance(todo, dict) or not isinstance(content := todo.get("content"), str):
            continue
        status = todo.get("status")
        entries.append(
            PlanEntry(
                content=content,
                priority="medium",
                status=status if isinstance(status, str) and status in _PLAN_STATUS else "pending",
            )
        )
    return AgentPlanUpdate(session_update="plan", entries=entries)


def _user(message: Message) -> list[Update]:
    out: list[Update] = []
    for block in message.blocks:
        if isinstance(block, TextBlock) and block.text:
            out.append(
                UserMessageChunk(session_update="user_message_chunk", content=_text(block.text))
            )
        elif isinstance(block, ToolResultBlock):
            out.append(call_ended(block))
    return out


def _assistant(message: Message, root: Path, *, text: bool) -> list[Update]:
    out: list[Update] = []
    for block in message.blocks:
        if isinstance(block, ToolCallBlock):
            out.append(call_started(block, root))
        elif not text:
            continue
        elif isinstance(block, ThinkingBlock) and block.text:
            out.append(
                AgentThoughtChunk(session_update="agent_thought_chunk", content=_text(block.text))
            )
        elif isinstance(block, TextBlock) and block.text:
            out.append(
                AgentMessageChunk(session_update="agent_message_chunk", content=_text(block.text))
            )
    return out


def replay(messages: Iterable[Message], root: Path) -> list[Update]:
    """A stored transcript as the updates that show it (`session/load`): user prompts,
    reasoning, replies, each tool call and its result. System messages (instructions,
    summaries the runtime writes for the model) are not part of the conversation shown."""
    out: list[Update] = []
    for message in messages:
        if message.role == "user":
            out.extend(_user(message))
        elif message.role == "assistant":
            out.extend(_assistant(message, root, text=True))
    return out


def live(event: SessionEvent, root: Path) -> Sequence[Update]:
    """The updates a durable event adds to a prompt the editor is watching (text and
    reasoning came as deltas): calls made, calls started, results, the todo list."""
    if isinstance(event, MessageAdded):
        if event.message.role == "assistant":
            return _assistant(event.message, root, text=False)
        if event.message.role == "user":
            return [call_ended(r) for r in event.message.tool_results()]
        return ()
    if isinstance(event, ToolCallStarted):
        return [call_running(event.call_id)]
    if isinstance(event, WorkStateUpdated) and event.kind == "todos":
        found = plan(event.value)
        return [found] if found is not None else []
    return ()
