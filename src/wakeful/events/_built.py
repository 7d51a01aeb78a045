"""Messages built from bodies of today's shapes as they are stored (issue 36 item 6).

A `message.added` body of a session whose `sessions.message_shapes` is today's `SHAPES_DIGEST`
was written by `dump_event` from a model validated under today's models: its message is that
model's `model_dump_json(exclude_none=True)`. Validating it again gives back exactly what was
dumped: the fields left out (`None`, or a default a factory made) at their defaults, the JSON
arrays as the tuples the models declare, each nested object as its model (a block by its
`type`). `messages_as_stored` builds that, as pydantic's `model_construct` does (the instance's
`__dict__` in field order, its fields set, no extra and no private state), from tables derived
once per model from its fields: no validator runs and none is built. In a new process building
the message validators was ~30 ms of a 5,000-message load whose floor is ~20 ms
(docs/store.md, "Loading a transcript").

The marker is the guarantee, as for the plain read of the same rows (`plain_transcript_in`
returns them as stored): the write validated every body, and a session any of whose bodies was
written under other shapes is `'-'` for good and read through the validators. The builder still
checks what is cheap to check (an object where a model is, its keys among the model's fields,
the required ones present, a block's `type` known, a message id present); a body that fails a
check raises `NotPlain`, and the caller then validates the whole batch (`load_messages_added`),
which names the error. The one rule not re-checked is the one `shaped` does not check either: a
media block's one-of `data` or `ref` (a model validator).
"""

from __future__ import annotations

import json
import types
import typing
from collections.abc import Callable, Sequence
from functools import cache
from typing import TYPE_CHECKING, Any

from ._plain import NotPlain
from ._shapes import MESSAGE_ADDED_HEAD, MESSAGE_ADDED_HEAD_FULL

if TYPE_CHECKING:
    from pydantic import BaseModel

    from ..messages import Message

_Build = Callable[[Any], Any]

# Decodes one JSON value at an offset of a text and stops there: the message of a
# `message.added` body, without the envelope around it.
_decode_at = json.JSONDecoder().raw_decode


def messages_as_stored(bodies: Sequence[str]) -> list[Message]:
    """The messages of `message.added` bodies (opened, each beginning with one of
    `MESSAGE_ADDED_HEADS`) written under today's shapes, equal to what validating them gives;
    `NotPlain` for a body the builder does not vouch for (see the module)."""
    from ..messages import Message

    build, lean, full = _builder(Message), MESSAGE_ADDED_HEAD, len(MESSAGE_ADDED_HEAD_FULL)
    at = len(lean)
    try:
        return [
            build(_decode_at(body, at if body.startswith(lean) else full)[0]) for body in bodies
        ]
    except (ValueError, KeyError, TypeError, AttributeError) as err:  # (NotPlain: a ValueError)
        raise NotPlain(str(err)) from None


@cache
def _builder(cls: type[BaseModel]) -> _Build:
    """The function that builds an instance of `cls` from its JSON dump (a dict). Written for
    speed (it runs once per message and block): an unknown key shows as a merged dict larger
    than the fields, a missing required field as its placeholder left in it."""
    from pydantic_core import PydanticUndefined

    new = cls.__new__
    slots = {  # the instance slots' setters (BaseModel's)
        name: next(k.__dict__[name] for k in cls.__mro__ if name in k.__dict__).__set__
        for name in _SLOTS
    }
    set_dict, set_fields, set_extra, set_private = (slots[name] for name in _SLOTS)
    fields = cls.model_fields
    template = {name: info.default for name, info in fields.items()}  # (in field order)
    size = len(template)
    factories = {n: i.default_factory for n, i in fields.items() if i.default_factory}
    required = tuple(n for n, i in fields.items() if i.is_required())
    nested = tuple((n, c) for n, i in fields.items() if (c := _converter(i.annotation)) is not None)
    minted = cls.__name__ == "Message"  # an empty id would be minted by validation

    def build(value: Any) -> Any:
        data = {**template, **value}  # (a TypeError for a non-object)
        if len(data) != size:
            raise NotPlain(f"{cls.__name__}: a key no field has")
        for name in required:
            if data[name] is PydanticUndefined:
                raise NotPlain(f"{cls.__name__}.{name}: missing")
        for name, factory in factories.items():
            if name not in value:
                data[name] = factory()  # type: ignore[call-arg]
        for name, convert in nested:
            if name in value:
                data[name] = convert(data[name])
        if minted and not data["id"]:
            raise NotPlain("Message.id")
        out = new(cls)
        set_dict(out, data)
        set_fields(out, set(value))
        set_extra(out, None)
        set_private(out, None)
        return out

    return build


_SLOTS = ("__dict__", "__pydantic_fields_set__", "__pydantic_extra__", "__pydantic_private__")


def _converter(tp: Any) -> _Build | None:
    """How a field of type `tp` turns its JSON value into the validated value, or None when
    the JSON value is it (a string, a number, a JSON value, a dict of them)."""
    from pydantic import BaseModel

    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return _converter(typing.get_args(tp)[0])
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return _builder(tp)
    if origin in (typing.Union, types.UnionType):
        return _union(typing.get_args(tp))
    if origin is tuple:
        args = typing.get_args(tp)
        if len(args) != 2 or args[1] is not Ellipsis:
            raise TypeError(f"no builder for {tp!r}")
        item = _converter(args[0])
        if item is None:
            return _tuple
        return lambda value: tuple(map(item, _listed(value)))
    return None


def _listed(value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise NotPlain("not an array")
    return value


def _tuple(value: Any) -> tuple[Any, ...]:
    return tuple(_listed(value))


def _union(members: tuple[Any, ...]) -> _Build | None:
    """A union's converter: blocks by their `type` (a union of models with a literal `type`),
    an array as its tuple member, `None` as itself, anything else as it is."""
    from pydantic import BaseModel

    models = [m for m in members if isinstance(m, type) and issubclass(m, BaseModel)]
    others = [m for m in members if m not in models and m is not type(None)]
    if models:
        if others:
            raise TypeError(f"no builder for a union of models and {others!r}")
        if len(models) == 1:
            only = _builder(models[0])
            return lambda value: None if value is None else only(value)
        by_type = {m.model_fields["type"].default: _builder(m) for m in models}
        return lambda value: None if value is None else by_type[value["type"]](value)
    arrays = [c for m in others if typing.get_origin(m) is tuple and (c := _converter(m))]
    if arrays:
        array = arrays[0]
        return lambda value: array(value) if isinstance(value, list) else value
    return None
