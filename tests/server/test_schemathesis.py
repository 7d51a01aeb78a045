"""schemathesis against /openapi.json: no server error, and every response as documented.

Each operation gets a bounded number of generated requests, valid and invalid, so the whole run
stays well under a minute. Half of the session ids are swapped for a real session so handlers
past the 404 run too; followed streams get `idle_timeout=0`. `negative_data_rejection` is not
run: every request here carries the token, which undoes schemathesis' negated security (auth
rejection has its own tests in test_auth.py).
"""

from __future__ import annotations

from typing import Any

import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.server.conftest import TOKEN, Served

AUTH = {"Authorization": f"Bearer {TOKEN}"}
EXAMPLES = 15  # per operation and mode: ~500 requests, a few seconds
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]


def _aim(case: Any, sid: str) -> None:
    params = case.path_parameters or {}
    if "session_id" in params and str(params["session_id"])[:1] in "abcdefghijklmnopqrstuvwxyz_":
        params["session_id"] = sid
    if case.query and str(case.query.get("follow")).lower() == "true":
        case.query["idle_timeout"] = 0


def test_api_conforms_to_its_openapi_document(server: Served) -> None:
    c = server.client()
    made = c.post("/sessions", json={"title": "target", "prompt": {"text": "hi", "wait": True}})
    sid = made.json()["session"]["id"]
    schema = schemathesis.openapi.from_url(f"{server.url}/openapi.json", headers=AUTH)
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 17
    for operation in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):

            @given(operation.as_strategy(generation_mode=mode))
            @settings(
                max_examples=EXAMPLES,
                deadline=None,
                database=None,
                suppress_health_check=list(HealthCheck),
            )
            def check(case: Any) -> None:
                _aim(case, sid)
                case.call_and_validate(base_url=server.url, headers=AUTH, checks=CHECKS, timeout=30)

            try:
                check()
            except Unsatisfiable:  # nothing of this operation can be made invalid
                if mode is GenerationMode.POSITIVE:
                    raise
