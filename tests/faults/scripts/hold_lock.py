"""Hold a store's write lock from a separate process, like a peer paused inside a transaction.

Usage: hold_lock.py DB SECONDS [WORKSPACE]

SQLite (a path): takes the write lock (`BEGIN IMMEDIATE`), prints `held`, keeps it SECONDS, then
commits. PostgreSQL (a URL): opens the store as a `Runtime` in WORKSPACE would (its wakeful.toml
applies), begins a write transaction (`lock_session` of a session that may not exist; before store
migration 11 every write transaction also took the database-wide append lock), prints `held` and waits until its stdin closes before committing; the test
pauses it with SIGSTOP in between. Prints the error the commit raised, if any, as `error NAME`.
"""

from __future__ import annotations

import sqlite3
import sys
import time
from pathlib import Path


def main(argv: list[str]) -> None:
    """Hold the lock as the module docstring says."""
    db, seconds, *rest = argv
    if not db.startswith("postgresql://"):
        conn = sqlite3.connect(db, isolation_level=None, timeout=60)
        conn.execute("BEGIN IMMEDIATE")
        print("held", flush=True)
        time.sleep(float(seconds))
        conn.execute("COMMIT")
        return
    from wakeful.execution import Runtime

    rt = Runtime(db, workspace=Path(rest[0]) if rest else None)
    try:
        with rt.store.backend.transaction(write=True) as tx:
            tx.lock_session("ses_held")
            print("held", flush=True)
            sys.stdin.read()
    except Exception as err:
        print(f"error {type(err).__name__}", flush=True)
    finally:
        rt.store.close()


if __name__ == "__main__":
    main(sys.argv[1:])
