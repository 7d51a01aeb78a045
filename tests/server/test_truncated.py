"""A reply cut by the output limit is shown as truncated over HTTP: the prompt's turns, /turns,
the message's metadata and the inspector's session page."""

from __future__ import annotations

from pathlib import Path

from tests.server.conftest import MakeServer, script

CUT = [{"match": ".", "replies": [{"text": "Once upon a", "finish": "length"}]}]


def test_a_truncated_reply_is_shown_as_such(make_server: MakeServer, tmp_path: Path) -> None:
    server = make_server(model=script(tmp_path, CUT))
    c = server.client()
    made = c.post("/sessions", json={"prompt": {"text": "a story", "wait": True}}).json()
    sid = made["session"]["id"]
    assert made["admission"]["turns"][0]["truncated"] is True
    assert c.get(f"/sessions/{sid}/turns").json()["turns"][0]["truncated"] is True
    reply = c.get(f"/sessions/{sid}/messages").json()["messages"][-1]["message"]
    assert reply["metadata"]["truncated"] is True
    page = c.get(f"/ui/sessions/{sid}")
    assert page.status_code == 200
    assert page.text.count('class="truncated"') == 2  # on the reply and on its turn
