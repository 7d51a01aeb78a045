"""Receipts linear in what is new (issue 25): a receipt names the runner's previous receipt and
lists only the message ids after the prefix they share, and every receipt, stored that way or
whole (the format before), still rebuilds to the exact request it recorded."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from wakeful.config import Config
from wakeful.errors import CorruptStateError
from wakeful.events import ReceiptRecorded
from wakeful.execution import Runtime
from wakeful.providers import Provider
from wakeful.runner import verify_receipt

PAD = "lorem ipsum dolor sit amet " * 12  # ~80 tokens
SUMMARY = {"match": "Summarize the conversation", "replies": [{"text": "## Objective\n- go on"}]}


def script(tmp_path: Path, steps: int, *, pad: str = "", **top: object) -> str:
    """Every turn: `steps - 1` read-only tool calls (each `pad` long), then a text answer."""
    call = {"tool_calls": [{"name": "goal_set", "input": {"goal": "chain " + pad}}]}
    replies = [call] * (steps - 1) + [{"text": "done " + pad}]
    path = tmp_path / "script.json"
    rules = [SUMMARY, {"match": ".", "replies": replies}]
    path.write_text(json.dumps({"rules": rules, "chunk_chars": 4096, **top}))
    return f"scripted:{path}"


def runtime(tmp_path: Path, model: str, db: str | None = None, **compaction: object) -> Runtime:
    config = Config.model_validate(
        {
            "agents": {"build": {"max_steps": 1000}},
            "loop_guard": {"enabled": False},  # the same call step after step, on purpose
            "compaction": {"reserved": 500, **compaction},
            "retry": {"initial_delay_ms": 5, "max_delay_ms": 50, "poll_interval_ms": 5},
        }
    )
    db = db or str(tmp_path / "s.db")
    return Runtime(db, model=model, workspace=tmp_path, config=config)


def logged(rt: Runtime, sid: str) -> list[ReceiptRecorded]:
    """The receipts exactly as the log holds them (a base and a delta, or whole)."""
    out = [e.event for e in rt.store.events(sid, types=["receipt.recorded"])]
    assert all(isinstance(r, ReceiptRecorded) for r in out)
    return out  # type: ignore[return-value]


def check_all(rt: Runtime, sid: str, provider: Provider) -> list[ReceiptRecorded]:
    """Every receipt of the session rebuilds to its digest, both as logged (expanded through
    its chain) and as `receipts()` hands it out; both give the same ids."""
    raw = logged(rt, sid)
    expanded = rt.store.receipts(sid)
    assert [r.receipt_id for r in raw] == [r.receipt_id for r in expanded]
    for r, full in zip(raw, expanded, strict=True):
        assert full.base is None
        assert rt.store.receipt_message_ids(sid, r.receipt_id) == full.message_ids
        assert verify_receipt(rt.store, sid, r, provider), r.receipt_id
        assert verify_receipt(rt.store, sid, full, provider), r.receipt_id
    return raw


def receipt_bytes(db: Path, sid: str) -> int:
    with sqlite3.connect(db) as conn:
        [(n,)] = conn.execute(
            "SELECT SUM(LENGTH(data)) FROM events "
            "WHERE session_id = ? AND type = 'receipt.recorded'",
            (sid,),
        ).fetchall()
    return int(n)


async def long_turn(tmp_path: Path, steps: int) -> tuple[Runtime, str, int]:
    folder = tmp_path / str(steps)
    folder.mkdir()
    rt = runtime(folder, script(folder, steps))
    [turn] = await rt.run("go")
    assert turn.outcome == "completed" and turn.steps == steps
    sid = rt.store.list_sessions().sessions[0].id
    return rt, sid, receipt_bytes(folder / "s.db", sid)


@pytest.mark.usefixtures("own_keys")  # plain: it sizes the stored JSON, not sealed text
async def test_a_turn_s_receipts_grow_linearly_with_its_steps(tmp_path: Path):
    rt200, sid200, b200 = await long_turn(tmp_path, 200)
    rt400, sid400, b400 = await long_turn(tmp_path, 400)
    # Whole lists would give ~4x (the history grows with the steps); a delta each gives ~2x.
    assert 1.8 < b400 / b200 < 2.3, (b200, b400)
    assert b400 / 400 < 1000  # bytes per receipt: constant, not ~40 per message of history
    raw = logged(rt400, sid400)
    assert raw[0].base is None and all(r.base is not None for r in raw[1:])
    assert all(len(r.message_ids) <= 2 for r in raw[1:])  # the reply and its tool result
    provider = rt400.build_provider(rt400.model)
    for r in (raw[1], raw[200], raw[-1]):  # the longest chain included
        assert verify_receipt(rt400.store, sid400, r, provider)
    last = rt400.store.receipts(sid400)[-1]
    assert len(last.message_ids) == 1 + 2 * 399
    assert last.message_ids == tuple(m.id for m in rt400.store.messages(sid400))[:-1]
    await rt200.aclose()
    await rt400.aclose()


async def test_receipts_rebuild_across_compactions(tmp_path: Path, db_url: str):
    model = script(
        tmp_path, 12, pad=PAD, context_window=6100, max_output_tokens=500
    )  # tools included
    rt = runtime(tmp_path, model, db_url)
    [_turn] = await rt.run(f"turn 0: {PAD}")
    sid = rt.store.list_sessions().sessions[0].id
    for i in range(1, 6):
        [turn] = await rt.run(f"turn {i}: {PAD}", session_id=sid)
        assert turn.outcome == "completed"
    ended = rt.store.events(sid, types=["compaction.ended"])
    assert len(ended) >= 2
    raw = check_all(rt, sid, rt.build_provider(model))
    # A compaction inside a turn: its summary request extends the step before it, the step
    # after it starts a new epoch (the summary first: no shared prefix) and the rest extend it.
    kinds = [(r.purpose, r.base is not None) for r in raw]
    at = kinds.index(("compaction", True))
    assert kinds[at + 1] == ("step", False) and kinds[at + 2] == ("step", True)
    summaries = {e.event.summary_message_id for e in ended}  # type: ignore[union-attr]
    assert rt.store.receipts(sid)[at + 1].message_ids[0] in summaries
    await rt.aclose()


async def test_receipts_rebuild_after_hiding_editing_and_rewinding(tmp_path: Path, db_url: str):
    model = script(tmp_path, 3)
    rt = runtime(tmp_path, model, db_url)
    [_one] = await rt.run("first prompt")
    sid = rt.store.list_sessions().sessions[0].id
    [two] = await rt.run("second prompt", session_id=sid)
    [three] = await rt.run("third prompt", session_id=sid)
    text_id = rt.store.messages(sid)[5].id  # turn one's answer: later receipts carry it
    revision = rt.store.get_session(sid).last_seq
    stored = rt.store.shaping.edit_history(
        sid, revision=revision, message_id=text_id, text="edited"
    )
    rt.store.shaping.edit_history(sid, revision=stored.seq, delete_turn=two.turn_id)
    await rt.rewind(sid, turn_id=three.turn_id)
    [four] = await rt.run("fourth prompt", session_id=sid)
    assert four.outcome == "completed" and four.steps == 3
    raw = check_all(rt, sid, rt.build_provider(model))
    assert sum(r.base is not None for r in raw) == 8  # all but each turn's first
    sent = rt.store.receipts(sid)[-1].message_ids
    assert text_id in sent and len(sent) == 6 + 5  # turn one, edited, and four so far
    await rt.aclose()


async def test_a_fork_records_and_rebuilds_its_own_chain(tmp_path: Path, db_url: str):
    model = script(tmp_path, 5)
    rt = runtime(tmp_path, model, db_url)
    [_one] = await rt.run("first prompt")
    sid = rt.store.list_sessions().sessions[0].id
    fork = rt.fork(sid).id
    [turn] = await rt.run("in the fork", session_id=fork)
    assert turn.outcome == "completed"
    provider = rt.build_provider(model)
    raw = check_all(rt, fork, provider)
    assert raw[0].base is None and all(r.base is not None for r in raw[1:])
    assert {r.base[0] for r in raw[1:] if r.base} <= {r.receipt_id for r in raw}
    check_all(rt, sid, provider)  # the parent's chain is its own, untouched
    await rt.aclose()


async def test_the_turns_of_one_drain_extend_each_other(tmp_path: Path, db_url: str):
    model = script(tmp_path, 2)
    rt = runtime(tmp_path, model, db_url)
    [_first] = await rt.run("first prompt")
    sid = rt.store.list_sessions().sessions[0].id
    for text in ("second prompt", "third prompt"):
        rt.send(text, session_id=sid, delivery="queue", resume=False)
    turns = await rt.drive(sid)
    assert len(turns) == 2 and all(t.outcome == "completed" for t in turns)
    raw = check_all(rt, sid, rt.build_provider(model))
    firsts = [next(r for r in raw if r.turn_id == t.turn_id) for t in turns]
    assert firsts[0].base is None  # a new drain starts whole
    assert firsts[1].base is not None  # the next turn of the same drain extends the last one
    await rt.aclose()


async def test_whole_receipts_and_receipts_with_a_base_read_side_by_side(
    tmp_path: Path, db_url: str
):
    model = script(tmp_path, 3)
    rt = runtime(tmp_path, model, db_url)
    [_one] = await rt.run("first prompt")
    sid = rt.store.list_sessions().sessions[0].id
    provider = rt.build_provider(model)
    newest = rt.store.receipts(sid)[-1]
    # as every receipt was stored before: the whole list, no base
    whole = newest.model_copy(update={"receipt_id": "rcp_whole"})
    kept = len(whole.message_ids) - 2
    delta = newest.model_copy(
        update={
            "receipt_id": "rcp_delta",
            "base": ("rcp_whole", kept),
            "message_ids": newest.message_ids[kept:],
        }
    )
    rt.store.append(sid, [whole, delta])
    assert verify_receipt(rt.store, sid, whole, provider)
    assert verify_receipt(rt.store, sid, delta, provider)
    assert rt.store.receipt_message_ids(sid, "rcp_delta") == newest.message_ids
    check_all(rt, sid, provider)
    # a base that is not an earlier receipt of the session is a corrupt log, said so
    dangling = delta.model_copy(update={"receipt_id": "rcp_dangling", "base": ("rcp_nope", 1)})
    too_long = delta.model_copy(update={"receipt_id": "rcp_long", "base": ("rcp_whole", 999)})
    rt.store.append(sid, [dangling, too_long])
    for rid in ("rcp_dangling", "rcp_long"):
        with pytest.raises(CorruptStateError):
            rt.store.receipt_message_ids(sid, rid)
    with pytest.raises(CorruptStateError):
        rt.store.receipts(sid)
    await rt.aclose()


def test_a_receipt_names_its_history_whether_it_extends_the_base_or_not() -> None:
    """`make_receipt` against a chain's base: a history that starts with the base's messages
    (the same objects, or an equal stored copy) lists the ids after them; one that differs in
    the middle, is shorter, or starts elsewhere is compared id by id. Expanded through the
    base, every receipt names exactly its history."""
    from wakeful.messages import assistant, user
    from wakeful.runner._prompt import ReceiptChain, make_receipt

    a, b, c, d = user("a"), assistant("b"), user("c"), assistant("d")
    first = make_receipt(
        [], [a, b], "0", receipt_id="r0", turn_id="t", step=1, attempt=1, model="m"
    )
    chain = ReceiptChain()
    chain.committed(first, [a, b])
    histories = [
        [a, b, c, d],  # extends the base
        [a, b.model_copy(), c],  # its newest message replaced by an equal copy
        [a, assistant("other"), c],  # differs in the middle
        [a],  # shorter
        [c, d],  # starts elsewhere
    ]
    for history in histories:
        base = chain.last
        assert base is not None
        receipt = make_receipt(
            [], history, "0", receipt_id="r1", turn_id="t", step=2, attempt=1, model="m", base=base
        )
        kept = 0 if receipt.base is None else receipt.base[1]
        assert base.message_ids[:kept] + receipt.message_ids == tuple(m.id for m in history)
    assert chain.last is not None and chain.last.messages == (a, b)
