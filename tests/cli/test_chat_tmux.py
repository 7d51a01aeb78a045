"""`wakeful chat` on a real terminal: tmux runs it, `send-keys` types, `capture-pane` reads.

The prompt redraws while answers stream in; what the pane shows must still be every streamed
line intact (it used to show " is Tokyo." for "The capital of Japan is Tokyo."). Each test runs
its own tmux server (`-L`), so nothing is shared with the user's sessions or other tests.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from wakeful.store import open_store

TOKYO = "The capital of Japan is Tokyo."
POEM = [
    "Roses grow along the northern wall of the old stone garden, untended.",
    "The gardener left in spring and nobody has come to take his place since.",
    "Still, every morning the gate is found open, and the paths are swept.",
]
SLOW = "tick " * 80
LEDGER = "echo one >> ledger.txt"
EXPLAINED = "I will write the ledger now."


def _script(path: Path) -> str:
    path.write_text(
        json.dumps(
            {
                "chunk_chars": 3,
                "chunk_delay_ms": 30,
                "rules": [
                    {"match": "japan", "replies": [{"text": TOKYO}]},
                    {"match": "poem", "replies": [{"text": "\n".join(POEM)}]},
                    {"match": "^slow", "replies": [{"text": SLOW.strip()}]},
                    {"match": "^steer", "replies": [{"text": "Steer received."}]},
                    {
                        "match": "^ledger",
                        "replies": [
                            {"tool_calls": [{"name": "shell", "input": {"command": LEDGER}}]},
                            {"text": "Ledger written."},
                        ],
                    },
                    {
                        "match": "^explain",
                        "replies": [
                            {
                                "text": EXPLAINED,
                                "tool_calls": [{"name": "shell", "input": {"command": LEDGER}}],
                            },
                            {"text": "Ledger written."},
                        ],
                    },
                    {
                        "match": "^mcp call",
                        "replies": [
                            {"tool_calls": [{"name": "mcp__calc__record", "input": {"text": "x"}}]},
                            {"text": "MCP done."},
                        ],
                    },
                    {"match": ".", "replies": [{"text": "OK."}]},
                ],
            }
        )
    )
    return f"scripted:{path}"


class Pane:
    """One `wakeful chat` in a tmux pane of a private tmux server."""

    def __init__(self, tmp: Path, model: str, *args: str) -> None:
        self.socket = f"wk-{secrets.token_hex(4)}"
        self.tmp = tmp
        self.db = str(tmp / "chat.db")
        env = {
            "WAKEFUL_DB": self.db,
            "HOME": str(tmp),
            "XDG_CONFIG_HOME": str(tmp / ".config"),
            "TERM": "xterm-256color",
            "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
        }
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        command = shlex.join([sys.executable, "-m", "wakeful", "chat", "--model", model, *args])
        self._tmux(
            "new-session",
            "-d",
            "-x",
            "110",
            "-y",
            "45",
            f"cd {shlex.quote(str(tmp))} && env {exports} {command}; echo EXIT=$?; sleep 60",
        )
        self.wait(lambda screen: "/quit" in screen, "the help banner")

    def _tmux(self, *args: str) -> str:
        done = subprocess.run(
            ["tmux", "-L", self.socket, *args],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
        return done.stdout

    def screen(self) -> str:
        """The pane's text, wrapped lines joined, trailing blanks dropped."""
        return self._tmux("capture-pane", "-p", "-J", "-S", "-200").rstrip()

    def lines(self) -> list[str]:
        return [line.rstrip() for line in self.screen().splitlines()]

    def keys(self, *keys: str) -> None:
        self._tmux("send-keys", *keys)

    def type(self, text: str) -> None:
        self._tmux("send-keys", "-l", text)

    def send(self, text: str) -> None:
        self.type(text)
        self.keys("Enter")

    def wait(self, ready: Callable[[str], object], what: str, timeout: float = 20) -> str:
        """Poll the pane until `ready(screen)` holds (observable state, not a sleep)."""
        deadline = time.monotonic() + timeout
        while True:
            screen = self.screen()
            if ready(screen):
                return screen
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}; the pane shows:\n{screen}")
            time.sleep(0.05)

    def wait_line(self, line: str, timeout: float = 20) -> None:
        self.wait(lambda _s: line in self.lines(), f"the line {line!r}", timeout)

    def leave(self) -> str:
        """Ctrl-D on the empty prompt, once it is drawn again after the last output (a key
        pressed while prompt_toolkit prints above it arrives in cooked mode, where ^D is no
        key), then wait for the exit."""
        self.wait(lambda s: s.splitlines()[-1].rstrip() == "›", "the prompt after the output")
        self.keys("C-d")
        return self.exited()

    def exited(self) -> str:
        return self.wait(lambda s: "EXIT=" in s, "chat to exit")

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True, timeout=10)


@pytest.fixture
def pane(tmp_path: Path) -> Iterator[Callable[..., Pane]]:
    if shutil.which("tmux") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("tmux is not installed (make test installs it)")
        pytest.skip("tmux is not installed (apt-get install tmux)")
    model = _script(tmp_path / "script.json")
    made: list[Pane] = []

    def start(*args: str) -> Pane:
        made.append(Pane(tmp_path, model, *args))
        return made[-1]

    yield start
    for p in made:
        p.close()


def _session(db: str) -> tuple[str, list[str], list[str]]:
    store = open_store(db)
    try:
        [row] = store.list_sessions().sessions
        return (
            row.id,
            [m.text() for m in store.messages(row.id)],
            [t.status for t in store.turns(row.id)],
        )
    finally:
        store.close()


def test_streamed_answers_appear_intact(pane):
    chat = pane()
    chat.send("what is the capital of japan?")
    chat.wait_line(TOKYO)
    chat.send("a poem please")

    def answered(screen: str) -> bool:
        got = [line.rstrip() for line in screen.splitlines()]
        return TOKYO in got and all(line in got for line in POEM)

    # (one screen holding both answers: CI once read the pane again after the poem arrived
    # and met it without the first answer's line)
    lines = [line.rstrip() for line in chat.wait(answered, "both answers").splitlines()]
    assert lines.count(TOKYO) == 1
    assert (
        lines.index("› what is the capital of japan?") < lines.index(TOKYO) < lines.index(POEM[0])
    )
    assert [lines.index(line) for line in POEM] == list(
        range(lines.index(POEM[0]), lines.index(POEM[0]) + 3)
    )
    screen = chat.leave()
    sid, texts, _turns = _session(chat.db)
    assert f"session {sid} · resume: wakeful chat {sid}" in screen
    assert texts == ["what is the capital of japan?", TOKYO, "a poem please", "\n".join(POEM)]


def test_typing_while_it_streams_steers_and_the_answer_stays_intact(pane):
    chat = pane()
    chat.send("slow answer please")
    chat.wait(lambda s: "tick tick tick" in s, "the answer to start streaming")
    chat.type("steer: keep it short")
    chat.wait(lambda s: "› steer: keep it short" in s, "the typed steer in the prompt")
    chat.keys("Enter")
    chat.wait_line("Steer received.", timeout=30)
    joined = " ".join(chat.lines())
    assert SLOW.strip() in joined  # every tick, none cut by a redraw
    chat.leave()
    _sid, texts, turns = _session(chat.db)
    assert texts.index("steer: keep it short") < texts.index("Steer received.")
    assert turns == ["completed"]


def test_ctrl_c_interrupts_clears_typed_text_and_a_second_one_leaves(pane):
    chat = pane()
    chat.send("slow answer please")
    chat.wait(lambda s: "tick tick" in s, "the answer to start streaming")
    chat.keys("C-c")
    chat.wait(lambda s: "[interrupted] interrupted by the user" in s, "the interrupted turn")
    assert "EXIT=" not in chat.screen()
    chat.type("half a thought")
    chat.wait(lambda s: "› half a thought" in s, "the typed text")
    chat.keys("C-c")  # with text typed: clears the line, stays
    chat.wait(lambda s: "› half a thought" not in s, "the line to clear")
    chat.keys("C-c")  # an empty line, nothing running: arms
    chat.wait(lambda s: "press Ctrl-C again or Ctrl-D to leave" in s, "the hint")
    assert "EXIT=" not in chat.screen()
    chat.keys("C-c")
    screen = chat.exited()
    assert "EXIT=0" in screen and "Traceback" not in screen
    sid, _texts, turns = _session(chat.db)
    assert f"session {sid}" in screen
    assert turns == ["interrupted"]


def test_continue_and_session_resume_the_conversation(pane):
    first = pane()
    first.send("what is the capital of japan?")
    first.wait_line(TOKYO)
    first.leave()
    sid, _texts, _turns = _session(first.db)
    again = pane("--continue")
    again.wait(
        lambda s: f"resumed {sid}" in s and f"[assistant] {TOKYO}" in s, "the resumed session"
    )
    again.send("hello again")
    again.wait_line("OK.")
    again.leave()
    assert _session(first.db)[1] == ["what is the capital of japan?", TOKYO, "hello again", "OK."]
    by_id = pane("--session", sid)
    by_id.wait(lambda s: f"resumed {sid}" in s and "[assistant] OK." in s, "the session by id")
    by_id.leave()


def test_quit_during_a_turn_asks_first(pane):
    chat = pane()
    chat.send("slow answer please")
    chat.wait(lambda s: "tick tick" in s, "the answer to start streaming")
    chat.send("/quit")
    chat.wait(lambda s: "a turn is running: (i)nterrupt and quit" in s, "the question")
    chat.send("c")  # stay
    chat.wait(lambda s: "(i)nterrupt and quit" not in s.splitlines()[-1], "the question to go")
    assert "EXIT=" not in chat.screen()
    chat.send("/quit")
    chat.wait(
        lambda s: "a turn is running: (i)nterrupt and quit" in s.splitlines()[-1],
        "the question again",
    )
    chat.send("i")
    assert "EXIT=0" in chat.exited()
    assert _session(chat.db)[2] == ["interrupted"]


def test_multi_line_input_and_the_resume_picker(pane):
    chat = pane()
    chat.type("first line\\")
    chat.keys("Enter")
    chat.type("second line")
    chat.wait(lambda s: "second line" in s, "the second input line")
    chat.keys("Enter")
    chat.wait_line("OK.")
    chat.send("/new")
    chat.send("what is the capital of japan?")
    chat.wait_line(TOKYO)
    chat.send("/resume")
    chat.wait(lambda s: "resume which? 1-2" in s, "the picker")
    numbered = [line for line in chat.lines() if re.match(r"^[ *]\s+\d  ses_", line)]
    assert len(numbered) == 2 and "first line" in numbered[1]
    chat.send("2")
    chat.wait(lambda s: "[user] first line second line" in s, "the picked session")
    chat.send("one more")
    chat.wait(
        lambda s: "OK." in s.split("› one more", 1)[-1].splitlines(),
        "the answer in the picked session",
    )
    chat.leave()
    store = open_store(chat.db)
    try:
        texts = {
            r.title: [m.text() for m in store.messages(r.id)]
            for r in store.list_sessions().sessions
        }
    finally:
        store.close()
    assert texts["first line\nsecond line"] == ["first line\nsecond line", "OK.", "one more", "OK."]


def test_ctrl_c_at_an_approval_question_leaves_the_call_waiting(pane, tmp_path: Path):
    """Issue 38 item 5: Ctrl-C at the question is no denial; `/approve` decides it later and
    the call runs exactly once."""
    (tmp_path / "wakeful.toml").write_text('[permissions]\nshell = "ask"\n')
    chat = pane()
    chat.send("ledger please")
    chat.wait(lambda s: "allow? y once" in s, "the approval question")
    chat.keys("C-c")
    chat.wait(lambda s: "[paused]" in s, "the turn to pause")
    assert "left waiting" in chat.screen() and "EXIT=" not in chat.screen()
    assert not (chat.tmp / "ledger.txt").exists()
    chat.send("/approve")
    chat.wait_line("Ledger written.", timeout=30)
    chat.leave()
    assert (chat.tmp / "ledger.txt").read_text() == "one\n"


def test_the_reply_before_a_call_is_shown_before_its_approval_question(pane, tmp_path: Path):
    """Issue 38 item 11: the words a reply streams before its tool call come first, then the
    question (they used to wait in the live area and land after it)."""
    (tmp_path / "wakeful.toml").write_text('[permissions]\nshell = "ask"\n')
    chat = pane()
    chat.send("explain and write")
    # the question's lines reach the scrollback through prompt_toolkit's stdout proxy, which
    # may flush a moment after the live area shows the hint: wait for all three
    screen = chat.wait(
        lambda s: all(part in s for part in ("allow? y once", "wants to run", EXPLAINED)),
        "the question and the text",
    )
    assert screen.index(EXPLAINED) < screen.index("wants to run"), screen
    chat.send("y")
    chat.wait_line("Ledger written.", timeout=30)
    chat.leave()


def test_mcp_lists_the_servers_and_switches_one_off_for_the_session(pane, tmp_path: Path):
    """Issue 37 item 30: `/mcp` lists the servers configured here, `/mcp off NAME` switches one
    off before the session is even stored; its call then answers an error and never reaches
    the server, and the switch is the session's (durable). On main `/mcp` was unknown."""
    server = Path(__file__).parent.parent / "mcp" / "mcp_server.py"
    record = tmp_path / "record.txt"
    (tmp_path / "wakeful.toml").write_text(
        "[mcp.servers.calc]\n"
        f"command = {json.dumps([sys.executable, str(server), 'stdio'])}\n"
        f"env = {{ MCP_RECORD = {json.dumps(str(record))} }}\n"
    )
    chat = pane()
    chat.send("/mcp")
    chat.wait_line("mcp: calc on")
    chat.send("/mcp off calc")
    chat.wait_line("mcp calc: off")
    chat.send("/mcp off nope")
    chat.wait(lambda s: "no MCP server nope here (calc)" in s, "the unknown server refused")
    chat.send("mcp call")
    chat.wait_line("MCP done.", timeout=60)
    assert "switched off in this session" in chat.screen()
    chat.send("/mcp")
    chat.wait_line("mcp: calc off")
    chat.leave()
    assert not record.exists()  # the call was never sent
    store = open_store(chat.db)
    try:
        [row] = store.list_sessions().sessions
        assert store.extension_state(row.id, "mcp") == {"calc": False}
    finally:
        store.close()
