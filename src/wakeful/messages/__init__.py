"""Provider-neutral messages: blocks, the JSON codec, converters and wire-only pairing repair.

Pure: nothing in this package does I/O. Persisted history is never rewritten by anything here;
`to_wire` builds a repaired *copy* for one request, and `drop_invalid_pairings` is the only heal
that may be written back (it only deletes). Converters (`to_*`/`from_*`, `auto_detect`) map
between these blocks and each provider's wire shape; decisions are in `docs/messages.md`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_names

if TYPE_CHECKING:
    from .._ids import new_message_id
    from ._anthropic import AnthropicPayload, from_anthropic, to_anthropic
    from ._autodetect import auto_detect
    from ._blocks import (
        REASONING_TYPES,
        AudioBlock,
        Block,
        CompactSummaryBlock,
        DocumentBlock,
        ImageBlock,
        Message,
        ProviderReasoningBlock,
        RedactedThinkingBlock,
        Role,
        ServerToolResultBlock,
        ServerToolUseBlock,
        TextBlock,
        TextOrigin,
        ThinkingBlock,
        ToolCallBlock,
        ToolResultBlock,
        ToolResultPart,
        VideoBlock,
        assistant,
        system,
        tool_result_text,
        user,
    )
    from ._codec import (
        block_from_dict,
        dump_message,
        dump_messages,
        load_message,
        load_messages,
        message_from_dict,
    )
    from ._memo import IdentityMemo, PrefixMemo, PrefixTotal, shared_prefix
    from ._openai_chat import from_openai_chat, to_openai_chat
    from ._openai_responses import from_openai_responses, to_openai_responses
    from ._pairing import PairingDrop, PairingDropKind, drop_invalid_pairings
    from ._plain import FULL_OUTPUT, RECOVERY_OF, full_output, redact_plain, result_text, speaker
    from ._redact import MOVE_RECORD, redact_system
    from ._repair import (
        DEFAULT_USER_TAIL_DIRECTIVE,
        SYNTHETIC_TOOL_RESULT,
        Repair,
        RepairKind,
        WireBuilder,
        is_wire_valid,
        to_wire,
    )
    from ._wire import MEDIA_TYPES, WireMessage, label_media

# Every name loads on first use: reading and writing the store needs only the blocks and the
# codec, and the plain readers (`redact_plain`, `result_text`) not even those (cold start,
# issue 25).
_LAZY = {
    "REASONING_TYPES": "wakeful.messages._blocks",
    "AudioBlock": "wakeful.messages._blocks",
    "Block": "wakeful.messages._blocks",
    "CompactSummaryBlock": "wakeful.messages._blocks",
    "DocumentBlock": "wakeful.messages._blocks",
    "ImageBlock": "wakeful.messages._blocks",
    "Message": "wakeful.messages._blocks",
    "ProviderReasoningBlock": "wakeful.messages._blocks",
    "RedactedThinkingBlock": "wakeful.messages._blocks",
    "Role": "wakeful.messages._blocks",
    "ServerToolResultBlock": "wakeful.messages._blocks",
    "ServerToolUseBlock": "wakeful.messages._blocks",
    "TextBlock": "wakeful.messages._blocks",
    "TextOrigin": "wakeful.messages._blocks",
    "ThinkingBlock": "wakeful.messages._blocks",
    "ToolCallBlock": "wakeful.messages._blocks",
    "ToolResultBlock": "wakeful.messages._blocks",
    "ToolResultPart": "wakeful.messages._blocks",
    "VideoBlock": "wakeful.messages._blocks",
    "assistant": "wakeful.messages._blocks",
    "new_message_id": "wakeful._ids",
    "system": "wakeful.messages._blocks",
    "tool_result_text": "wakeful.messages._blocks",
    "user": "wakeful.messages._blocks",
    "block_from_dict": "wakeful.messages._codec",
    "dump_message": "wakeful.messages._codec",
    "dump_messages": "wakeful.messages._codec",
    "load_message": "wakeful.messages._codec",
    "load_messages": "wakeful.messages._codec",
    "message_from_dict": "wakeful.messages._codec",
    "MOVE_RECORD": "wakeful.messages._redact",
    "redact_system": "wakeful.messages._redact",
    "MEDIA_TYPES": "wakeful.messages._wire",
    "WireMessage": "wakeful.messages._wire",
    "label_media": "wakeful.messages._wire",
    "FULL_OUTPUT": "wakeful.messages._plain",
    "full_output": "wakeful.messages._plain",
    "redact_plain": "wakeful.messages._plain",
    "result_text": "wakeful.messages._plain",
    "RECOVERY_OF": "wakeful.messages._plain",
    "speaker": "wakeful.messages._plain",
    "AnthropicPayload": "wakeful.messages._anthropic",
    "from_anthropic": "wakeful.messages._anthropic",
    "to_anthropic": "wakeful.messages._anthropic",
    "auto_detect": "wakeful.messages._autodetect",
    "IdentityMemo": "wakeful.messages._memo",
    "PrefixMemo": "wakeful.messages._memo",
    "PrefixTotal": "wakeful.messages._memo",
    "shared_prefix": "wakeful.messages._memo",
    "from_openai_chat": "wakeful.messages._openai_chat",
    "to_openai_chat": "wakeful.messages._openai_chat",
    "from_openai_responses": "wakeful.messages._openai_responses",
    "to_openai_responses": "wakeful.messages._openai_responses",
    "PairingDrop": "wakeful.messages._pairing",
    "PairingDropKind": "wakeful.messages._pairing",
    "drop_invalid_pairings": "wakeful.messages._pairing",
    "DEFAULT_USER_TAIL_DIRECTIVE": "wakeful.messages._repair",
    "SYNTHETIC_TOOL_RESULT": "wakeful.messages._repair",
    "Repair": "wakeful.messages._repair",
    "RepairKind": "wakeful.messages._repair",
    "WireBuilder": "wakeful.messages._repair",
    "is_wire_valid": "wakeful.messages._repair",
    "to_wire": "wakeful.messages._repair",
}


__getattr__ = lazy_names(__name__, _LAZY, globals())


__all__ = [
    "DEFAULT_USER_TAIL_DIRECTIVE",
    "MEDIA_TYPES",
    "REASONING_TYPES",
    "SYNTHETIC_TOOL_RESULT",
    "AnthropicPayload",
    "AudioBlock",
    "Block",
    "CompactSummaryBlock",
    "DocumentBlock",
    "ImageBlock",
    "Message",
    "PairingDrop",
    "PairingDropKind",
    "ProviderReasoningBlock",
    "RedactedThinkingBlock",
    "Repair",
    "RepairKind",
    "Role",
    "ServerToolResultBlock",
    "ServerToolUseBlock",
    "TextBlock",
    "TextOrigin",
    "ThinkingBlock",
    "ToolCallBlock",
    "ToolResultBlock",
    "ToolResultPart",
    "VideoBlock",
    "WireMessage",
    "assistant",
    "auto_detect",
    "block_from_dict",
    "drop_invalid_pairings",
    "IdentityMemo",
    "PrefixMemo",
    "PrefixTotal",
    "shared_prefix",
    "dump_message",
    "dump_messages",
    "from_anthropic",
    "from_openai_chat",
    "from_openai_responses",
    "is_wire_valid",
    "label_media",
    "load_message",
    "load_messages",
    "message_from_dict",
    "new_message_id",
    "system",
    "to_anthropic",
    "to_openai_chat",
    "to_openai_responses",
    "WireBuilder",
    "MOVE_RECORD",
    "FULL_OUTPUT",
    "full_output",
    "redact_plain",
    "redact_system",
    "result_text",
    "RECOVERY_OF",
    "speaker",
    "to_wire",
    "tool_result_text",
    "user",
]
