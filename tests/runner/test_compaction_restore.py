"""Recently read files restored after a summary (001), on the scripted provider over SQLite."""

from __future__ import annotations

from pathlib import Path

from wakeful.messages import TextBlock
from wakeful.providers import make_provider
from wakeful.runner import verify_receipt

from .test_compaction import PAD, SUMMARY_RULE, chat, compactions, runtime, script


def reader(*paths: str) -> dict:
    calls = [{"tool_calls": [{"name": "read_file", "input": {"path": p}}]} for p in paths]
    return {"match": "^read", "replies": [*calls, {"text": "read them"}]}


async def test_files_read_in_the_summarized_turns_come_back_with_their_current_content(
    tmp_path: Path,
):
    (tmp_path / "a.txt").write_text("alpha, as first read\n")
    (tmp_path / "gone.txt").write_text("soon deleted\n")
    (tmp_path / "b.txt").write_text("beta\n")
    model = script(
        tmp_path,
        [
            SUMMARY_RULE,
            reader("a.txt", "gone.txt", "b.txt"),
            {"match": ".", "replies": [{"text": "reply " + PAD}]},
        ],
        context_window=6000,
        max_output_tokens=500,
    )
    rt = runtime(tmp_path, model, restore_files=2)
    sid = await chat(rt, ["read the files"])
    (tmp_path / "a.txt").write_text("alpha, edited since\n")
    (tmp_path / "gone.txt").unlink()
    texts = [f"turn {i}: {PAD}" for i in range(40)]
    await chat(rt, texts, sid)

    first = compactions(rt, sid)[0]
    assert first.restored_files == ("b.txt", "a.txt")  # newest first, the deleted one skipped
    by_id = {m.id: m for m in rt.store.messages(sid)}
    summary = by_id[first.summary_message_id]
    restored = [b.text for b in summary.blocks if isinstance(b, TextBlock)]
    assert len(restored) == 2
    assert "b.txt" in restored[0] and "beta" in restored[0]
    assert "alpha, edited since" in restored[1] and "as first read" not in restored[1]

    # The next step's request carries them right after the summary, and verifies.
    provider = make_provider(model)
    after = [r for r in rt.store.receipts(sid) if first.summary_message_id in r.message_ids]
    assert after and after[0].message_ids[0] == first.summary_message_id
    assert all(verify_receipt(rt.store, sid, r, provider) for r in rt.store.receipts(sid))
    # The next summary rolls them up: they are restored again although nobody read them since.
    later = compactions(rt, sid)[1:]
    assert later and later[0].restored_files == ("b.txt", "a.txt")
    await rt.aclose()


async def test_restore_files_zero_attaches_nothing(tmp_path: Path):
    (tmp_path / "a.txt").write_text("alpha\n")
    model = script(
        tmp_path,
        [SUMMARY_RULE, reader("a.txt"), {"match": ".", "replies": [{"text": "reply " + PAD}]}],
        context_window=6000,
        max_output_tokens=500,
    )
    rt = runtime(tmp_path, model, restore_files=0)
    sid = await chat(rt, ["read it", *[f"turn {i}: {PAD}" for i in range(40)]])
    first = compactions(rt, sid)[0]
    assert first.restored_files == ()
    summary = {m.id: m for m in rt.store.messages(sid)}[first.summary_message_id]
    assert len(summary.blocks) == 1
    await rt.aclose()
