"""Each invariant once (issue 35 item 6): bench/ never imports tests/, ids are minted in
`wakeful._ids` only, the drain's defaults are the configuration's, the listing slack is one
constant the SQL is built from."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import wakeful

ROOT = Path(__file__).resolve().parents[1]
SRC = Path(wakeful.__file__).resolve().parent


def _imported(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_bench_never_imports_tests():
    found = {
        f"{p.name}: {m}"
        for p in sorted((ROOT / "bench").glob("*.py"))
        for m in _imported(p)
        if m == "tests" or m.startswith("tests.")
    }
    assert found == set()


def test_bench_fleet_help_runs_with_the_project_environment_only():
    """From the root of a clean clone: wakeful importable (here: its source directory, as an
    installed package would be), the repository root itself not on the path."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(SRC.parent)
    done = subprocess.run(
        [sys.executable, "bench/bench_fleet.py", "--help"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "--sessions" in done.stdout


# A minted id: a literal prefix, then random characters (derived ids are built from other ids).
MINTED = re.compile(
    r"""f["'](ses|turn|in|msg|rcp|sch|art)_\{(random_hex|secrets\.|uuid|os\.urandom)"""
)


def test_ids_are_minted_in_one_module():
    found = [
        f"{p.relative_to(SRC)}:{n}: {line.strip()}"
        for p in sorted(SRC.rglob("*.py"))
        if p.name != "_ids.py"
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if MINTED.search(line)
    ]
    assert found == []


def test_a_drain_defaults_to_the_execution_configuration():
    from wakeful.config import ExecutionConfig
    from wakeful.execution._drain import DrainOptions

    config, drain = ExecutionConfig(), DrainOptions()
    assert (drain.lease_ms, drain.max_recovery_attempts, drain.poll_interval_ms) == (
        config.lease_ms,
        config.max_recovery_attempts,
        config.poll_interval_ms,
    )


def test_the_listing_slack_is_written_once():
    """`LIST_SLACK_MS` is defined in `store/_listing.py` only; SQL is built from it."""
    defined = [
        str(p.relative_to(SRC))
        for p in sorted(SRC.rglob("*.py"))
        if re.search(r"^LIST_SLACK_MS\s*=", p.read_text(), re.M)
    ]
    assert defined == ["store/_listing.py"]
    from wakeful.store._admit_sql import ADMIT_FUNCTION_2
    from wakeful.store._listing import LIST_SLACK_MS

    assert f"p_now - listed_ms >= {LIST_SLACK_MS} THEN" in ADMIT_FUNCTION_2
