"""An ACP prompt (a list of content blocks) as the payload of one wakeful input (pure).

Text stays text; images and audio become media blocks (stored once, as blobs, at admission);
an embedded text resource (a file the editor attached) becomes text that names its URI; a
resource link (an @-mention the editor did not embed) becomes its URI, for the agent's tools
to read. A prompt of text alone is admitted as plain text, as `wakeful run` admits it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeAlias

from acp.schema import (
    AudioContentBlock,
    BlobResourceContents,
    EmbeddedResourceContentBlock,
    ImageContentBlock,
    ResourceContentBlock,
    TextContentBlock,
)
from pydantic import JsonValue

from ..errors import UsageError
from ..messages import AudioBlock, Block, DocumentBlock, ImageBlock, TextBlock

PromptBlock: TypeAlias = (
    TextContentBlock
    | ImageContentBlock
    | AudioContentBlock
    | ResourceContentBlock
    | EmbeddedResourceContentBlock
)


def _block(item: PromptBlock) -> Block:
    if isinstance(item, TextContentBlock):
        return TextBlock(text=item.text)
    if isinstance(item, ImageContentBlock):
        return ImageBlock(media_type=item.mime_type, data=item.data)
    if isinstance(item, AudioContentBlock):
        return AudioBlock(media_type=item.mime_type, data=item.data)
    if isinstance(item, ResourceContentBlock):
        return TextBlock(text=item.uri)
    resource = item.resource
    if isinstance(resource, BlobResourceContents):
        media = resource.mime_type or "application/octet-stream"
        if media.startswith("image/"):
            return ImageBlock(media_type=media, data=resource.blob)
        return DocumentBlock(media_type=media, data=resource.blob, name=resource.uri)
    return TextBlock(text=f"{resource.uri}:\n```\n{resource.text}\n```")


def payload(prompt: Sequence[PromptBlock]) -> dict[str, JsonValue]:
    """The input payload of `prompt`: `{"text": ...}` when it is text only, else
    `{"blocks": [...]}`. `UsageError` for an empty prompt."""
    blocks = [_block(item) for item in prompt]
    if all(isinstance(b, TextBlock) for b in blocks):
        text = "\n\n".join(b.text for b in blocks if isinstance(b, TextBlock))
        if not text.strip():
            raise UsageError("nothing to send: the prompt is empty")
        return {"text": text}
    return {"blocks": [b.model_dump(mode="json", exclude_none=True) for b in blocks]}
