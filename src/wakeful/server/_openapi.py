"""The OpenAPI 3.1 document, rendered from the `Op` list and the pydantic models of `_models`.

Nothing here is written twice: paths, parameters, bodies and responses all come from the ops the
app routes, and schemas from the models the handlers answer with.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from pydantic import BaseModel, ValidationError
from pydantic.json_schema import models_json_schema

from .. import __version__
from ._api import SESSION_ID_SCHEMA, Op
from ._models import ErrorOut, HealthOut

if TYPE_CHECKING:
    from pydantic._internal._dataclasses import PydanticDataclass

REF = "#/components/schemas/{model}"
ERROR_TEXT = {
    400: "Malformed request (bad JSON, bad header)",
    401: "Missing or wrong bearer token",
    403: "Not allowed for this token (a scope it lacks, CSRF)",
    404: "No such session (or item)",
    409: "Conflict: input id reused with other content, or the session is running",
    413: "Request body over the size limit",
    422: "Invalid parameters or body",
}
ALWAYS = (413, 503)
# In OpenAPI 3.1 the `schema` of text/event-stream describes one event.
SSE_EVENT = {
    "type": "object",
    "description": "A durable event (no `event`, i.e. message; `id` is its seq, or global id on /events; "
    "`data` is the event JSON), the `sync` marker (`data`: the watermark), or a `live` delta "
    "(no `id`, no replay).",
    "properties": {
        "event": {"type": "string", "enum": ["message", "sync", "live"]},
        "id": {"type": "string", "pattern": "^[0-9]+$"},
        "data": {"type": "string", "contentMediaType": "application/json"},
        "retry": {"type": "integer"},
    },
    "required": ["data"],
}  # any request may be too large; any store may be busy


Mode = Literal["validation", "serialization"]
# keyed as `models_json_schema` returns them (its key type names pydantic dataclasses too)
Refs: TypeAlias = "dict[tuple[type[BaseModel] | type[PydanticDataclass], Mode], Any]"


def _models(ops: list[Op]) -> list[tuple[type[BaseModel], Mode]]:
    seen: dict[tuple[type[BaseModel], Mode], None] = {
        (ErrorOut, "serialization"): None,
        (HealthOut, "serialization"): None,
    }
    for op in ops:
        if op.body is not None:
            seen[(op.body, "validation")] = None
        for model in (op.response, *(m for _, m in op.also.values())):
            if model is not None:
                seen[(model, "serialization")] = None
    return list(seen)


def _query_params(model: type[BaseModel]) -> list[dict[str, Any]]:
    schema = model.model_json_schema(ref_template=REF)
    out = []
    for name, prop in schema.get("properties", {}).items():
        prop = dict(prop)
        prop.pop("title", None)
        description = prop.pop("description", None)
        param: dict[str, Any] = {"name": name, "in": "query", "required": False, "schema": prop}
        if description:
            param["description"] = description
        out.append(param)
    return out


def _path_params(op: Op) -> list[dict[str, Any]]:
    params = []
    for name in re.findall(r"{(\w+)}", op.path):
        schema = op.path_schemas.get(
            name, SESSION_ID_SCHEMA if name == "session_id" else {"type": "string"}
        )
        params.append({"name": name, "in": "path", "required": True, "schema": schema})
    return params


def _json(
    refs: Refs, model: type[BaseModel] | None, mode: Mode = "serialization"
) -> dict[str, Any]:
    if model is None:
        return {}
    return {"content": {"application/json": {"schema": refs[(model, mode)]}}}


def _operation(op: Op, refs: Refs) -> dict[str, Any]:
    params = _path_params(op)
    if op.query is not None:
        params += _query_params(op.query)
    event, id_pattern = op.sse or (SSE_EVENT, "^[0-9]{1,16}$")
    if op.stream:
        params.append(
            {
                "name": "Last-Event-ID",
                "in": "header",
                "required": False,
                "schema": {"type": "string", "pattern": id_pattern},
                "description": "Resume a stream after this event id.",
            }
        )
    ok: dict[str, Any] = {"description": "OK"} | _json(refs, op.response)
    if op.stream:
        ok.setdefault("content", {})["text/event-stream"] = {"schema": event}
    if op.raw is not None:
        ok["content"] = {op.raw: {"schema": {"type": "string", "format": "binary"}}}
    responses: dict[str, Any] = {str(op.status): ok}
    for status, (text, model) in op.also.items():
        responses[str(status)] = {"description": text} | _json(refs, model)
    # a session id in the path may be a prefix, and one of several sessions is a 422
    by_id = (404, 422) if "{session_id}" in op.path else ()
    # every endpoint needs a scope (docs/access.md): a token without it is a 403
    for status in sorted({*op.errors, *ALWAYS, *by_id, 403}):
        text = ERROR_TEXT.get(status, "Store busy; retry" if status == 503 else "Error")
        responses[str(status)] = {"description": text} | _json(refs, ErrorOut)
    doc: dict[str, Any] = {
        "operationId": op.op_id,
        "summary": op.summary,
        "tags": [op.tag],
        "parameters": params,
        "responses": responses,
    }
    if op.body is not None:
        doc["requestBody"] = {"required": not _empty_accepted(op.body)} | _json(
            refs, op.body, "validation"
        )
    return doc


def _empty_accepted(body: type[BaseModel]) -> bool:
    """Whether a request without a body is taken (`_api._parse` reads an empty body as `{}`)."""
    try:
        body.model_validate({})
    except ValidationError:
        return False
    return True


def openapi_document(ops: list[Op]) -> dict[str, Any]:
    """The OpenAPI 3.1 document of the API."""
    refs, defs = models_json_schema(_models(ops), ref_template=REF)
    schemas: dict[str, Any] = defs.get("$defs", {})
    paths: dict[str, dict[str, Any]] = {}
    health = {
        "operationId": "health",
        "summary": "Liveness; needs no token.",
        "tags": ["server"],
        "security": [],
        "responses": {"200": {"description": "OK"} | _json(refs, HealthOut)},
    }
    paths["/health"] = {"get": health}
    for op in ops:
        paths.setdefault(op.path, {})[op.method.lower()] = _operation(op, refs)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "wakeful",
            "version": __version__,
            "description": "Durable sessions for LLM agents over HTTP. Every route but /health "
            "needs `Authorization: Bearer TOKEN`.",
        },
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}],
    }
