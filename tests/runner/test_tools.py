"""Built-in tools, permissions and `run_tool_call` on real files and real subprocesses."""

from __future__ import annotations

import asyncio
import hashlib
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from wakeful.messages import ToolCallBlock, ToolResultBlock
from wakeful.runner.tools import (
    MAX_RESULT_BYTES,
    READ_ONLY_TOOLS,
    WORK_STATE_TOOLS,
    PermissionPolicy,
    ToolContext,
    ToolOutcome,
    builtin_tools,
    cap_result,
    run_tool_call,
    tool_spec,
)
from wakeful.runner.tools._cap import DROPPED, MAX_KEPT_BYTES
from wakeful.runner.tools._files import MAX_LIST, MAX_MATCHES, MAX_READ_BYTES, MAX_READ_LINES

TOOLS = builtin_tools()


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


@pytest.fixture
def ctx(ws: Path) -> ToolContext:
    return ToolContext(workspace=ws, session_id="ses_test")


async def call(
    ctx: ToolContext,
    name: str,
    *,
    policy: PermissionPolicy | None = None,
    ask: Any = None,
    tools: Any = None,
    **args: Any,
) -> tuple[ToolResultBlock, ToolOutcome]:
    block = ToolCallBlock(id="call_1", name=name, input=args)
    result, outcome = await run_tool_call(
        TOOLS if tools is None else tools, block, ctx, policy or PermissionPolicy(), ask
    )
    assert result.call_id == "call_1"
    assert (result.output, result.is_error) == (outcome.output, outcome.is_error)
    return result, outcome


async def ok(ctx: ToolContext, name: str, **args: Any) -> str:
    result, _ = await call(ctx, name, **args)
    assert not result.is_error, result.output
    assert isinstance(result.output, str)
    return result.output


async def fails(ctx: ToolContext, name: str, **args: Any) -> str:
    result, _ = await call(ctx, name, **args)
    assert result.is_error, result.output
    assert isinstance(result.output, str)
    return result.output


# -- the contract: names and input fields ------------------------------------------------------

FIELDS = {
    "read_file": ({"path"}, {"offset", "limit"}),
    "write_file": ({"path", "content"}, set()),
    "edit_file": ({"path", "old", "new"}, set()),
    "list_files": (set(), {"path"}),
    "grep": ({"pattern"}, {"path"}),
    "shell": ({"command"}, {"timeout_s"}),
    "todo_write": ({"todos"}, set()),
    "plan_write": ({"plan"}, set()),
    "goal_set": ({"goal"}, set()),
}


@pytest.mark.parametrize("name", sorted(FIELDS))
def test_input_schema_uses_the_contract_field_names(name: str):
    spec = tool_spec(TOOLS[name])
    required, optional = FIELDS[name]
    assert spec.name == name and spec.description
    assert set(spec.input_schema["properties"]) == required | optional  # type: ignore[arg-type]
    assert set(spec.input_schema.get("required", [])) == required  # type: ignore[arg-type]
    assert spec.input_schema["additionalProperties"] is False


def test_builtin_tools_and_read_only_names():
    assert set(TOOLS) == set(FIELDS)
    assert set(READ_ONLY_TOOLS) == {n for n, t in TOOLS.items() if t.read_only}
    assert set(WORK_STATE_TOOLS) <= set(READ_ONLY_TOOLS)
    assert "task" in builtin_tools(delegation=True)


# -- read_file ---------------------------------------------------------------------------------


async def test_read_file_returns_the_exact_text(ctx: ToolContext, ws: Path):
    (ws / "a.txt").write_text("alpha\nbeta\r\ngamma")
    assert await ok(ctx, "read_file", path="a.txt") == "alpha\nbeta\r\ngamma"
    (ws / "empty.txt").write_text("")
    assert "empty" in await ok(ctx, "read_file", path="empty.txt")


async def test_read_file_offset_and_limit(ctx: ToolContext, ws: Path):
    (ws / "n.txt").write_text("".join(f"line{i}\n" for i in range(1, 11)))
    text = await ok(ctx, "read_file", path="n.txt", offset=3, limit=2)
    assert text.startswith("line3\nline4\n") and "line5" not in text
    assert "offset=5" in text
    assert await ok(ctx, "read_file", path="n.txt", offset=9) == "line9\nline10\n"
    assert "past the end" in await fails(ctx, "read_file", path="n.txt", offset=50)


async def test_read_file_caps_lines_and_bytes(ctx: ToolContext, ws: Path):
    (ws / "long.txt").write_text("".join(f"{i}\n" for i in range(1, MAX_READ_LINES + 500)))
    text = await ok(ctx, "read_file", path="long.txt")
    assert f"\n{MAX_READ_LINES}\n" in text and f"\n{MAX_READ_LINES + 1}\n" not in text
    assert f"offset={MAX_READ_LINES + 1}" in text
    (ws / "wide.txt").write_text(("x" * 1023 + "\n") * 200)
    text = await ok(ctx, "read_file", path="wide.txt")
    assert len(text.encode()) < MAX_READ_BYTES + 200 and "offset=65" in text
    (ws / "one.txt").write_text("y" * (MAX_READ_BYTES * 3))
    text = await ok(ctx, "read_file", path="one.txt")
    assert "was cut" in text and len(text) < MAX_READ_BYTES + 200


async def test_read_file_errors(ctx: ToolContext, ws: Path):
    assert "no such file: nope.txt" in await fails(ctx, "read_file", path="nope.txt")
    (ws / "d").mkdir()
    assert "d is a directory, not a regular file" in await fails(ctx, "read_file", path="d")
    (ws / "b.bin").write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0" + bytes(range(256)))
    assert "binary file" in await fails(ctx, "read_file", path="b.bin")


# -- write_file and edit_file ------------------------------------------------------------------


async def test_write_file_creates_directories_and_overwrites(ctx: ToolContext, ws: Path):
    assert "created" in await ok(ctx, "write_file", path="new/deep/f.txt", content="héllo")
    assert (ws / "new/deep/f.txt").read_text(encoding="utf-8") == "héllo"
    assert "overwrote" in await ok(ctx, "write_file", path="new/deep/f.txt", content="x\r\ny")
    assert (ws / "new/deep/f.txt").read_bytes() == b"x\r\ny"
    assert "directory" in await fails(ctx, "write_file", path="new", content="x")


async def test_edit_file_replaces_exactly_one_occurrence(ctx: ToolContext, ws: Path):
    (ws / "m.py").write_text("a = 1\nb = 2\nc = 3\n")
    assert "line 2" in await ok(ctx, "edit_file", path="m.py", old="b = 2", new="b = 20")
    assert (ws / "m.py").read_text() == "a = 1\nb = 20\nc = 3\n"


async def test_edit_file_refuses_missing_or_repeated_text(ctx: ToolContext, ws: Path):
    (ws / "m.py").write_text("x = 1\nx = 1\n")
    assert "occurs 0 times" in await fails(ctx, "edit_file", path="m.py", old="y", new="z")
    text = await fails(ctx, "edit_file", path="m.py", old="x = 1", new="x = 2")
    assert "occurs 2 times" in text and "exactly once" in text
    assert (ws / "m.py").read_text() == "x = 1\nx = 1\n"
    assert "old" in await fails(ctx, "edit_file", path="m.py", old="", new="z")
    assert "no such file" in await fails(ctx, "edit_file", path="none.py", old="a", new="b")
    (ws / "latin.txt").write_bytes("caf\xe9".encode("latin-1"))
    assert "not UTF-8" in await fails(ctx, "edit_file", path="latin.txt", old="caf", new="x")


# -- list_files and grep -----------------------------------------------------------------------


async def test_list_files_is_recursive_sorted_and_skips_vcs(ctx: ToolContext, ws: Path):
    for rel in ("b.txt", "a/z.txt", "a/y.txt", ".git/HEAD", "node_modules/m/i.js"):
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text("x")
    assert (await ok(ctx, "list_files")).splitlines() == ["a/y.txt", "a/z.txt", "b.txt"]
    assert (await ok(ctx, "list_files", path="a")).splitlines() == ["a/y.txt", "a/z.txt"]
    assert "no such directory" in await fails(ctx, "list_files", path="b.txt")
    (ws / "e").mkdir()
    assert "no files" in await ok(ctx, "list_files", path="e")


async def test_list_files_is_capped(ctx: ToolContext, ws: Path):
    (ws / "many").mkdir()
    for i in range(MAX_LIST + 5):
        (ws / "many" / f"{i:05}").touch()
    lines = (await ok(ctx, "list_files", path="many")).splitlines()
    assert len(lines) == MAX_LIST + 1 and lines[-1].startswith(f"[stopped at {MAX_LIST}")


async def test_grep_finds_lines_and_skips_binary_and_git(ctx: ToolContext, ws: Path):
    (ws / "src").mkdir()
    (ws / "src/a.py").write_text("import os\ndef main():\n    return os.getcwd()\n")
    (ws / "b.txt").write_text("nothing here\nos is mentioned\n")
    (ws / "bin.dat").write_bytes(b"os\0os\0")
    (ws / ".git").mkdir()
    (ws / ".git/config").write_text("os\n")
    text = await ok(ctx, "grep", pattern=r"\bos\b")
    assert text.splitlines() == [
        "b.txt:2: os is mentioned",
        "src/a.py:1: import os",
        "src/a.py:3:     return os.getcwd()",
    ]
    assert await ok(ctx, "grep", pattern="def", path="src/a.py") == "src/a.py:2: def main():"
    assert await ok(ctx, "grep", pattern="zebra") == "no matches"
    assert "bad pattern" in await fails(ctx, "grep", pattern="(unclosed")
    assert "no such file" in await fails(ctx, "grep", pattern="x", path="missing")


async def test_grep_is_capped(ctx: ToolContext, ws: Path):
    (ws / "big.txt").write_text("hit\n" * (MAX_MATCHES + 50))
    lines = (await ok(ctx, "grep", pattern="hit")).splitlines()
    assert len(lines) == MAX_MATCHES + 1 and "stopped at" in lines[-1]


# -- confinement -------------------------------------------------------------------------------

ESCAPES = {
    "read_file": {},
    "write_file": {"content": "pwned"},
    "edit_file": {"old": "secret", "new": "pwned"},
    "list_files": {},
    "grep": {"pattern": "secret"},
}


@pytest.fixture
def outside(tmp_path: Path, ws: Path) -> Path:
    """A directory next to the workspace with a secret file, plus links to it from inside."""
    out = tmp_path / "outside"
    out.mkdir()
    (out / "secret.txt").write_text("secret\n")
    (ws / "link.txt").symlink_to(out / "secret.txt")
    (ws / "linkdir").symlink_to(out, target_is_directory=True)
    return out


@pytest.mark.parametrize("name", sorted(ESCAPES))
@pytest.mark.parametrize("kind", ["dotdot", "absolute", "file_symlink", "dir_symlink"])
async def test_paths_outside_the_workspace_are_tool_errors(
    ctx: ToolContext, outside: Path, name: str, kind: str
):
    path = {
        "dotdot": "../outside/secret.txt",
        "absolute": str(outside / "secret.txt"),
        "file_symlink": "link.txt",
        "dir_symlink": "linkdir/secret.txt",
    }[kind]
    if name == "list_files":
        path = path.rsplit("/", 1)[0] if "/" in path else "linkdir"
    text = await fails(ctx, name, path=path, **ESCAPES[name])
    assert "outside the workspace" in text
    assert "secret" not in text.replace("secret.txt", "")
    assert (outside / "secret.txt").read_text() == "secret\n"


async def test_grep_of_the_workspace_skips_links_that_escape(ctx: ToolContext, outside: Path):
    assert await ok(ctx, "grep", pattern="secret") == "no matches"
    assert "secret" not in await ok(ctx, "list_files")  # linked directories are not walked


async def test_writes_cannot_escape_and_odd_paths_are_errors(
    ctx: ToolContext, ws: Path, outside: Path
):
    await fails(ctx, "write_file", path="linkdir/new.txt", content="x")
    await fails(ctx, "write_file", path="a/../../escape.txt", content="x")
    assert not (outside / "new.txt").exists() and not (ws.parent / "escape.txt").exists()
    assert "bad path" in await fails(ctx, "read_file", path="nul\0byte")
    await ok(ctx, "write_file", path=str(ws / "inside.txt"), content="fine")  # absolute, inside
    assert await ok(ctx, "read_file", path="sub/../inside.txt") == "fine"


# -- shell -------------------------------------------------------------------------------------


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")  # a zombie is dead


async def eventually_dead(*pids: int, within: float = 5.0) -> None:
    deadline = time.monotonic() + within
    while any(alive(p) for p in pids):
        assert time.monotonic() < deadline, f"still alive: {[p for p in pids if alive(p)]}"
        await asyncio.sleep(0.02)


async def test_shell_runs_in_the_workspace_and_reports_the_exit_code(ctx: ToolContext, ws: Path):
    result, outcome = await call(ctx, "shell", command="pwd; echo err >&2; cat")
    assert result.output == f"{ws}\nerr\n[exit code 0]"  # stdin is empty: cat ends at once
    assert outcome.metadata == {
        "exit_code": 0,
        "timed_out": False,
        "output_bytes": len(f"{ws}\nerr\n"),
        "truncated": False,
    }
    result, outcome = await call(ctx, "shell", command="echo partial; exit 3")
    assert result.is_error and result.output == "partial\n[exit code 3]"
    assert outcome.metadata and outcome.metadata["exit_code"] == 3
    assert "(no output)" in await ok(ctx, "shell", command="true")


async def test_shell_passes_the_context_environment(ws: Path):
    ctx = ToolContext(workspace=ws, session_id="s", env={"WAKEFUL_TEST_VALUE": "42"})
    assert (await ok(ctx, "shell", command="echo $WAKEFUL_TEST_VALUE")).startswith("42\n")


async def test_shell_timeout_kills_the_process_group(ctx: ToolContext, ws: Path):
    started = time.monotonic()
    result, outcome = await call(
        ctx, "shell", command="sleep 30 & echo $! > child.pid; echo waiting; wait", timeout_s=0.5
    )
    assert time.monotonic() - started < 10
    assert result.is_error and outcome.metadata and outcome.metadata["timed_out"] is True
    assert "waiting" in str(result.output) and "timed out after 0.5s" in str(result.output)
    await eventually_dead(int((ws / "child.pid").read_text()))


async def test_shell_output_is_kept_whole_for_the_one_cap(ctx: ToolContext):
    command = "printf START; head -c 200000 /dev/zero | tr '\\0' x; printf END"
    result, outcome = await call(ctx, "shell", command=command)
    text = str(result.output)
    # the whole output (spooled while the command ran); the one cap (`_cap.py`) cuts it later
    assert text == "START" + "x" * 200000 + "END\n[exit code 0]"
    assert outcome.metadata and outcome.metadata["truncated"] is True
    assert outcome.metadata["output_bytes"] == 200008 and DROPPED not in outcome.metadata


async def test_shell_output_beyond_the_kept_maximum_keeps_its_start_and_end(ctx: ToolContext):
    command = f"printf START; head -c {MAX_KEPT_BYTES + 300000} /dev/zero | tr '\\0' x; printf END"
    result, outcome = await call(ctx, "shell", command=command)
    assert outcome.metadata and outcome.metadata[DROPPED] > 0
    capped, whole = cap_result(result)
    assert whole is not None and len(whole) < MAX_KEPT_BYTES + 2 * MAX_RESULT_BYTES
    assert whole.startswith(b"START") and whole.endswith(b"xEND\n[exit code 0]")
    assert f"[... {outcome.metadata[DROPPED]} bytes of the output dropped here".encode() in whole
    cut = str(capped.output)
    assert cut.startswith("START") and cut.endswith("END\n[exit code 0]")
    assert (
        f"but for {outcome.metadata[DROPPED]} bytes of its middle (at most 16 MiB is kept)" in cut
    )


async def test_a_background_job_holding_the_output_is_killed(ctx: ToolContext, ws: Path):
    started = time.monotonic()
    text = await ok(ctx, "shell", command="sleep 30 & echo $! > bg.pid; echo started")
    assert time.monotonic() - started < 5
    assert "started" in text and "background job kept the output open" in text
    await eventually_dead(int((ws / "bg.pid").read_text()))


async def test_a_redirected_background_job_keeps_running(ctx: ToolContext):
    text = await ok(ctx, "shell", command="sleep 30 > /dev/null 2>&1 & echo $!")
    pid = int(text.split("\n")[0])
    try:
        assert alive(pid) and "background" not in text
    finally:
        os.kill(pid, signal.SIGKILL)


async def test_cancelling_a_shell_call_kills_its_processes(ctx: ToolContext, ws: Path):
    task = asyncio.ensure_future(
        call(ctx, "shell", command="sleep 30 & echo $! > child.pid; echo $$ > sh.pid; wait")
    )
    deadline = time.monotonic() + 10
    while not (ws / "sh.pid").exists() or not (ws / "sh.pid").read_text().strip():
        assert time.monotonic() < deadline
        await asyncio.sleep(0.02)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await eventually_dead(int((ws / "sh.pid").read_text()), int((ws / "child.pid").read_text()))


async def test_shell_input_errors_name_the_field(ctx: ToolContext):
    assert "timeout_s" in await fails(ctx, "shell", command="true", timeout_s=0)
    assert "command: Field required" in await fails(ctx, "shell", timeout_s=1)


# -- work state --------------------------------------------------------------------------------


async def test_work_state_tools_return_the_new_value(ctx: ToolContext):
    todos = [{"content": "write tests", "status": "completed"}, {"content": "ship"}]
    result, outcome = await call(ctx, "todo_write", todos=todos)
    assert result.output == "todo list saved (1/2 completed)"
    assert outcome.work_state == (
        "todos",
        [
            {"content": "write tests", "status": "completed"},
            {"content": "ship", "status": "pending"},
        ],
    )
    _, outcome = await call(ctx, "plan_write", plan="1. read\n2. change")
    assert outcome.work_state == ("plan", "1. read\n2. change")
    _, outcome = await call(ctx, "goal_set", goal="green tests")
    assert outcome.work_state == ("goal", "green tests")
    result, outcome = await call(ctx, "goal_set", goal="")
    assert result.output == "goal cleared" and outcome.work_state == ("goal", "")


async def test_a_bad_todo_status_names_the_field(ctx: ToolContext):
    text = await fails(ctx, "todo_write", todos=[{"content": "x", "status": "done"}])
    assert "todos.0.status" in text


# -- run_tool_call: unknown tools, schemas, permissions, failures -----------------------------


async def test_unknown_tool_is_named(ctx: ToolContext):
    text = await fails(ctx, "rm_rf", path="/")
    assert "unknown tool 'rm_rf'" in text and "read_file" in text


async def test_schema_failures_name_the_field(ctx: ToolContext):
    assert "invalid input for read_file: path: Field required" in await fails(ctx, "read_file")
    text = await fails(ctx, "write_file", path="a.txt", contents="typo")
    assert "content: Field required" in text and "contents: unexpected field" in text
    assert "limit" in await fails(ctx, "read_file", path="a", limit="many")


async def test_permission_deny_and_ask_without_anyone_are_denials(ctx: ToolContext, ws: Path):
    deny = PermissionPolicy({"write_file": "deny"})
    result, _ = await call(ctx, "write_file", policy=deny, path="x.txt", content="x")
    assert result.is_error and "permission denied" in str(result.output)
    ask = PermissionPolicy({"write_file": "ask"})
    result, _ = await call(ctx, "write_file", policy=ask, path="x.txt", content="x")
    assert result.is_error and "needs approval and nobody can approve it" in str(result.output)
    assert not (ws / "x.txt").exists()


async def test_ask_runs_the_tool_only_when_approved(ctx: ToolContext, ws: Path):
    asked: list[tuple[str, dict[str, object]]] = []

    def asker(answer: bool) -> Any:
        async def ask(name: str, args: dict[str, object]) -> bool:
            asked.append((name, args))
            return answer

        return ask

    policy = PermissionPolicy({"write_file": "ask"})
    result, _ = await call(
        ctx, "write_file", policy=policy, ask=asker(False), path="x", content="1"
    )
    assert result.is_error and "declined" in str(result.output) and not (ws / "x").exists()
    result, _ = await call(ctx, "write_file", policy=policy, ask=asker(True), path="x", content="1")
    assert not result.is_error and (ws / "x").read_text() == "1"
    assert asked == [("write_file", {"path": "x", "content": "1"})] * 2
    result, _ = await call(ctx, "read_file", policy=policy, ask=asker(False), path="x")
    assert result.output == "1"  # tools without a rule are allowed by default


async def test_a_failing_approval_channel_denies(ctx: ToolContext):
    async def broken(name: str, args: dict[str, object]) -> bool:
        raise ConnectionError("terminal closed")

    result, _ = await call(
        ctx, "shell", policy=PermissionPolicy(default="ask"), ask=broken, command="true"
    )
    assert result.is_error and "terminal closed" in str(result.output)


def test_permission_policy_rules_star_and_default():
    assert PermissionPolicy().decide("shell") == "allow"
    policy = PermissionPolicy({"shell": "deny", "*": "ask"}, default="allow")
    assert (policy.decide("shell"), policy.decide("read_file")) == ("deny", "ask")
    assert PermissionPolicy({"shell": "ask"}, default="deny").decide("grep") == "deny"


class EchoInput(BaseModel):
    text: str


class Exploding:
    name = "explode"
    description = "Raises what it is told to."
    input_model = EchoInput
    read_only = True

    def __init__(self, error: BaseException) -> None:
        self.error = error

    async def run(self, args: EchoInput, ctx: ToolContext) -> ToolOutcome:
        raise self.error


async def test_a_raising_tool_becomes_an_error_result(ctx: ToolContext):
    tools = {"explode": Exploding(ValueError("boom"))}
    text = await fails(ctx, "explode", tools=tools, text="x")
    assert text == "explode failed: ValueError: boom"


async def test_cancellation_inside_a_tool_propagates(ctx: ToolContext):
    tools = {"explode": Exploding(asyncio.CancelledError())}
    with pytest.raises(asyncio.CancelledError):
        await call(ctx, "explode", tools=tools, text="x")


async def test_metadata_reaches_the_result(ctx: ToolContext, ws: Path):
    result, _ = await call(ctx, "write_file", path="m.txt", content="four")
    assert result.metadata is not None and result.call_id == "call_1"
    assert result.metadata["bytes"] == 4
    assert result.metadata["file_change"] == {
        "path": "m.txt",
        "before": None,
        "after": hashlib.sha256(b"four").hexdigest(),
    }
    assert result.metadata["artifacts"] == [
        {"kind": "file", "uri": (ws / "m.txt").resolve().as_uri(), "label": "m.txt"}
    ]
