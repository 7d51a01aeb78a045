"""The one JSON codec of the message model. Persisted messages go through here and nowhere else."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache

from pydantic import TypeAdapter, ValidationError

from ..errors import InvalidMessageError
from ._blocks import Block, Message


# Built on first use, not at import: a command that decodes no message pays nothing.
@cache
def _messages() -> TypeAdapter[list[Message]]:
    return TypeAdapter(list[Message])


@cache
def _block() -> TypeAdapter[Block]:
    return TypeAdapter(Block)


def _invalid(err: ValidationError, prefix: str) -> InvalidMessageError:
    first = err.errors()[0]
    where = ".".join(str(p) for p in first["loc"])
    return InvalidMessageError(first["msg"], field=f"{prefix}{where}" if where else prefix or None)


def dump_message(message: Message) -> str:
    """Encode one message as compact JSON (fields at their defaults are left out)."""
    return message.model_dump_json(exclude_defaults=True)


def load_message(data: str | bytes) -> Message:
    """Decode one message; raise `InvalidMessageError` naming the first bad field."""
    try:
        return Message.model_validate_json(data)
    except ValidationError as err:
        raise _invalid(err, "") from None


def dump_messages(messages: Sequence[Message]) -> str:
    """Encode a list of messages as one JSON array."""
    return _messages().dump_json(list(messages), exclude_defaults=True).decode()


def load_messages(data: str | bytes) -> list[Message]:
    """Decode a JSON array of messages; raise `InvalidMessageError` naming the bad field."""
    try:
        return _messages().validate_json(data)
    except ValidationError as err:
        raise _invalid(err, "") from None


def message_from_dict(data: object) -> Message:
    """Validate a Python dict (already-parsed JSON) into a message."""
    try:
        return Message.model_validate(data)
    except ValidationError as err:
        raise _invalid(err, "") from None


def block_from_dict(data: object) -> Block:
    """Validate a Python dict into a block."""
    try:
        return _block().validate_python(data)
    except ValidationError as err:
        raise _invalid(err, "") from None
