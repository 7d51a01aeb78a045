"""Issue 16, item 6 (and the API side of item 7): hostile JSON bodies get a 4xx with a reason.

A real `wakeful serve` gets a 10 KB body nesting arrays 5,000 levels deep (the parser's
recursion limit), one nesting 65 levels (under that limit, over the API's), and strings holding
a lone surrogate; each is a 400 naming the problem, and the server goes on answering.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.server.conftest import ECHO, script
from tests.server.test_serve_cli import TOKEN, Serve, _env

HEADERS = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Serve]:
    served = Serve(
        tmp_path, "--token", TOKEN, "--model", script(tmp_path, ECHO), env=_env(tmp_path)
    )
    yield served
    assert served.stop() == 0
    assert "Traceback" not in served.output()


def nested(depth: int) -> str:
    return '{"title": "deep", "metadata": {"a": ' + "[" * depth + "]" * depth + "}}"


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (nested(5000), "the request body nests deeper than 64 levels"),
        (nested(63), "the request body nests deeper than 64 levels"),  # 65 with the two objects
        ('{"title": "a\\ud800b"}', "the request body holds a lone surrogate (U+D800)"),
        ('{"title": "t", "metadata": {"\\udfff": 1}}', "holds a lone surrogate (U+DFFF)"),
    ],
)
def test_hostile_bodies_are_a_400_with_a_reason(server: Serve, body: str, reason: str):
    assert len(nested(5000)) > 10_000
    answer = httpx.post(f"{server.url}/sessions", content=body, headers=HEADERS, timeout=30)
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"] == "bad_json"
    assert reason in answer.json()["reason"]
    assert httpx.get(f"{server.url}/health", timeout=5).status_code == 200


def test_a_body_within_the_depth_limit_is_taken(server: Serve):
    answer = httpx.post(f"{server.url}/sessions", content=nested(62), headers=HEADERS, timeout=30)
    assert answer.status_code == 201, answer.text
