"""The chat's interrupting notice (issue 37 item 29): Ctrl-C on an empty line while a turn runs
here interrupts it and says so above the input at once; when the turn has ended the hint says
what a second Ctrl-C does. (In a tmux pane the interrupt lands before a screen capture can see
the first notice, so the chat's own handler is driven here, with a real runtime and turn.)"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from wakeful.cli._chat import Chat
from wakeful.cli._chat_view import Stream, View
from wakeful.execution import Runtime
from wakeful.runner import LiveEvent


class Recorded(View):
    """A view that keeps what the chat shows."""

    def __init__(self) -> None:
        self.stream = Stream()
        self.notices: list[str | None] = []

    def show(self, ev: LiveEvent) -> None:
        return None

    def say(self, text: str) -> None:
        return None

    def notice(self, text: str | None) -> None:
        self.notices.append(text)

    async def read(self, label: str = "") -> str | None:
        return None


async def test_ctrl_c_on_a_running_turn_shows_the_interrupting_notice(tmp_path: Path) -> None:
    script = tmp_path / "s.json"
    script.write_text(
        json.dumps(
            {
                "chunk_chars": 4,
                "chunk_delay_ms": 20,
                "rules": [{"match": ".", "replies": [{"text": "tick " * 200}]}],
            }
        )
    )
    rt = Runtime(str(tmp_path / "s.db"), model=f"scripted:{script}", workspace=tmp_path)
    view = Recorded()
    chat = Chat(rt, view)
    streaming = asyncio.Event()

    def listen(ev: LiveEvent) -> None:
        chat.listener(ev)
        if ev.kind == "text":
            streaming.set()

    rt.listener = listen
    turn = asyncio.ensure_future(rt.run("slow", session_id=chat.sid))
    await streaming.wait()
    assert chat.busy()
    assert chat.ctrl_c() is False  # interrupts, stays
    assert view.notices[-1] == "interrupting… (Ctrl-C again or Ctrl-D to leave)"
    [result] = await turn
    assert result.outcome == "interrupted"
    assert view.notices[-1] == "press Ctrl-C again or Ctrl-D to leave"  # the turn has ended
    assert chat.ctrl_c() is True  # armed: a second one leaves
    await rt.aclose()


async def test_model_and_agent_switch_inside_the_chat(tmp_path: Path) -> None:
    """Issue 37 item 30: `/model` and `/agent` show what the session runs with and switch it
    from the next turn (`Runtime.switch`: checked first, a recorded `session.updated`); a
    request after the switch is asked of the new model. On main both were unknown commands."""
    rules = [{"match": ".", "replies": [{"text": "from A"}]}]
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    first.write_text(json.dumps({"rules": rules}))
    second.write_text(json.dumps({"rules": [{"match": ".", "replies": [{"text": "from B"}]}]}))
    rt = Runtime(str(tmp_path / "s.db"), model=f"scripted:{first}", workspace=tmp_path)
    said: list[str] = []
    view = Recorded()
    view.say = said.append  # type: ignore[method-assign]
    chat = Chat(rt, view)
    await chat.handle("/agent plan")  # before anything is stored: the new session takes it
    [turn] = await rt.run("one", session_id=chat.sid)
    assert turn.final_text == "from A" and rt.store.get_session(chat.sid).agent == "plan"
    await chat.handle("/model")
    assert said[-1] == f"model: scripted:{first}"
    await chat.handle(f"/model scripted:{second}")
    assert said[-1] == f"model: scripted:{first} → scripted:{second}"
    await chat.handle("/agent nope")
    assert "nope" in said[-1] and rt.store.get_session(chat.sid).agent == "plan"  # unchanged
    await chat.handle("/agent build")
    [turn] = await rt.run("two", session_id=chat.sid)
    assert turn.final_text == "from B"
    row = rt.store.get_session(chat.sid)
    assert (row.model, row.agent) == (f"scripted:{second}", "build")
    assert rt.store.receipts(chat.sid)[-1].model == f"scripted:{second}"
    await rt.aclose()
