"""`session rewind --input ID` and `--message ID` take a unique id prefix, like every other id
(docs/cli.md "One grammar"; issue 38)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.conftest import Wk
from tests.cli.test_shaping import _session


def test_rewind_takes_input_and_message_id_prefixes(wk: Wk, workdir: Path, tmp_path: Path):
    sid = _session(wk, workdir, tmp_path)
    messages = json.loads(wk("session", "show", sid, "--format", "json").stdout)["messages"]
    [call] = [m for m in messages if m["blocks"][0]["type"] == "tool_call"]
    ask = next(m for m in messages if m["blocks"][0].get("text") == "make a file")

    # A message by its id without `msg_`, cut short: everything from that reply on is hidden.
    out = json.loads(
        wk("session", "rewind", sid, "--message", call["id"][4:12], "--format", "json").stdout
    )
    assert out["hidden"] == len(messages) - messages.index(call)
    wk("session", "unrevert", sid)
    # An input by a prefix with its `in_`: back to just before that prompt.
    out = json.loads(
        wk(
            "session", "rewind", sid, "--input", ask["metadata"]["input_id"][:9], "--format", "json"
        ).stdout
    )
    assert out["prompt"] == "make a file" and out["hidden"] == len(messages) - messages.index(ask)
    wk("session", "unrevert", sid)

    for args, said in [
        (("--message", "msg_"), "visible message id prefix 'msg_' is ambiguous: msg_"),
        (("--input", "in_"), "delivered input id prefix 'in_' is ambiguous: in_"),
        (("--input", "zz9"), f"no delivered input zz9 in session {sid}"),
    ]:
        done = wk("session", "rewind", sid, *args, check=False)
        assert done.returncode != 0 and said in done.stderr, done.stderr
        assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
