"""The note wakeful adds when it resumes a crashed turn is labelled as a recovery note, never as
something the user wrote: in `session show`, in `wakeful chat`'s resume lines and in the
inspector's transcript (issue 38 item 11)."""

from __future__ import annotations

from pathlib import Path

from tests.cli.conftest import Wk
from tests.execution.test_recovery import call_message, crashed_turn, setup
from wakeful.cli._chat import resumed
from wakeful.events import MessageAdded, ToolCallStarted
from wakeful.execution._recovery import CONTINUATION
from wakeful.server._inspector import _env


async def test_the_recovery_note_is_not_shown_as_the_users(db_url: str, tmp_path: Path, wk: Wk):
    rt, sid = setup(db_url, tmp_path)
    tid, token = crashed_turn(rt, sid)
    rt.store.append(
        sid,
        [
            MessageAdded(message=call_message(), turn_id=tid),
            ToolCallStarted(call_id="call_1", message_id="msg_calls", name="shell", input={}),
        ],
        token,
    )
    await rt.resume(sid)
    shown = wk("session", "show", sid).stdout
    assert f"[recovery] {CONTINUATION}" in shown and "[user] job one" in shown
    assert f"[user] {CONTINUATION}" not in shown
    lines = resumed(rt, rt.store.get_session(sid), last=10)
    assert f"[recovery] {CONTINUATION[:40]}" in lines and "[user] The process" not in lines
    [note] = [(seq, m) for seq, m in enumerate(rt.store.messages(sid)) if m.text() == CONTINUATION]
    html = _env.get_template("_message.html").render(seq=note[0], m=note[1], ps=[])
    assert 'class="msg role-recovery"' in html and '<div class="who">recovery ' in html
    await rt.aclose()
