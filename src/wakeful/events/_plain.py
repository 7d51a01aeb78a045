"""Stored event bodies read as plain JSON, with no model built: what the read-only commands
(`wakeful log`, `wakeful session show`) print, at the cost of `json.loads` (issue 25, cold
start: importing pydantic's `BaseModel` alone costs more than those commands may take).

The models stay the one definition of the schema. `_shapes.py` is derived from them
(`render_shapes`; `tests/store/test_plain_reads.py` fails when it is stale) and says, per model,
its fields in the order they are dumped, their defaults, the JSON kinds and literal values
each accepts, and the models nested in it. `shaped` uses it to turn a stored body into exactly
what `model_dump(mode="json", exclude_none=True)` of its validated model gives (defaults
filled in, the fields in their order, `null` left out) when the body is one the model accepts
as it is: every key known, every required field present, every value of the field's JSON kind
(an `int` where a `float` is declared is not: the model would convert it), each literal one of
its values, each string at least its minimum length, each item of a list of strings or
integers of that kind. Anything else raises `NotPlain`, and `event_data` then decodes that body
through the models, so a body the plain reading does not vouch for prints exactly as before,
and an unreadable one still raises `StoreError`. The one rule `shaped` does not re-check is a
media block's one-of-`data`-or-`ref` (a model validator, not a field's type): no body the store
writes breaks it (the write path validates every event), and the displays only print it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ._shapes import EVENTS, MESSAGE_ADDED_HEAD, MODELS, TYPES

REQUIRED = ...  # a field's default in `MODELS` when it has none

_LEAN = (MESSAGE_ADDED_HEAD, MESSAGE_ADDED_HEAD.encode())  # a lean body's opening (`_codec`)

_KIND = {
    str: "str",
    int: "int",
    float: "float",
    bool: "bool",
    type(None): "null",
    list: "list",
    dict: "dict",
}


class NotPlain(ValueError):
    """A stored body `shaped` does not vouch for: decode it through the models instead."""


def shaped(model: str, value: object) -> dict[str, Any]:
    """`value` (parsed JSON) as the model named `model` dumps it in JSON mode without `None`
    fields; `NotPlain` unless the model would accept `value` as it is (see the module)."""
    if not isinstance(value, dict):
        raise NotPlain(model)
    fields = MODELS[model]
    if len(value) > len(fields) or not value.keys() <= {f[0] for f in fields}:
        raise NotPlain(model)
    out: dict[str, Any] = {}
    for name, default, kinds, literals, nested, items, least in fields:
        if name not in value:
            if default is REQUIRED:
                raise NotPlain(f"{model}.{name}")
            if default is not None:
                out[name] = type(default)(default) if isinstance(default, list | dict) else default
            continue
        item = value[name]
        kind = _KIND.get(type(item), "")
        if (
            ("any" not in kinds and kind not in kinds)
            or (literals and kind == "str" and item not in literals)
            or (least and kind == "str" and len(item) < least)
            or (items and kind == "list" and any(_KIND.get(type(i)) not in items for i in item))
        ):
            raise NotPlain(f"{model}.{name}")
        if item is None:
            continue
        out[name] = _nested(nested, item) if nested and kind in ("dict", "list") else item
    if model == "Message" and not out["id"]:
        raise NotPlain("Message.id")  # the model would mint a new one
    return out


def _nested(models: tuple[str, ...], item: Any) -> Any:
    if isinstance(item, list):
        return [_nested(models, one) for one in item]
    if len(models) == 1:
        return shaped(models[0], item)
    kind = item.get("type") if isinstance(item, dict) else None
    for model in models:
        if TYPES.get(model) == kind:
            return shaped(model, item)
    raise NotPlain(f"no {kind!r} among {', '.join(models)}")


def without_defaults(model: str, data: dict[str, Any]) -> dict[str, Any]:
    """`data` (a `shaped` dump of `model`) as `model_dump(mode="json", exclude_defaults=True)`
    gives it: every field at its default left out, in the nested models too, but a block's
    `type`, which its serializer always writes (`dump_message`)."""
    out: dict[str, Any] = {}
    for name, default, _kinds, _literals, nested, _items, _least in MODELS[model]:
        if name not in data:
            continue
        item = data[name]
        if name == "type" and model in TYPES:
            out[name] = item
        elif default is REQUIRED or item != default or type(item) is not type(default):
            out[name] = _strip(nested, item) if nested else item
    return out


def _strip(models: tuple[str, ...], item: Any) -> Any:
    if isinstance(item, list):
        return [_strip(models, one) for one in item]
    if not isinstance(item, dict):
        return item
    if len(models) == 1:
        return without_defaults(models[0], item)
    return without_defaults(next(m for m in models if TYPES.get(m) == item.get("type")), item)


def event_data(body: str | bytes) -> dict[str, Any]:
    """A stored event body as `load_event(body).model_dump(mode="json", exclude_none=True)`
    gives it, read as plain JSON when `shaped` vouches for it, else through the models
    (`StoreError` for a body this version cannot read, as `load_event`)."""
    from ._sealed import open_body

    body = open_body(body)
    try:
        data = json.loads(body)
        # a lean `message.added` body (`_codec`) has no `type`: `shaped` puts the defaults back
        lean = body[: len(MESSAGE_ADDED_HEAD)] in _LEAN
        kind = "message.added" if lean else data.get("type") if isinstance(data, dict) else None
        model = EVENTS.get(str(kind))
        if model is not None:
            return shaped(model, data)
    except (NotPlain, ValueError, RecursionError):
        pass
    from ._codec import load_event

    return load_event(body).model_dump(mode="json", exclude_none=True)


@dataclass(frozen=True, slots=True)
class PlainEvent:
    """A stored event with its body as plain JSON (`event_data`): `StoredEvent` for readers
    that only print or fold it."""

    id: int
    session_id: str
    seq: int
    at_ms: int
    type: str
    data: dict[str, Any]

    def to_json(self) -> dict[str, object]:
        """The event as `StoredEvent.to_json` gives it (`wakeful log --format jsonl`)."""
        return {
            "id": self.id,
            "session_id": self.session_id,
            "seq": self.seq,
            "at_ms": self.at_ms,
            "type": self.type,
            "data": self.data,
        }


# -- deriving `_shapes.py` from the models ---------------------------------------------------


def derive_shapes() -> tuple[dict[str, str], dict[str, str], dict[str, tuple[Any, ...]]]:
    """`(EVENTS, TYPES, MODELS)` as the models define them today: each event type's model,
    each block model's `type`, and every model reachable from an event with its fields (name,
    default or `REQUIRED`, JSON kinds, literal values, nested models), in dump order."""
    from typing import get_args

    from pydantic import BaseModel

    from ..messages._blocks import Message, _Typed
    from ._types import SessionEvent

    events: dict[str, str] = {}
    types: dict[str, str] = {}
    models: dict[str, tuple[Any, ...]] = {}

    def visit(cls: type[BaseModel]) -> None:
        if cls.__name__ in models:
            return
        models[cls.__name__] = ()  # (recursion guard)
        fields = []
        for name, info in cls.model_fields.items():
            if info.default_factory is not None:
                default = _json(info.default_factory())  # type: ignore[call-arg]
            elif info.is_required() or (cls is Message and name == "id"):
                default = REQUIRED  # (`Message` mints an id for a missing one)
            else:
                default = _json(info.default)
            kinds: set[str] = set()
            literals: set[str] = set()
            nested: list[type[BaseModel]] = []
            items: set[str] = set()
            _annotation(info.annotation, kinds, literals, nested, items)
            for model in nested:
                visit(model)
            least = max((getattr(m, "min_length", 0) for m in info.metadata), default=0)
            spec = (
                name,
                default,
                tuple(sorted(kinds)),
                tuple(sorted(literals)),
                tuple(m.__name__ for m in nested),
                tuple(sorted(items)),
                least,
            )
            fields.append(spec)
        if issubclass(cls, _Typed):  # its serializer writes `type` first
            fields.sort(key=lambda f: f[0] != "type")
            types[cls.__name__] = cls.model_fields["type"].default
        models[cls.__name__] = tuple(fields)

    for cls in get_args(get_args(SessionEvent)[0]):
        events[cls.model_fields["type"].default] = cls.__name__
        visit(cls)
    return events, types, models


def _json(value: Any) -> Any:
    return json.loads(json.dumps(value))


def _annotation(
    tp: Any, kinds: set[str], literals: set[str], nested: list[Any], items: set[str]
) -> None:
    from types import NoneType, UnionType
    from typing import Annotated, Literal, Union, get_args, get_origin

    from pydantic import BaseModel, JsonValue

    origin = get_origin(tp)
    if tp is JsonValue:
        kinds.add("any")
    elif origin is Annotated:
        _annotation(get_args(tp)[0], kinds, literals, nested, items)
    elif origin in (Union, UnionType):
        for arg in get_args(tp):
            _annotation(arg, kinds, literals, nested, items)
    elif origin is Literal:
        kinds.add("str")
        literals.update(get_args(tp))
    elif origin in (tuple, list):
        kinds.add("list")
        args = get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis and args[0] in (str, int):
            items.add(_KIND[args[0]])  # a homogeneous tuple of scalars: its items' kind
        for arg in args:
            if isinstance(arg, type) and issubclass(arg, BaseModel) or get_origin(arg):
                _annotation(arg, set(), set(), nested, set())  # the models in it only
    elif origin is dict:
        kinds.add("dict")
    elif isinstance(tp, type) and issubclass(tp, BaseModel):
        kinds.add("dict")
        if tp not in nested:
            nested.append(tp)
    elif tp in _KIND:
        kinds.add("null" if tp is NoneType else _KIND[tp])
    else:
        raise TypeError(f"no JSON kind for {tp!r}")


def render_shapes() -> str:
    """The text of `_shapes.py` derived from the models (`derive_shapes`)."""
    import hashlib

    events, types, models = derive_shapes()
    lines = [
        '"""Derived from the event and message models by `_plain.render_shapes` (do not edit;',
        "`tests/store/test_plain_reads.py` fails when it differs from the models). See `_plain`.",
        '"""',
        "",
        "from typing import Any",
        "",
        "# fmt: off",
        "EVENTS: dict[str, str] = {",
        *(f"    {k!r}: {v!r}," for k, v in events.items()),
        "}",
        "TYPES: dict[str, str] = {",
        *(f"    {k!r}: {v!r}," for k, v in types.items()),
        "}",
        "# model: ((field, default or ..., JSON kinds, literal values, nested models,",
        "#          kinds of the items of a list, minimum length of a string), ...)",
        "MODELS: dict[str, tuple[tuple[Any, ...], ...]] = {",
    ]
    for name, fields in models.items():
        lines.append(f"    {name!r}: (")
        lines += [f"        {spec!r}," for spec in fields]
        lines.append("    ),")
    lines.append("}")
    text = "\n".join(lines).replace("Ellipsis", "...")
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    (_v, v, *_), (_t, kind, *_), (field, *_) = models["MessageAdded"][:3]  # in dump order
    lean = json.dumps({field: 0}, separators=(",", ":"))[:-2]
    full = json.dumps({"v": v, "type": kind}, separators=(",", ":"))[:-1] + "," + lean[1:]
    return "\n".join(
        [
            text,
            "# The shapes above, digested: `sessions.message_shapes` names the shapes a session's",
            '# message bodies were written under (docs/store.md, "Loading a transcript").',
            f"SHAPES_DIGEST = {digest!r}",
            "# How `dump_event` begins a `message.added` body: its message first, as",
            "# `model_dump_json(exclude_none=True)` wrote it, without the envelope's `v` and",
            "# `type` (the defaults; the `type` column holds it: issue 36 item 5), and since",
            "# migration 31 without the message's default `aborted`. A body written before",
            "# begins with `MESSAGE_ADDED_HEAD_FULL`; readers take both.",
            f"MESSAGE_ADDED_HEAD = {lean!r}",
            f"MESSAGE_ADDED_HEAD_FULL = {full!r}",
            "MESSAGE_ADDED_HEADS = (MESSAGE_ADDED_HEAD, MESSAGE_ADDED_HEAD_FULL)",
            "# fmt: on",
            "",
        ]
    )
