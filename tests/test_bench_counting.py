"""The benches' client-side counter (`bench/_counting`): loaded as `sitecustomize` by a process
started with `counting_env`, it counts that process's statements, commits and round trips."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from bench._counting import counting_env, total

from tests.pg import fresh_database

# Two admissions (each one write transaction), then one read.
WORK = (
    "import sys; from wakeful.store import open_store; from wakeful.events import SessionCreated; "
    "s = open_store(sys.argv[1]); c = SessionCreated(agent='build', model='scripted:x'); "
    "s.admit('ses_a', None, 'user', {'text': 'one'}, create=c); "
    "s.admit('ses_b', None, 'user', {'text': 'two'}, create=c); "
    "s.pending('ses_a'); s.close()"
)


def _counted(db: str, folder: Path) -> dict[str, int]:
    env = counting_env(dict(os.environ), folder)
    subprocess.run([sys.executable, "-c", WORK, db], env=env, check=True, timeout=120)
    return total(folder)


def test_counts_a_sqlite_process(tmp_path: Path) -> None:
    got = _counted(str(tmp_path / "s.db"), tmp_path / "counts")
    assert got["processes"] == 1
    assert got["write_commits"] >= 2  # the two admissions (the schema's own come on top)
    assert got["commits"] > got["write_commits"]  # reads commit too (their read transaction)
    assert got["statements"] > got["commits"]
    assert got["round_trips"] == 0  # in process


def test_a_process_started_without_it_counts_nothing(tmp_path: Path) -> None:
    folder = tmp_path / "counts"
    folder.mkdir()
    subprocess.run([sys.executable, "-c", WORK, str(tmp_path / "s.db")], check=True, timeout=120)
    assert total(folder)["processes"] == 0


@pytest.mark.postgres
def test_counts_a_postgresql_process(tmp_path: Path) -> None:
    with fresh_database() as url:
        got = _counted(url, tmp_path / "counts")
    assert got["processes"] == 1
    assert got["write_commits"] >= 2
    assert got["commits"] > got["write_commits"]
    assert got["round_trips"] >= got["commits"]


# Triggers, a trigger firing a trigger, FTS5 behind one, repeated statements and an
# `executemany` with two equal rows: each statement the process sends is counted once.
TRIGGERS = (
    "import sqlite3, sys; c = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
    "for sql in ('CREATE TABLE t(x)', 'CREATE TABLE u(x)', 'CREATE TABLE v(x)',\n"
    "            'CREATE VIRTUAL TABLE f USING fts5(x)',\n"
    "            'CREATE TRIGGER t_before BEFORE INSERT ON t BEGIN INSERT INTO u VALUES (new.x); END',\n"
    "            'CREATE TRIGGER t_after AFTER INSERT ON t BEGIN INSERT INTO u VALUES (new.x);'\n"
    "            ' INSERT INTO v VALUES (new.x); END',\n"
    "            'CREATE TRIGGER v_after AFTER INSERT ON v BEGIN INSERT INTO f VALUES (new.x); END'):\n"
    "    c.execute(sql)\n"
    "c.execute('BEGIN IMMEDIATE')\n"
    "c.execute('INSERT INTO t VALUES (?)', ('a b',))\n"
    "c.execute('INSERT INTO t VALUES (?)', ('a b',))\n"
    "c.cursor().executemany('INSERT INTO t VALUES (?)', [('c',), ('c',), ('d',)])\n"
    "c.commit()\n"
    "assert c.execute('SELECT count(*) FROM u').fetchone() == (10,)\n"
    "c.execute('SELECT count(*) FROM f').fetchall()\n"
    "c.execute('SELECT count(*) FROM f').fetchall()\n"
)


def test_an_insert_firing_triggers_counts_once(tmp_path: Path) -> None:
    folder = tmp_path / "counts"
    env = counting_env(dict(os.environ), folder)
    run = [sys.executable, "-c", TRIGGERS, str(tmp_path / "t.db")]
    subprocess.run(run, env=env, check=True, timeout=120)
    got = total(folder)
    # 7 statements of schema, BEGIN, 2 inserts, 3 rows, COMMIT, 3 reads (SQLite's trace
    # reports each insert into `t` 6 times and FTS5's statements besides).
    assert got["statements"] == 17
    assert got["commits"] == 11  # the schema's 7, the COMMIT, the 3 reads
    assert got["write_commits"] == 1
