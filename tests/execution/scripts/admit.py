"""Admit inputs into existing sessions from a separate process, concurrently with workers.

Usage: admit.py DB NAME COUNT SEED SESSION_ID...

Admits COUNT inputs, each into a random session of the list, with input ids
``NAME-<n>`` (n counts up per process, so this process's enqueue order is known), sleeping a
little between admissions. Some inputs are queued, most steer. Prints the number admitted.
"""

from __future__ import annotations

import random
import sys
import time

from wakeful.store import open_store


def main(argv: list[str]) -> None:
    """Admit the inputs described in the module docstring."""
    db, name, count, seed, *sessions = argv
    rng = random.Random(int(seed))
    store = open_store(db)
    for n in range(int(count)):
        sid = rng.choice(sessions)
        delivery = "queue" if rng.random() < 0.2 else "steer"
        store.admit(sid, f"{name}-{n:04d}", "user", {"text": f"note {name}-{n}"}, delivery)
        time.sleep(rng.uniform(0, 0.02))
    store.close()
    print(count)


if __name__ == "__main__":
    main(sys.argv[1:])
