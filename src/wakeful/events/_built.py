"""Messages built from bodies of today's shapes as they are stored (issue 36 item 6).

A `message.added` body of a session whose `sessions.message_shapes` is today's `SHAPES_DIGEST`
was written by `dump_event` from a model validated under today's models: its message is that
model's `model_dump_json(exclude_none=True)`. `messages_as_stored` reads such bodies with one
validator of pydantic-core, built from a core schema derived here from the models' fields
(`_schema`), not with the models' own validators: those are built on first use from pydantic's
schema generation (`defer_build`, for cold start), ~30 ms in a new process against a
5,000-message load whose floor is ~20 ms, where deriving this schema and building its validator
takes ~1.3 ms. The validator decodes each body and builds its message and blocks in one pass
in Rust, where the only Python it runs is the models' `after` validators (docs/store.md,
"Loading a transcript": the Python builder it replaces spent ~0.9 µs of glue per object, ~19
ms for 5,000 messages, where this costs about what `json.loads` of the same bodies costs).

What it builds is what validating the body gives: each field's type, literal and length
constraints, defaults and default factories, the blocks by their `type`, the tuples the models
declare, and each model's `after` validators (a message's minted id, a media block's one-of
`data` or `ref`); an unknown key is refused. The envelope around the message is decoded, its
other members not checked (the caller read one of `MESSAGE_ADDED_HEADS` at its start, so a
lean body and one written with its `v` and `type` read alike). A body the validator refuses
raises `NotPlain`, and the caller then validates the whole batch through the models
(`load_messages_added`), which names the error. A field of a type the derivation does not know
is a `TypeError` when the schema is first derived (tests build every block kind).

The marker is the guarantee, as for the plain read of the same rows (`plain_transcript_in`
returns them as stored): the write validated every body, and a session any of whose bodies was
written under other shapes is `'-'` for good and read through the models.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable, Sequence
from functools import cache
from typing import TYPE_CHECKING, Any

from ._plain import NotPlain

if TYPE_CHECKING:
    from pydantic import BaseModel
    from pydantic_core import CoreSchema

    from ..messages import Message


def messages_as_stored(bodies: Sequence[str]) -> list[Message]:
    """The messages of `message.added` bodies (opened, each beginning with one of
    `MESSAGE_ADDED_HEADS`: lean, or with the envelope's `v` and `type` as written before)
    written under today's shapes, equal to what validating them gives; `NotPlain` for a body
    the validator refuses (see the module)."""
    from pydantic_core import ValidationError

    decode = _envelope_decoder()
    try:
        # One body at a time: one call over the batch joined as a JSON array took more CPU
        # (the joined text and every decoded envelope alive at once are fresh memory).
        return [decode(body)["message"] for body in bodies]
    except ValidationError as err:
        raise NotPlain(str(err)) from None


@cache
def _envelope_decoder() -> Callable[[str], dict[str, Any]]:
    """`validate_json` of a validator of a `message.added` body: its `message` member built
    as the models would, the envelope's other members decoded and left out."""
    from pydantic_core import SchemaValidator
    from pydantic_core import core_schema as cs

    from ..messages import Message

    message = cs.typed_dict_field(_schema(Message, {}))
    envelope = cs.typed_dict_schema({"message": message}, extra_behavior="ignore")
    return SchemaValidator(envelope).validate_json


def _schema(tp: Any, models: dict[type[BaseModel], CoreSchema]) -> CoreSchema:
    """The core schema that validates a JSON value of type `tp` as pydantic validates it for a
    field of that type (`models`: the schemas of the models derived so far)."""
    from pydantic import BaseModel, JsonValue
    from pydantic_core import core_schema as cs

    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return _schema(typing.get_args(tp)[0], models)
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return _model(tp, models)
    if origin in (typing.Union, types.UnionType):
        members = typing.get_args(tp)
        present = [m for m in members if m is not type(None)]
        inner = _schema(present[0], models) if len(present) == 1 else _union(present, models)
        return cs.nullable_schema(inner) if len(present) < len(members) else inner
    if origin is tuple:
        args = typing.get_args(tp)
        if len(args) != 2 or args[1] is not Ellipsis:
            raise TypeError(f"no schema for {tp!r}")
        return cs.tuple_schema([_schema(args[0], models)], variadic_item_index=0)
    if origin is dict and typing.get_args(tp)[0] is str:
        return cs.dict_schema(cs.str_schema(), _schema(typing.get_args(tp)[1], models))
    if origin is typing.Literal:
        return cs.literal_schema(list(typing.get_args(tp)))
    if tp is JsonValue:
        return cs.any_schema()  # (a JSON value decoded is a JSON value)
    if tp is str:
        return cs.str_schema()
    if tp is int:
        return cs.int_schema()
    if tp is bool:
        return cs.bool_schema()
    raise TypeError(f"no schema for {tp!r}")


def _model(cls: type[BaseModel], models: dict[type[BaseModel], CoreSchema]) -> CoreSchema:
    """A model's schema: its fields in order, each with its default or default factory and
    its length constraint, unknown keys refused, then its `after` model validators."""
    from annotated_types import MinLen
    from pydantic_core import core_schema as cs

    if cls in models:
        return models[cls]
    fields: dict[str, Any] = {}
    for name, info in cls.model_fields.items():
        schema = _schema(info.annotation, models)
        for rule in info.metadata:
            if not isinstance(rule, MinLen) or schema["type"] != "str":
                raise TypeError(f"no schema for {cls.__name__}.{name}'s {rule!r}")
            schema = cs.str_schema(min_length=rule.min_length)
        if info.default_factory is not None:
            schema = cs.with_default_schema(schema, default_factory=info.default_factory)
        elif not info.is_required():
            schema = cs.with_default_schema(schema, default=info.default)
        fields[name] = cs.model_field(schema)
    inner = cs.model_fields_schema(fields, model_name=cls.__name__, extra_behavior="forbid")
    out: CoreSchema = cs.model_schema(
        cls, inner, config=cs.CoreConfig(extra_fields_behavior="forbid")
    )
    decorators = cls.__pydantic_decorators__
    if decorators.field_validators or decorators.root_validators:
        raise TypeError(f"no schema for {cls.__name__}'s validators")
    for decorator in decorators.model_validators.values():
        if decorator.info.mode != "after":
            raise TypeError(f"no schema for {cls.__name__}'s {decorator.info.mode} validator")
        out = cs.no_info_after_validator_function(decorator.func, out)
    models[cls] = out
    return out


def _union(members: Sequence[Any], models: dict[type[BaseModel], CoreSchema]) -> CoreSchema:
    """A union: of models (blocks), by their `type`; else smart, as pydantic's default."""
    from pydantic import BaseModel
    from pydantic_core import core_schema as cs

    if all(isinstance(m, type) and issubclass(m, BaseModel) for m in members):
        choices = {m.model_fields["type"].default: _model(m, models) for m in members}
        return cs.tagged_union_schema(choices, discriminator="type")
    return cs.union_schema([_schema(m, models) for m in members])
