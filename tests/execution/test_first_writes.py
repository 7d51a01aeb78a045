"""A recovery batch's first commits in one transaction (`FirstWrites`, issue 36 item 4): each
member's write returns once it is durable, a lost claim fails that member alone, a member that
leaves or never writes holds the others up no longer than it must. Both backends."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from pathlib import Path

import pytest

from wakeful.errors import ClaimLostError
from wakeful.events import MessageAdded, SessionEvent
from wakeful.execution import run_worker
from wakeful.execution._first_writes import FirstWrites
from wakeful.execution._owner import host_id
from wakeful.messages import Message, TextBlock
from wakeful.store import Claim, SqlStore, fence
from wakeful.store._media import blob_digest

from .helpers import check_session, write_script
from .test_batch_recovery import DEAD, leave, orphaned


def _orphans(store: SqlStore, sids: list[str]) -> dict[str, Claim]:
    """`sids` left by a dead driver and taken over by this test: their claims."""
    for sid in sids:
        leave(store, sid, "scripted:x", "running")
    taken = store.claims.take_over(
        "me/1/1", 60_000, lambda owner: owner == DEAD, local_host=host_id()
    )
    return {c.session_id: c for c in taken}


def _note(text: str) -> list[SessionEvent]:
    return [MessageAdded(message=Message(role="user", blocks=(TextBlock(text=text),)))]


def _spy(store: SqlStore, monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Count the real store's `append` and `append_batch` calls from now on."""
    calls: Counter[str] = Counter()
    for name in ("append", "append_batch"):
        real = getattr(store, name)

        def counted(*args: object, _real: object = real, _name: str = name, **kw: object) -> object:
            calls[_name] += 1
            return _real(*args, **kw)  # type: ignore[operator]

        monkeypatch.setattr(store, name, counted)
    return calls


async def test_the_members_first_commits_are_one_transaction(
    store: SqlStore, monkeypatch: pytest.MonkeyPatch
):
    claims = _orphans(store, ["ses_a", "ses_b", "ses_c"])
    calls = _spy(store, monkeypatch)
    first = FirstWrites(store, claims, window_s=30)
    blob = b"a section of the first receipt"
    await asyncio.wait_for(
        asyncio.gather(
            *(first.write(s, _note(f"first of {s}"), fence(c), [blob]) for s, c in claims.items())
        ),
        timeout=10,  # no window waited: every member wrote
    )
    assert calls == Counter(append_batch=1)
    for sid in claims:
        assert store.messages(sid)[-1].text() == f"first of {sid}"
    assert store.get_blob(blob_digest(blob)) == blob  # stored in the same transaction
    await first.write("ses_a", _note("later"), fence(claims["ses_a"]))  # the batch went: alone
    assert calls == Counter(append_batch=1, append=1)
    assert store.messages("ses_a")[-1].text() == "later"


async def test_a_member_whose_claim_was_taken_fails_alone(
    store: SqlStore, monkeypatch: pytest.MonkeyPatch
):
    claims = _orphans(store, ["ses_a", "ses_b"])
    stolen = store.claims.acquire("ses_b", "thief/1/1", 60_000, is_dead=lambda _o: True)
    assert stolen is not None
    before = store.get_session("ses_b").last_seq
    first = FirstWrites(store, claims, window_s=30)
    ok, lost = await asyncio.gather(
        first.write("ses_a", _note("mine"), fence(claims["ses_a"])),
        first.write("ses_b", _note("not mine"), fence(claims["ses_b"])),
        return_exceptions=True,
    )
    assert ok is None and isinstance(lost, ClaimLostError)
    assert store.messages("ses_a")[-1].text() == "mine"
    assert store.get_session("ses_b").last_seq == before  # nothing written without the claim


async def test_a_member_that_leaves_or_never_writes_holds_the_others_up_no_longer(
    store: SqlStore, monkeypatch: pytest.MonkeyPatch
):
    claims = _orphans(store, ["ses_a", "ses_b", "ses_c"])
    first = FirstWrites(store, ["ses_a", "ses_b"], window_s=30)
    writing = asyncio.ensure_future(first.write("ses_a", _note("a"), fence(claims["ses_a"])))
    await asyncio.sleep(0.05)
    assert not writing.done()  # ses_b may still write with it
    first.leave("ses_b")  # its drive ended (or wrote through another unit)
    await asyncio.wait_for(writing, timeout=10)
    assert store.messages("ses_a")[-1].text() == "a"

    late = FirstWrites(store, ["ses_b", "ses_c"], window_s=0.2)
    start = time.monotonic()
    await asyncio.wait_for(late.write("ses_b", _note("b"), fence(claims["ses_b"])), timeout=10)
    assert time.monotonic() - start >= 0.2  # ses_c never wrote: the window, then alone
    assert store.messages("ses_b")[-1].text() == "b"


async def test_a_recovered_batch_writes_its_first_receipts_together(db_url: str, tmp_path: Path):
    """A worker's recovered batch: the healing in one write, the resumed turns' first
    receipts in one more (one commit per session before), every session settled whole."""
    call = {"tool_calls": [{"name": "goal_set", "input": {"goal": "g"}}]}
    model = write_script(
        tmp_path / "script.json", [{"match": ".", "replies": [call, call, {"text": "done"}]}]
    )
    sids = [f"ses_orphan_{n}" for n in range(4)]
    rt, units = orphaned(db_url, model, tmp_path, sids)
    stats = await run_worker(rt, once=True, concurrency=8)
    assert stats.taken_over == len(sids) and stats.turns == len(sids)
    assert units["write append_batch"] == 2, units  # the healing, then the first receipts
    assert units["write append"] == 0, units  # each drive's first receipt alone, before
    for sid in sids:
        check_session(rt.store, sid)
        assert [t.status for t in rt.store.turns(sid)] == ["completed"]
        receipts = [e for e in rt.store.events(sid) if e.event.type == "receipt.recorded"]
        assert receipts, sid
    await rt.aclose()
