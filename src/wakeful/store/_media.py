"""Media stored once, as blobs: inline media of an admitted input becomes a blob `ref`.

An input's media blocks with inline base64 `data` are stored in the blob store (content
addressed, once per distinct content) and the payload keeps only their `ref` (the SHA-256 hex
digest of the bytes, the blob's key), so the event log holds no media bytes and the same image
sent twice is stored once. Invariant: a ref is exactly the digest `put_blob_in` gives the bytes.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache
from typing import TYPE_CHECKING, TypeAlias

from ._backend import sha256_hex

if TYPE_CHECKING:
    from pydantic import JsonValue

    from ..messages import (
        AudioBlock,
        DocumentBlock,
        ImageBlock,
        Message,
        ToolResultBlock,
        VideoBlock,
    )

    MediaBlock: TypeAlias = ImageBlock | AudioBlock | VideoBlock | DocumentBlock


def blob_digest(data: bytes) -> str:
    """The address of a blob (and a media block's `ref`): the hex SHA-256 of its bytes (the one
    place it is derived)."""
    return sha256_hex(data)


def externalize(payload: dict[str, JsonValue]) -> tuple[dict[str, JsonValue], list[bytes]]:
    """`payload` with each inline media block of its `blocks` replaced by a ref, and the bytes
    to store. A block whose `data` is not valid base64 is left as it is (the delivery rejects
    it as malformed, invariant 4); a payload without inline media is returned unchanged."""
    blocks = payload.get("blocks")
    if not isinstance(blocks, list):
        return payload, []
    out: list[JsonValue] = []
    blobs: list[bytes] = []
    for block in blocks:
        data = _inline_bytes(block)
        if data is None:
            out.append(block)
            continue
        assert isinstance(block, dict)
        blobs.append(data)
        out.append({k: v for k, v in block.items() if k != "data"} | {"ref": blob_digest(data)})
    if not blobs:
        return payload, []
    return {**payload, "blocks": out}, blobs


def _inline_bytes(block: JsonValue) -> bytes | None:
    import base64
    import binascii

    from ..messages import MEDIA_TYPES

    if not isinstance(block, dict) or block.get("type") not in MEDIA_TYPES:
        return None
    data = block.get("data")
    if not isinstance(data, str) or block.get("ref") is not None:
        return None
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return None


def media_refs(message: Message) -> Iterator[str]:
    """The blob digests the media of `message` refer to (tool results' parts included)."""
    media, result = _block_types()
    for block in message.blocks:
        if isinstance(block, media) and block.ref is not None:
            yield block.ref
        elif isinstance(block, result) and not isinstance(block.output, str):
            for part in block.output:
                if isinstance(part, media) and part.ref is not None:
                    yield part.ref


@cache
def _block_types() -> tuple[tuple[type[MediaBlock], ...], type[ToolResultBlock]]:
    """The media block types and the tool result's, imported once, on first use (the store
    does not import `messages` when it is imported; a step reads the refs of its messages)."""
    from ..messages import AudioBlock, DocumentBlock, ImageBlock, ToolResultBlock, VideoBlock

    return (ImageBlock, AudioBlock, VideoBlock, DocumentBlock), ToolResultBlock
