"""What the one cap on tool results saves: a turn whose MCP tool returns 10 MB, driven in a
process of its own, with the cap (today) and without it (the baseline: `cap_result` replaced by
the identity, as before issue 43), in alternating rounds of the same run.

    python bench/bench_tool_cap.py [--mb 10] [--rounds 2]

Per round and mode: the driver's peak resident memory (its own `ru_maxrss`; the MCP server is
another process), the turn's outcome and time, and the size of the tool-result message as
stored (its JSON), and the error that ended a failed turn (the baseline's: its next request is
over the model's context window, and compaction cannot make room). Needs the `mcp` extra.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

SERVER = '''
from mcp.server.mcpserver import MCPServer
server = MCPServer("big")

@server.tool()
def big(size: int) -> str:
    """`size` bytes of numbered lines."""
    return "".join(f"line {i:<26}\\n" for i in range(size // 32 + 1))[:size]

server.run("stdio")
'''

DRIVER = """
import asyncio, json, resource, sys, time
from wakeful.config import Config
from wakeful.execution import Runtime
folder, size, capped = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "capped"
if not capped:  # the baseline: every result stored and sent whole, as before issue 43
    import wakeful.runner._tool_step as step
    step.cap_result = lambda result: (result, None)
script = folder + "/script.json"
open(script, "w").write(json.dumps({"rules": [{"match": ".", "replies": [
    {"tool_calls": [{"name": "mcp__big__big", "input": {"size": size}}]}, {"text": "ok"}]}]}))
config = Config.model_validate({"mcp": {"servers": {"big": {
    "command": [sys.executable, folder + "/server.py"]}}}})
async def main():
    rt = Runtime(folder + "/s.db", model="scripted:" + script, workspace=folder, config=config)
    started = time.perf_counter()
    [turn] = await rt.run("go")
    seconds = time.perf_counter() - started
    sid = rt.store.list_sessions().sessions[0].id
    stored = max(len(m.model_dump_json()) for m in rt.store.messages(sid))
    await rt.aclose()
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"outcome": turn.outcome, "seconds": seconds, "peak_mb": peak_mb,
                      "stored_mb": stored / 1e6, "error": (turn.error or "")[:160]}))
asyncio.run(main())
"""


def one(size: int, mode: str) -> dict[str, float | str]:
    """One driver process's figures."""
    with tempfile.TemporaryDirectory(prefix="wakeful-cap-") as folder:
        (Path(folder) / ".git").mkdir()
        (Path(folder) / "server.py").write_text(SERVER)
        done = subprocess.run(
            [sys.executable, "-c", DRIVER, folder, str(size), mode],
            capture_output=True,
            text=True,
            timeout=600,
        )
        if done.returncode != 0:
            raise SystemExit(f"{mode} driver failed: {done.stderr.strip()[-500:]}")
        return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main() -> None:
    """Alternate the modes; print the medians."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=int, default=10, help="the MCP result's size")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    size = args.mb * 1024 * 1024
    runs: dict[str, list[dict[str, float | str]]] = {"capped": [], "uncapped": []}
    for _ in range(args.rounds):
        for mode in runs:
            runs[mode].append(one(size, mode))
    print(f"a {args.mb} MB MCP result, {args.rounds} rounds (median)")
    print("mode      outcome    peak MB  stored result MB  turn s")
    for mode, rows in runs.items():
        med = {
            k: statistics.median(float(r[k]) for r in rows)
            for k in ("peak_mb", "stored_mb", "seconds")
        }
        outcomes = ",".join(sorted({str(r["outcome"]) for r in rows}))
        print(
            f"{mode:<9} {outcomes:<10} {med['peak_mb']:>7.0f}  {med['stored_mb']:>16.2f}  {med['seconds']:>6.1f}"
        )
    for mode, rows in runs.items():
        for error in sorted({str(r["error"]) for r in rows if r["error"]}):
            print(f"{mode}: {error}")


if __name__ == "__main__":
    main()
