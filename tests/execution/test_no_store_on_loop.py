"""No store call on the event loop (issue 35 item 4): a turn (as `wakeful run` drives it, with
an interrupt), a worker, the server and `wakeful chat` (through its pipe view) run in asyncio's debug mode with a slow-callback
threshold, over a real store whose backend records every call made from a thread that is
running an event loop. A store call on the loop fails the test, with where it came from.

The slow callbacks asyncio's debug mode logs are shown with a failure, not asserted: on a
loaded machine any callback can be slow; the recorded calls are what a regression makes.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.allow import ALLOW_WRITES
from tests.server.conftest import SENSITIVE, TOKEN, ServerThread
from wakeful.config import Config, ExecutionConfig, RetryConfig
from wakeful.execution import Runtime, off_loop, run_worker
from wakeful.store import SqlStore, open_store
from wakeful.store._postgres import PostgresBackend
from wakeful.store._sqlite import SqliteBackend

from .helpers import check_session, wait_for, write_script

SLOW_CALLBACK_S = 0.05
FAST = Config(
    permissions=ALLOW_WRITES,
    retry=RetryConfig(initial_delay_ms=5, max_delay_ms=50, poll_interval_ms=5),
    execution=ExecutionConfig(poll_interval_ms=10, lease_ms=2_000),
)
# Every way the store reaches its database (`store/_backend.py`, `Backend`).
BLOCKING = (
    "transaction",
    "admit_alone",
    "wait_for_change",
    "wait_for_work",
    "wait_for_interrupts",
)


class OnLoop:
    """The store calls made on a running event loop, each with its stack."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.slow: list[str] = []

    def report(self) -> str:
        slow = "\n".join(self.slow[:5])
        return "\n\n".join(self.calls[:4]) + (f"\n\nslow callbacks:\n{slow}" if slow else "")


@pytest.fixture
def on_loop(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> Iterator[OnLoop]:
    seen = OnLoop()

    def watched(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        def call(self: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                asyncio.get_running_loop()
            except RuntimeError:  # no loop runs in this thread: a worker thread, or sync code
                pass
            else:
                stack = "".join(traceback.format_stack(limit=9)[:-1])
                seen.calls.append(
                    f"{name} on the loop of {threading.current_thread().name}:\n{stack}"
                )
            return original(self, *args, **kwargs)

        return call

    for cls in (SqliteBackend, PostgresBackend):
        for name in BLOCKING:
            monkeypatch.setattr(cls, name, watched(f"{cls.__name__}.{name}", getattr(cls, name)))
    monkeypatch.setenv("PYTHONASYNCIODEBUG", "1")  # every loop made from now on (uvicorn's too)
    caplog.set_level(logging.WARNING, logger="asyncio")
    yield seen
    seen.slow = [r.getMessage() for r in caplog.records if "took" in r.getMessage()]


def _debug_run(main: Callable[[], Any]) -> Any:
    async def with_threshold() -> Any:
        loop = asyncio.get_running_loop()
        assert loop.get_debug()
        loop.slow_callback_duration = SLOW_CALLBACK_S
        return await main()

    return asyncio.run(with_threshold(), debug=True)


def _runtime(db: str, tmp_path: Path) -> Runtime:
    model = write_script(
        tmp_path / "script.json",
        [
            {"match": "slow", "replies": [{"text": "s l o w " * 60}]},
            {"match": ".", "replies": [{"text": "quick answer"}]},
        ],
        chunk_delay_ms=2,
        chunk_chars=4,
    )
    return Runtime(db, model=model, workspace=tmp_path, config=FAST)


def test_a_turn_run_as_the_cli_runs_it_and_an_interrupt(db_url: str, tmp_path: Path, on_loop):
    from wakeful.cli._run import _drive

    cli, rt = _runtime(db_url, tmp_path), _runtime(db_url, tmp_path)  # `_drive` closes its own

    async def main() -> str:
        sid = "ses_onloop000000000000001"
        _turns, mine = await _drive(cli, sid, "hello")
        assert mine is not None and mine.outcome == "completed"
        sent = await off_loop(rt.send, "slow one", session_id=sid, resume=False)
        streaming = asyncio.Event()
        rt.listener = lambda ev: streaming.set() if ev.kind == "text" else None
        drive = asyncio.ensure_future(rt.drive_input(sid, sent.input_id))
        await streaming.wait()
        assert await rt.ainterrupt(sid)
        assert rt.stop_local(sid) in (True, False)  # Ctrl-C's path: no store call
        await drive
        await rt.resume(sid)
        await rt.aclose()
        return sid

    sid = _debug_run(main)
    assert on_loop.calls == [], on_loop.report()
    check = Runtime(db_url, workspace=tmp_path, config=FAST)
    check_session(check.store, sid)
    check.close()


def test_a_worker(db_url: str, tmp_path: Path, on_loop):
    rt = _runtime(db_url, tmp_path)
    sids = [rt.send(f"job {n}", resume=False).session_id for n in range(3)]  # no loop runs yet

    async def main() -> None:
        await run_worker(rt, once=True, concurrency=2)
        await rt.aclose()

    _debug_run(main)
    assert on_loop.calls == [], on_loop.report()
    check = Runtime(db_url, workspace=tmp_path, config=FAST)
    for sid in sids:
        assert check_session(check.store, sid)["completed"] == 1
    check.close()


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_the_server(db_url: str, tmp_path: Path, on_loop):
    from wakeful.server import Settings, Tokens, create_app

    rt = _runtime(db_url, tmp_path)
    app = create_app(
        rt,
        tokens=Tokens([TOKEN], [SENSITIVE]),
        settings=Settings(keepalive_s=1.0, poll_ms=10),
        own_runtime=True,
    )
    server = ServerThread(app)
    server.start()
    try:
        with httpx.Client(
            base_url=f"http://127.0.0.1:{server.port}",
            timeout=30,
            headers={"Authorization": f"Bearer {TOKEN}"},
        ) as c:
            r = c.post("/sessions", json={"title": "t", "prompt": {"text": "hi", "wait": True}})
            assert r.status_code == 201, r.text
            sid = r.json()["session"]["id"]
            assert c.post(f"/sessions/{sid}/prompt", json={"text": "slow two"}).status_code == 202
            assert c.post(f"/sessions/{sid}/interrupt").status_code == 200
            for path in ("", "/messages", "/turns", "/pending", "/receipts", "/usage"):
                assert c.get(f"/sessions/{sid}{path}").status_code == 200, path
            assert c.get("/sessions").status_code == 200
            with c.stream("GET", f"/sessions/{sid}/log", params={"follow": "false"}) as log:
                assert log.status_code == 200
    finally:
        server.stop()
    assert on_loop.calls == [], on_loop.report()


def _typist(
    db: str, lines: list[tuple[str, Callable[[SqlStore], bool] | None]], pipe: int
) -> threading.Thread:
    """A thread that types `lines` into the chat's stdin, each after the one before was handled
    (its condition on the store, read here, off any loop; else a pause), then closes it."""

    def type_all() -> None:
        store = open_store(db)
        try:
            for line, then in lines:
                os.write(pipe, (line + "\n").encode())
                if then is None:
                    time.sleep(0.3)
                else:
                    wait_for(lambda: then(store), timeout=30)  # noqa: B023 (called at once)
        finally:
            store.close()
            os.close(pipe)

    return threading.Thread(target=type_all, name="typist", daemon=True)


def _turns_ended(n: int) -> Callable[[SqlStore], bool]:
    def ended(store: SqlStore) -> bool:
        rows = store.list_sessions(limit=10).sessions
        return any(len(store.events(r.id, types=("turn.ended",))) >= n for r in rows)

    return ended


def _chat(args: list[str], lines: list[tuple[str, Any]], db: str, monkeypatch: Any) -> None:
    """`wakeful chat ARGS` in this process, through its pipe view, with `lines` typed."""
    from wakeful.cli._chat import chat

    read, write = os.pipe()
    with os.fdopen(read) as stdin:
        monkeypatch.setattr(sys, "stdin", stdin)
        typist = _typist(db, lines, write)
        typist.start()
        chat.main([*args, "--db", db], standalone_mode=False)
        typist.join(timeout=30)


def test_the_chat(db_url: str, tmp_path: Path, on_loop, monkeypatch, capsys):
    """`wakeful chat` over a pipe (its `PipeView`), a scripted model: a prompt, a queued one,
    the commands that read or write the store (`/model`, `/agent`, `/mcp`, `/approve`,
    `/sessions`, `/resume` and its picker, a search, `/compact`, `/fork`, `/new`), then a
    second chat resuming the session by id. None of their store calls runs on the loop."""
    (tmp_path / ".git").mkdir()
    monkeypatch.chdir(tmp_path)
    model = write_script(tmp_path / "chat.json", [{"match": ".", "replies": [{"text": "OK!!"}]}])
    other = write_script(tmp_path / "other.json", [{"match": ".", "replies": [{"text": "B"}]}])
    lines: list[tuple[str, Any]] = [
        ("hello there", _turns_ended(1)),
        ("/model", None),
        ("/agent", None),
        ("/mcp", None),
        ("/approve", None),
        ("/queue later", _turns_ended(2)),
        ("/sessions", None),
        ("/resume", None),
        ("1", None),
        ("/resume hello", None),
        ("/compact", None),
        (f"/model {other}", None),
        ("/fork", None),
        ("/agent plan", None),
        ("/new", None),
        ("/model", None),
        ("/mcp off nothing", None),
        ("/quit", None),
    ]
    _chat(["--model", model], lines, db_url, monkeypatch)
    out = capsys.readouterr().out
    assert "OK!!" in out and "forked into ses_" in out and "resumed ses_" in out, out
    store = open_store(db_url)
    try:
        [first] = [r for r in store.list_sessions(limit=10).sessions if r.forked_from is None]
        assert len(store.events(first.id, types=("turn.ended",))) == 2
        assert store.get_session(first.id).model == other
    finally:
        store.close()
    _chat([first.id], [("/quit", None)], db_url, monkeypatch)
    assert f"resumed {first.id}" in capsys.readouterr().out
    assert on_loop.calls == [], on_loop.report()
