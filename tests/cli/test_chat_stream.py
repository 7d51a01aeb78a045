"""The chat's `Stream`: live events into finished lines, the streamed line, the spinner."""

from __future__ import annotations

import re

from wakeful.cli._chat_view import Stream
from wakeful.runner import LiveEvent


def ev(kind: str, **data: object) -> LiveEvent:
    return LiveEvent("ses_x", kind, data)  # type: ignore[arg-type]


def test_only_finished_lines_leave_the_stream():
    s = Stream()
    assert s.feed(ev("step", step=1, attempt=1)) == []
    assert s.status(0) == "⠋ waiting for the model"
    assert s.feed(ev("text", text="The capital of ")) == []
    assert s.status(0) is None and s.partial == "The capital of "
    assert s.feed(ev("text", text="Japan is Tokyo.\nIt is ")) == ["The capital of Japan is Tokyo."]
    assert s.partial == "It is "
    started = ev("tool_start", call_id="c", name="shell", input={"command": "ls -la"})
    assert s.feed(started) == ["It is ", "→ shell  ls -la"]
    assert s.status(1) == "⠙ running shell"
    ended = ev("tool_end", call_id="c", name="shell", is_error=True, output="ls: denied\n")
    assert s.feed(ended) == ["  ✗ shell: ls: denied"]
    assert s.feed(ev("step", step=2, attempt=1)) == []
    s.feed(ev("text", text="half"))
    assert s.feed(ev("step", step=3, attempt=1)) == ["half"]  # a new reply, a new line
    s.feed(ev("text", text="cut"))
    assert s.feed(ev("turn_end", outcome="interrupted", error="by the user")) == [
        "cut",
        "[interrupted] by the user",
    ]
    assert s.partial == "" and s.status(0) is None
    assert s.feed(ev("turn_end", outcome="completed")) == []


def test_a_retry_shows_its_deadline_and_a_countdown():
    s = Stream()
    s.feed(ev("text", text="partial"))
    lines = s.feed(ev("retry", attempt=2, delay_ms=5000, error_kind="rate_limit"))
    assert lines == ["partial", "… rate_limit: retrying in 5.0s"]
    status = s.status(0) or ""
    assert re.fullmatch(r"⠋ rate_limit: retry at \d\d:\d\d:\d\d \(in [45]s\)", status), status
    s.feed(ev("text", text="back"))
    assert s.status(0) is None
