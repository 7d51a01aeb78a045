"""Media by reference: inline media admitted with an input is stored once as a blob and the
log keeps its ref; a ref is resolved into a wire-only copy when a request is built, on the
Anthropic and OpenAI adapters; a ref whose blob is gone blocks the turn (corrupt state)."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.providers.fake_servers import (
    A_MESSAGE_STOP,
    FakeServer,
    Reply,
    a_block_start,
    a_block_stop,
    a_delta,
    a_message_delta,
    a_message_start,
    anthropic_events,
    o_chunk,
    openai_events,
)
from wakeful.config import Config, FamilyConfig, ProvidersConfig, RetryConfig
from wakeful.events import InputEnqueued
from wakeful.execution import Runtime
from wakeful.messages import ImageBlock
from wakeful.runner._prompt import verify_receipt

PNG_BYTES = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
)
PNG_B64 = base64.b64encode(PNG_BYTES).decode()
DIGEST = hashlib.sha256(PNG_BYTES).hexdigest()


@pytest.fixture
async def server() -> AsyncIterator[FakeServer]:
    async with FakeServer() as s:
        yield s


def reply(family: str, text: str) -> Reply:
    if family == "anthropic":
        return Reply(
            events=anthropic_events(
                a_message_start(),
                a_block_start(0, {"type": "text", "text": ""}),
                a_delta(0, {"type": "text_delta", "text": text}),
                a_block_stop(0),
                a_message_delta("end_turn", 3),
                A_MESSAGE_STOP,
            )
        )
    return Reply(
        events=openai_events(
            o_chunk({"role": "assistant", "content": text}),
            o_chunk({}, finish_reason="stop"),
            o_chunk(usage={"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13}),
        )
    )


def runtime(family: str, tmp_path: Path, server: FakeServer) -> Runtime:
    base = server.url if family == "anthropic" else f"{server.url}/v1"
    config = Config(
        retry=RetryConfig(initial_delay_ms=5, max_delay_ms=20, poll_interval_ms=5),
        providers=ProvidersConfig(**{family: FamilyConfig(base_url=base)}),  # type: ignore[arg-type]
    )
    model = "anthropic:claude-test" if family == "anthropic" else "openai:gpt-test"
    return Runtime(str(tmp_path / "s.db"), model=model, workspace=tmp_path, config=config)


def image_payload(**image: str) -> dict:
    return {
        "blocks": [
            {"type": "text", "text": "what is in this picture?"},
            {"type": "image", "media_type": "image/png", **image},
        ]
    }


def sent_image_data(family: str, body: dict) -> str:
    """The base64 bytes of the one image the request body carries."""
    blocks = [b for m in body["messages"] if isinstance(m["content"], list) for b in m["content"]]
    if family == "anthropic":
        [image] = [b for b in blocks if b["type"] == "image"]
        return image["source"]["data"]
    [image] = [b for b in blocks if b["type"] == "image_url"]
    return image["image_url"]["url"].split(",", 1)[1]


@pytest.mark.parametrize("family", ["anthropic", "openai"])
async def test_an_image_admitted_inline_is_stored_once_and_sent_resolved(
    family: str, tmp_path: Path, server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    rt = runtime(family, tmp_path, server)
    server.enqueue(reply(family, "a single pixel"), reply(family, "still a pixel"))
    sent = rt.send(payload=image_payload(data=PNG_B64), resume=False)
    sid = sent.session_id
    [turn] = await rt.drive_input(sid, sent.input_id)
    assert turn.outcome == "completed" and turn.final_text == "a single pixel"
    # The log holds the ref, not the bytes; the blob holds the bytes once.
    [enqueued] = [e.event for e in rt.store.events(sid, types=["inbox.enqueued"])]
    assert isinstance(enqueued, InputEnqueued)
    assert PNG_B64 not in json.dumps(enqueued.payload)
    assert enqueued.payload["blocks"][1]["ref"] == DIGEST  # type: ignore[index,call-overload]
    assert rt.store.get_blob(DIGEST) == PNG_BYTES
    [image] = [b for m in rt.store.messages(sid) for b in m.blocks if isinstance(b, ImageBlock)]
    assert (image.ref, image.data) == (DIGEST, None)
    # The request carried the bytes (a wire-only copy), and its receipt verifies.
    assert sent_image_data(family, server.requests[0].json()) == PNG_B64
    receipt = rt.store.receipts(sid)[-1]
    assert verify_receipt(rt.store, sid, receipt, rt_provider(rt, sid))
    # A second send of the same image is stored once.
    [again] = await rt.run("and again?", session_id=sid, payload=image_payload(data=PNG_B64))
    assert again.outcome == "completed"
    assert len(rt.store.messages(sid)) == 4
    await rt.aclose()


@pytest.mark.parametrize("family", ["anthropic", "openai"])
async def test_a_session_with_an_image_admitted_by_reference_runs_a_turn(
    family: str, tmp_path: Path, server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    rt = runtime(family, tmp_path, server)
    server.enqueue(reply(family, "a pixel"))
    first = rt.send("hello", resume=False)  # the session exists, then its blob
    sid = first.session_id
    digest = rt.store.put_blob(PNG_BYTES, session_id=sid)
    assert digest == DIGEST
    sent = rt.send(payload=image_payload(ref=DIGEST), session_id=sid, resume=False)
    turns = await rt.drive_input(sid, sent.input_id)
    assert turns[-1].outcome == "completed" and turns[-1].final_text == "a pixel"
    assert sent_image_data(family, server.requests[0].json()) == PNG_B64
    await rt.aclose()


async def test_a_ref_whose_blob_is_missing_blocks_the_turn(
    tmp_path: Path, server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    rt = runtime("anthropic", tmp_path, server)
    [turn] = await rt.run("look", payload=image_payload(ref="0" * 64))
    assert turn.outcome == "blocked" and turn.error_kind == "CorruptStateError"
    assert "0" * 64 in (turn.error or "")
    assert server.requests == []  # nothing was sent
    await rt.aclose()


def rt_provider(rt: Runtime, sid: str):  # type: ignore[no-untyped-def]
    return rt.provider_for(sid) if hasattr(rt, "provider_for") else _provider(rt)


def _provider(rt: Runtime):  # type: ignore[no-untyped-def]
    from wakeful.providers import make_provider

    spec = rt.model
    family = spec.split(":")[0]
    options = rt.config.providers.options_for(spec)
    options.setdefault("api_key", "k")
    assert family in ("anthropic", "openai")
    return make_provider(spec, **options)
