"""Media by reference: blob `ref`s resolved into wire-only copies when a request is built (002
`resolveContentRef`).

A media block stored by reference (`ref`, the SHA-256 digest of its bytes in the blob store)
cannot be sent as it is; the request gets a copy of its message with the bytes inlined
(base64 `data`). The persisted message is never changed, and a message without refs is passed
through as the same object, so the incremental wire building and the scripted provider's
per-message encoding keep working. Invariant: resolving is a pure function of the message and
the blob store (blobs are content-addressed and immutable), so a receipt's request rebuilds to
the same digest.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Sequence

from ..errors import CorruptStateError, NotFoundError
from ..messages import (
    AudioBlock,
    Block,
    DocumentBlock,
    IdentityMemo,
    ImageBlock,
    Message,
    PrefixMemo,
    TextBlock,
    ToolResultBlock,
    VideoBlock,
)
from ..store import media_refs

GetBlob = Callable[[str], bytes]
_MEDIA = (ImageBlock, AudioBlock, VideoBlock, DocumentBlock)


def has_refs(message: Message) -> bool:
    """Whether any block of `message` (or part of a tool result in it) is media by reference."""
    return next(media_refs(message), None) is not None


class MediaResolver:
    """`resolver(messages)`: the messages with every media `ref` resolved from the blob store,
    memoized per message object. A missing blob raises `CorruptStateError` (a message refers to
    bytes the store lost: durable state that cannot be what it must be)."""

    def __init__(self, get_blob: GetBlob) -> None:
        self._get_blob = get_blob
        self._memo: IdentityMemo[Message, Message] = IdentityMemo(self._resolve, size=4096)
        self._prefix = PrefixMemo(self._memo, size=8)  # a step's history extends the last one

    def __call__(self, messages: Sequence[Message]) -> list[Message]:
        """`messages`, each with its refs resolved (the same object when it has none)."""
        return list(self._prefix(tuple(messages)))

    def _resolve(self, message: Message) -> Message:
        if not has_refs(message):
            return message
        blocks = tuple(self._block(b, message.id) for b in message.blocks)
        return message.model_copy(update={"blocks": blocks})

    def _block(self, block: Block, message_id: str) -> Block:
        if isinstance(block, _MEDIA):
            return self._media(block, message_id)
        if isinstance(block, ToolResultBlock) and not isinstance(block.output, str):
            parts = tuple(
                p if isinstance(p, TextBlock) else self._media(p, message_id) for p in block.output
            )
            return block.model_copy(update={"output": parts})
        return block

    def _media(
        self, block: ImageBlock | AudioBlock | VideoBlock | DocumentBlock, message_id: str
    ) -> ImageBlock | AudioBlock | VideoBlock | DocumentBlock:
        if block.ref is None:
            return block
        try:
            data = self._get_blob(block.ref)
        except NotFoundError as err:
            raise CorruptStateError(
                f"message {message_id} refers to media blob {block.ref}, which the store lacks"
            ) from err
        return block.model_copy(update={"data": base64.b64encode(data).decode(), "ref": None})
