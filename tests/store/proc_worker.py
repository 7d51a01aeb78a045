"""A helper the concurrency tests run in real subprocesses (`python tests/store/proc_worker.py`).

    admit  URL WORKER SESSIONS COUNT [--busy-ms MS] [--promote-every K]
        Print ``{"ready": true}``, wait for one line on stdin (the start gun), then admit COUNT
        inputs round-robin into SESSIONS (comma-separated; created lazily, in the admitting
        transaction), every fifth one queued, and promote the session just admitted to every K
        admissions. A `StoreBusyError` is retried; any other error ends the process non-zero.
        The last line is a JSON summary: admitted, sessions created, delivered, busy retries.
    follow URL SESSION     print each event of SESSION's followed log as a JSON line
    follow-all URL         the same for the instance-wide log (global ids)

Both followers print ``{"sync": WATERMARK}`` once and stop at the end marker: a
``session.updated`` event whose title is ``END_TITLE``. They exit 3 if the log went idle first.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Callable, Iterator
from typing import TypeVar

from wakeful.errors import StoreBusyError
from wakeful.events import SessionCreated, SessionUpdated, StoredEvent
from wakeful.store import SqlStore, SyncMarker, open_store
from wakeful.store._sqlite import SqliteBackend

END_TITLE = "end-of-test"
T = TypeVar("T")


def emit(obj: object) -> None:
    print(json.dumps(obj), flush=True)


def retry(fn: Callable[[], T], counter: list[int]) -> T:
    """Call `fn` until it does not raise `StoreBusyError` (the documented retryable fault)."""
    while True:
        try:
            return fn()
        except StoreBusyError:
            counter[0] += 1
            time.sleep(random.uniform(0.001, 0.01))


def connect(url: str, busy_ms: int | None, busy: list[int]) -> SqlStore:
    if busy_ms is not None and not url.startswith(("postgresql://", "postgres://")):
        return retry(lambda: SqlStore(SqliteBackend(url, busy_timeout_ms=busy_ms)), busy)
    return retry(lambda: open_store(url), busy)


def admit(args: argparse.Namespace) -> None:
    busy = [0]
    store = connect(args.url, args.busy_ms, busy)
    sessions = args.sessions.split(",")
    rng = random.Random(args.worker)
    admitted: list[tuple[str, str, str]] = []
    created: list[str] = []
    delivered: list[str] = []
    emit({"ready": True})
    sys.stdin.readline()
    try:
        for k in range(args.count):
            sid = sessions[k % len(sessions)]
            iid = f"w{args.worker}-{k:04d}"
            delivery = "queue" if k % 5 == 4 else "steer"
            adm = retry(
                lambda sid=sid, iid=iid, delivery=delivery: store.admit(
                    sid, iid, "user", {"text": iid}, delivery, create=SessionCreated(title=sid)
                ),
                busy,
            )
            admitted.append((sid, iid, delivery))
            if adm.session_created:
                created.append(sid)
            if k % args.promote_every == args.promote_every - 1:
                idle = rng.random() < 0.5
                out = retry(lambda sid=sid, idle=idle: store.promote(sid, idle=idle), busy)
                delivered += [d.item.input_id for d in out]
    finally:
        store.close()
    emit({"admitted": admitted, "created": created, "delivered": delivered, "busy": busy[0]})


def follow(args: argparse.Namespace) -> None:
    store = open_store(args.url)
    try:
        if args.session is None:
            items = store.log_all(follow=True, idle_timeout_s=args.idle_timeout)
        else:
            items = store.log(args.session, follow=True, idle_timeout_s=args.idle_timeout)
        ended = _print_until_end(items)
    finally:
        store.close()
    sys.exit(0 if ended else 3)


def _print_until_end(items: Iterator[StoredEvent | SyncMarker]) -> bool:
    for item in items:
        if isinstance(item, SyncMarker):
            emit({"sync": item.watermark})
            continue
        emit({"id": item.id, "sid": item.session_id, "seq": item.seq, "type": item.type})
        if isinstance(item.event, SessionUpdated) and item.event.title == END_TITLE:
            return True
    return False


def main() -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("admit")
    a.add_argument("url")
    a.add_argument("worker", type=int)
    a.add_argument("sessions")
    a.add_argument("count", type=int)
    a.add_argument("--busy-ms", type=int, default=None)
    a.add_argument("--promote-every", type=int, default=3)
    f = sub.add_parser("follow")
    f.add_argument("url")
    f.add_argument("session")
    fa = sub.add_parser("follow-all")
    fa.add_argument("url")
    for p in (f, fa):
        p.add_argument("--idle-timeout", type=float, default=60.0)
    args = parser.parse_args()
    if args.cmd == "admit":
        admit(args)
    else:
        args.session = getattr(args, "session", None)
        follow(args)


if __name__ == "__main__":
    main()
