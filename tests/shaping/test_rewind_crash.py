"""A SIGKILL during a rewind leaves the old state or the new one, never a mix (real processes)."""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.shaping.test_rewind import RULES
from wakeful.execution import Runtime
from wakeful.store import open_store

LOOP = """
import asyncio, sys
from wakeful.execution import Runtime
async def main():
    rt = Runtime(sys.argv[1], model=sys.argv[2], workspace=sys.argv[3])
    sid, turn = sys.argv[4], sys.argv[5]
    print("ready", flush=True)
    while True:
        await rt.rewind(sid, turn_id=turn)
        await rt.unrevert(sid)
asyncio.run(main())
"""

ONCE = """
import asyncio, sys
from wakeful.execution import Runtime
async def main():
    rt = Runtime(sys.argv[1], model=sys.argv[2], workspace=sys.argv[3])
    await rt.rewind(sys.argv[4], turn_id=sys.argv[5], files=True)
asyncio.run(main())
"""

ONCE_JSON = """
import asyncio, json, sys
from wakeful.execution import Runtime
async def main():
    rt = Runtime(sys.argv[1], model=sys.argv[2], workspace=sys.argv[3])
    result = await rt.rewind(sys.argv[4], turn_id=sys.argv[5], files=True)
    print(json.dumps(result.as_json() | {"warnings": result.warnings()}))
asyncio.run(main())
"""


async def _session(tmp_path: Path) -> tuple[str, str, Path, str, str]:
    ws = tmp_path / "work"
    ws.mkdir()
    (ws / ".git").mkdir()
    (ws / "wakeful.toml").write_text('[permissions]\n"*" = "allow"\n')
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"rules": RULES}))
    db, model = str(tmp_path / "s.db"), f"scripted:{script}"
    rt = Runtime(db, model=model, workspace=ws)
    await rt.run("first prompt")
    sid = rt.store.list_sessions().sessions[0].id
    [two] = await rt.run("second prompt", session_id=sid)
    await rt.aclose()
    return db, model, ws, sid, two.turn_id


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "WAKEFUL_CRASH_AT"}
    return env | extra


def test_sigkill_during_rewinds_leaves_old_or_new_state(tmp_path: Path):
    db, model, ws, sid, two = asyncio.run(_session(tmp_path))
    store = open_store(db)
    full = [m.id for m in store.messages(sid)]
    cut = full[:4]
    rng = random.Random(21)
    for _ in range(6):
        proc = subprocess.Popen(
            [sys.executable, "-c", LOOP, db, model, str(ws), sid, two],
            stdout=subprocess.PIPE,
            env=_env(),
        )
        assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready"
        time.sleep(rng.uniform(0.05, 0.4))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
        shown = [m.id for m in store.messages(sid)]
        pending = store.pending_revert(sid)
        goal = store.work_state(sid)["goal"]
        if pending is None:
            assert (shown, goal) == (full, "goal two")
        else:
            assert (shown, goal) == (cut, "goal one") and pending.hidden == len(full) - 4
    store.close()


def test_sigkill_between_files_and_commit_completes_when_run_again(tmp_path: Path):
    db, model, ws, sid, two = asyncio.run(_session(tmp_path))
    args = [sys.executable, "-c", ONCE, db, model, str(ws), sid, two]
    killed = subprocess.run(args, env=_env(WAKEFUL_CRASH_AT="rewind.files"), check=False)
    assert killed.returncode == -signal.SIGKILL
    store = open_store(db)
    assert (ws / "a.txt").read_text() == "one\n" and not (ws / "new.txt").exists()
    assert store.pending_revert(sid) is None and len(store.messages(sid)) > 4  # old history
    done = subprocess.run(args, env=_env(), check=False)
    assert done.returncode == 0
    pending = store.pending_revert(sid)
    assert pending is not None and {f.path for f in pending.files} == {"a.txt", "new.txt"}
    assert len(store.messages(sid)) == 4
    store.close()


def test_sigkill_between_two_files_completes_when_run_again_and_says_so(tmp_path: Path):
    # issue 43 item 3: the second run finishes a rewind cut short between its files
    db, model, ws, sid, two = asyncio.run(_session(tmp_path))
    args = [sys.executable, "-c", ONCE_JSON, db, model, str(ws), sid, two]
    killed = subprocess.run(args, env=_env(WAKEFUL_CRASH_AT="rewind.file@1"), check=False)
    assert killed.returncode == -signal.SIGKILL
    back = {
        "a.txt": (ws / "a.txt").read_text() == "one\n",
        "new.txt": not (ws / "new.txt").exists(),
    }
    assert sorted(back.values()) == [False, True]  # one file back, the other not
    first = next(path for path, done in back.items() if done)
    store = open_store(db)
    assert store.pending_revert(sid) is None  # no rewind recorded
    done = subprocess.run(args, env=_env(), check=False, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["files_completed"] == [first]
    assert any("cut short" in w and first in w for w in result["warnings"])
    assert (ws / "a.txt").read_text() == "one\n" and not (ws / "new.txt").exists()
    assert store.pending_revert(sid) is not None
    store.close()
