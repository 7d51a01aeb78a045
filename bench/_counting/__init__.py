"""Statements, commits and round trips counted on the client, in every process a bench starts.

A bench runs its processes with `counting_env(env, folder)`: `bench/_counting` first on
`PYTHONPATH` (its `sitecustomize.py` patches sqlite3 and psycopg as the process starts; see
there for what counts as what) and `WAKEFUL_COUNT_DIR=folder`, where each process leaves its
figures as it exits. `total(folder)` sums them. A process killed with SIGKILL leaves none.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

HERE = str(Path(__file__).resolve().parent)
FIGURES = ("statements", "commits", "write_commits", "round_trips")


def counting_env(env: dict[str, str], folder: Path) -> dict[str, str]:
    """`env` with the counter loaded by every Python process started with it, writing its
    figures into `folder` (made if missing)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = os.pathsep.join(p for p in (HERE, env.get("PYTHONPATH", "")) if p)
    return env | {"PYTHONPATH": path, "WAKEFUL_COUNT_DIR": str(folder)}


def total(folder: Path, contains: str = "") -> dict[str, int]:
    """The figures of every process that wrote into `folder` (those whose command line
    contains `contains`), summed; zeros when none did."""
    out = dict.fromkeys(FIGURES, 0)
    out["processes"] = 0
    for path in sorted(folder.glob("*.json")):
        try:
            figures = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if contains not in figures.get("argv", ""):
            continue
        out["processes"] += 1
        for key in FIGURES:
            out[key] += int(figures.get(key, 0))
    return out


def per(figures: dict[str, int], n: int) -> str:
    """`figures` divided by `n` (steps, sessions), as one line of text."""
    if n <= 0:
        return "no counts"
    return (
        f"{figures['statements'] / n:.1f} statements, {figures['commits'] / n:.2f} commits "
        f"({figures['write_commits'] / n:.2f} writing), {figures['round_trips'] / n:.1f} round "
        f"trips"
    )
