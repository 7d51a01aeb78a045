"""The hot route's shortcuts answer exactly what the plain path answered: the same bytes and
headers from `respond` and `error_response`, the same route for every path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import BaseModel, JsonValue
from starlette.responses import JSONResponse
from starlette.routing import Match

from tests.server.conftest import Served
from wakeful.execution import Runtime
from wakeful.server import Tokens, create_app
from wakeful.server._api import Json, error_response, plain_json, respond
from wakeful.server._app import HOT_OPS
from wakeful.server._models import AdmissionOut, ErrorOut, TurnSummaryOut

NASTY = 'q"b\\s/ \x00\x01\x1f\x7f\n\r\t\b\f é 中文 😀 \u2028\u2029 </script>'


def _plain_response(model: BaseModel, status: int) -> JSONResponse:
    """What `respond` answered before its shortcut."""
    return JSONResponse(model.model_dump(mode="json"), status_code=status)


def _turn(**kw: Any) -> TurnSummaryOut:
    base: dict[str, Any] = {
        "turn_id": "turn_1",
        "outcome": "completed",
        "steps": 3,
        "input_tokens": 2**40,
        "output_tokens": 0,
        "error": None,
        "final_text": NASTY,
        "truncated": False,
    }
    return TurnSummaryOut(**(base | kw))


@pytest.mark.parametrize(
    "model",
    [
        AdmissionOut(session_id="ses_1", input_id="inp_1", created=True, status="pending"),
        AdmissionOut(
            session_id=NASTY,
            input_id="",
            created=False,
            status="delivered",
            turns=[_turn(), _turn(error=NASTY, truncated=True, steps=-1)],
        ),
        AdmissionOut(session_id="s", input_id="i", created=True, status="x", turns=[]),
        ErrorOut(error="not_found", reason=NASTY),
    ],
)
def test_respond_gives_the_bytes_and_headers_of_a_json_response(model: BaseModel):
    assert plain_json(type(model))  # these take pydantic's one-step JSON
    for status in (200, 202):
        fast, plain = respond(model, status), _plain_response(model, status)
        assert fast.body == plain.body
        assert fast.raw_headers == plain.raw_headers
        assert fast.status_code == plain.status_code


class _Floats(BaseModel):
    ratio: float
    inner: list[int]


class _Free(BaseModel):
    data: dict[str, JsonValue]


class _Nested(BaseModel):
    ok: str
    more: _Floats | None = None


def test_models_with_floats_or_free_json_keep_the_json_module():
    # pydantic writes 1e-7 where json writes 1e-07: such models must not take the shortcut
    assert not plain_json(_Floats)
    assert not plain_json(_Free)
    assert not plain_json(_Nested)
    for model in (
        _Floats(ratio=1e-7, inner=[1]),
        _Free(data={"x": 1e16, "s": NASTY}),
        _Nested(ok="y", more=_Floats(ratio=0.1, inner=[])),
    ):
        fast, plain = respond(model, 200), _plain_response(model, 200)
        assert fast.body == plain.body
        assert fast.raw_headers == plain.raw_headers
    assert b"1e-07" in respond(_Floats(ratio=1e-7, inner=[]), 200).body


def test_json_renders_as_json_response_and_refuses_nan_alike():
    for content in ({"a": [1, 2.5, None, True], "b": NASTY, "c": {"d": 1e100}}, [], "x", 3):
        assert Json(content).body == JSONResponse(content).body
    for bad in (float("nan"), float("inf")):
        with pytest.raises(ValueError):
            JSONResponse({"x": bad})
        with pytest.raises(ValueError):
            Json({"x": bad})
    err = error_response(503, "busy", NASTY, **{"Retry-After": "1"})
    plain = JSONResponse(
        {"error": "busy", "reason": NASTY}, status_code=503, headers={"Retry-After": "1"}
    )
    assert (err.body, err.raw_headers) == (plain.body, plain.raw_headers)


def test_hot_routes_come_first_and_no_other_route_matches_their_paths(tmp_path: Path):
    app = create_app(Runtime(str(tmp_path / "s.db"), model="local"), tokens=Tokens(["t" * 12]))
    routes = app.router.routes
    first = [getattr(r, "name", None) for r in routes[: len(HOT_OPS)]]
    assert set(first) == HOT_OPS
    # Moving a route ahead of others changes nothing only if no other route matches (fully or
    # by path alone, which decides a 405's Allow header) a path the hot route matches.
    samples = {"prompt": ["/sessions/ses_1/prompt", "/sessions/x/prompt", "/sessions/-/prompt"]}
    assert set(samples) == HOT_OPS
    for name, paths in samples.items():
        for path in paths:
            for method in ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"):
                scope = {"type": "http", "method": method, "path": path, "root_path": ""}
                matched = [
                    getattr(r, "name", None) for r in routes if r.matches(scope)[0] != Match.NONE
                ]
                assert matched == [name], (method, path, matched)


def test_prompt_route_answers_as_before(server: Served):
    c = server.client()
    sid = c.post("/sessions", json={}).json()["session"]["id"]
    r = c.post(f"/sessions/{sid}/prompt", json={"text": "hi", "resume": False})
    assert r.status_code == 202
    assert r.headers["content-type"] == "application/json"
    assert int(r.headers["content-length"]) == len(r.content)
    assert r.headers["x-frame-options"] == "DENY"
    body = r.json()
    assert r.content == AdmissionOut(**body).model_dump_json().encode()
    assert body["session_id"] == sid and body["created"] and body["turns"] is None
    # a wrong method is still a 405 naming the one allowed, through the app's handler
    r = c.get(f"/sessions/{sid}/prompt")
    assert r.status_code == 405
    assert r.headers["allow"] == "POST"
    assert r.json()["error"] == "method_not_allowed"
    # and the errors of the handler's path are unchanged
    r = c.post("/sessions/ses_nope/prompt", json={"text": "hi", "resume": False})
    assert (r.status_code, r.json()["error"]) == (404, "not_found")
    bad = {"content-type": "application/json"}
    r = c.post(f"/sessions/{sid}/prompt", content=b"{", headers=bad)
    assert (r.status_code, r.json()["error"]) == (400, "bad_json")
    r = c.post(f"/sessions/{sid}/prompt", json={"text": 3})
    assert (r.status_code, r.json()["error"]) == (422, "invalid")
    r = httpx.post(f"{server.url}/sessions/{sid}/prompt", json={"text": "hi"})
    assert r.status_code == 401
