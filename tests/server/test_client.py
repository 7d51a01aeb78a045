"""`wakeful.client`: Client, AsyncClient and RemoteStore against a real server."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import pytest

from tests.server.conftest import SENSITIVE, TOKEN, Served
from wakeful.client import (
    ApiError,
    AsyncClient,
    Client,
    RemoteStore,
    UnauthorizedError,
)
from wakeful.errors import ConflictError, NotFoundError, UsageError
from wakeful.events import InputEnqueued
from wakeful.store import SyncMarker


def test_client_round_trip_and_error_types(server: Served):
    with Client(server.url, TOKEN) as c:
        assert c.health()["status"] == "ok"
        made = c.create_session(title="via client", prompt="hello", wait=True)
        sid = made["session"]["id"]
        assert made["admission"]["turns"][0]["outcome"] == "completed"
        assert c.get_session(sid)["title"] == "via client"
        assert [s["id"] for s in c.list_sessions(q="via client")["sessions"]] == [sid]
        c.prompt(sid, "queued", input_id="k1", delivery="queue", resume=False)
        assert (
            c.prompt(sid, "queued", input_id="k1", delivery="queue", resume=False)["created"]
            is False
        )
        with pytest.raises(ConflictError) as conflict:
            c.prompt(sid, "different", input_id="k1", resume=False)
        assert isinstance(conflict.value, ApiError) and conflict.value.status == 409
        with pytest.raises(NotFoundError):
            c.get_session("ses_missing")
        with pytest.raises(UsageError):
            c.prompt(sid, "")
        assert [i["input_id"] for i in c.pending(sid)["items"]] == ["k1"]
        assert c.turns(sid)["turns"][0]["outcome"] == "completed"
        assert c.usage(sid)["output_tokens"] > 0
        assert c.receipts(sid)["redacted"] is True
        assert c.events(sid, after=0, limit=2)["next_after"] == 2
        fork = c.fork(sid, title="forked")
        assert fork["forked_from"] == sid
        assert c.archive(fork["id"])["archived"] is True
        assert c.delete(fork["id"])["sessions"] == 1
        assert c.compact(sid, resume=False)["status"] == "pending"
        assert c.interrupt(sid)["requested"] is False  # idle: nothing written
    with Client(server.url, "wrong-token-000000") as bad, pytest.raises(UnauthorizedError):
        bad.list_sessions()
    with Client(server.url, TOKEN) as c, pytest.raises(UnauthorizedError):
        c.receipts(sid, sensitive=True)
    with Client(server.url, SENSITIVE) as s:
        assert s.receipts(sid, sensitive=True)["redacted"] is False


def test_client_log_follows_and_ends_on_idle(server: Served):
    with Client(server.url, TOKEN) as c:
        sid = c.create_session()["session"]["id"]
        c.prompt(sid, "a", resume=False)
        events = list(c.log(sid, idle_timeout=0.3))
        assert [e.event for e in events] == ["message", "message", "sync"]
        assert [e.data["seq"] for e in events[:2]] == [1, 2]
        assert list(c.log(sid, follow=False))[-1].data["seq"] == 2


class _DropsConnections(httpx.HTTPTransport):
    """Cuts every streamed response after `budget` bytes, as a flaky network would."""

    def __init__(self, budget: int) -> None:
        super().__init__()
        self.budget = budget
        self.cuts = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = super().handle_request(request)
        if "follow=true" not in str(request.url):
            return response
        transport = self
        inner = response.stream

        class Cut(httpx.SyncByteStream):
            def __iter__(self) -> Iterator[bytes]:
                sent = 0
                for chunk in inner:  # type: ignore[union-attr]
                    if sent + len(chunk) > transport.budget:
                        transport.cuts += 1
                        raise httpx.ReadError("connection cut by the test")
                    sent += len(chunk)
                    yield chunk

            def close(self) -> None:
                inner.close()  # type: ignore[union-attr]

        return httpx.Response(
            response.status_code,
            headers=response.headers,
            stream=Cut(),
            request=request,
            extensions=response.extensions,
        )


def test_client_reconnects_with_last_event_id_and_never_repeats(server: Served):
    setup = server.client()
    sid = setup.post("/sessions", json={}).json()["session"]["id"]
    for i in range(60):
        setup.post(f"/sessions/{sid}/prompt", json={"text": f"m{i}", "resume": False})
    transport = _DropsConnections(budget=3000)
    with Client(server.url, TOKEN, transport=transport) as c:
        seqs = [e.data["seq"] for e in c.log(sid, idle_timeout=0.5) if e.event == "message"]
    assert transport.cuts >= 3
    assert seqs == list(range(1, 62))


def test_remote_store_speaks_the_store_records(server: Served):
    with Client(server.url, TOKEN) as c:
        sid = c.create_session(title="remote", prompt="hello", wait=True)["session"]["id"]
    remote = RemoteStore(server.url, TOKEN)
    try:
        local = server.store
        assert remote.get_session(sid) == local.get_session(sid)
        assert remote.find_session("ses_missing") is None
        assert remote.list_sessions().sessions == local.list_sessions().sessions
        assert remote.messages(sid) == local.messages(sid)
        assert [e.seq for e in remote.events(sid)] == [e.seq for e in local.events(sid)]
        assert remote.events(sid, types=["turn.ended"])[0].type == "turn.ended"
        assert [r.request_digest for r in remote.receipts(sid)] == [
            r.request_digest for r in local.receipts(sid)
        ]
        assert remote.current_claim(sid) is None and remote.work_state(sid) == {}
        adm = remote.admit(sid, "r-1", "user", {"text": "later"}, "queue")
        assert adm.created and remote.pending(sid)[0].input_id == "r-1"
        items = list(
            remote.log(sid, after=local.high_water(sid) - 1, follow=True, idle_timeout_s=0.3)
        )
        assert isinstance(items[-1], SyncMarker) and items[-1].watermark == local.high_water(sid)
        assert isinstance(items[0].event, InputEnqueued)  # type: ignore[union-attr]
        fork = remote.fork(sid, title="f")
        remote.set_archived(fork.id)
        assert local.get_session(fork.id).archived
        assert remote.delete(fork.id).sessions == 1
        assert remote.prune(0).sessions == 0  # what hosts write: tests/store/test_store_surface.py
        with pytest.raises(UnauthorizedError):  # a blob by digest needs the sensitive scope
            remote.get_blob("0" * 64)
        with pytest.raises(UsageError):
            remote.append(sid, [])
    finally:
        remote.close()


async def test_async_client(server: Served):
    async with AsyncClient(server.url, TOKEN) as c:
        made = await c.create_session(prompt="hello", wait=True)
        sid = made["session"]["id"]
        assert (await c.get_session(sid))["status"] == "idle"
        got = []

        async def follow() -> None:
            async for e in c.log(sid, live=True, idle_timeout=0.5):
                got.append(e)

        task = asyncio.create_task(follow())
        await c.prompt(sid, "again", resume=False)
        await task
        seqs = [e.data["seq"] for e in got if e.event == "message"]
        assert seqs == list(range(1, seqs[-1] + 1)) and seqs[-1] >= 10
        assert sum(e.event == "sync" for e in got) == 1
        with pytest.raises(NotFoundError):
            await c.messages("ses_missing")
