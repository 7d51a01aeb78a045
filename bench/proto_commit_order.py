"""Prototype (issue 24, item 1): a cross-session follower on PostgreSQL without a database-wide
append lock. Writers in several processes append to random sessions (session row lock, ids by
nextval, a pause before commit so ids commit out of order); two followers read concurrently:
`naive` (id > last seen, id order) and `xmin` (position (tx, id) read only below the snapshot's
xmin, where tx = greatest(own xid, the session's previous event's tx), set by a trigger).
Prints, per reader, events missed, repeated and per-session order violations.

    python bench/proto_commit_order.py [postgresql://postgres@127.0.0.1:5432/postgres]
"""

from __future__ import annotations

import multiprocessing as mp
import random
import sys
import time
import uuid

import psycopg

SCHEMA = """
CREATE TABLE sessions (id TEXT PRIMARY KEY, last_seq BIGINT NOT NULL DEFAULT 0);
CREATE TABLE events (
  id BIGSERIAL PRIMARY KEY, session_id TEXT NOT NULL, seq BIGINT NOT NULL,
  tx xid8 NOT NULL DEFAULT '0', UNIQUE (session_id, seq));
CREATE INDEX events_position ON events (tx, id);
CREATE FUNCTION events_position() RETURNS trigger AS $$
BEGIN
  NEW.tx := greatest(pg_current_xact_id(), coalesce((SELECT e.tx FROM events e
    WHERE e.session_id = NEW.session_id ORDER BY e.seq DESC LIMIT 1), '0'));
  RETURN NEW;
END $$ LANGUAGE plpgsql;
CREATE TRIGGER events_position BEFORE INSERT ON events FOR EACH ROW
  EXECUTE FUNCTION events_position();
"""

XMIN_READ = """
SELECT id, session_id, seq, tx FROM events
WHERE (tx, id) > (%s::xid8, %s) AND tx < pg_snapshot_xmin(pg_current_snapshot())
ORDER BY tx, id LIMIT 200
"""
NAIVE_READ = "SELECT id, session_id, seq, tx FROM events WHERE id > %s ORDER BY id LIMIT 200"
SESSIONS = 8


def writer(url: str, n: int, seed: int) -> None:
    rnd = random.Random(seed)
    with psycopg.connect(url, autocommit=True) as conn:
        for _ in range(n):
            with conn.transaction():
                if rnd.random() < 0.3:  # an earlier write gives this transaction an early xid
                    conn.execute("CREATE TEMP TABLE IF NOT EXISTS scratch (x int)")
                    conn.execute("INSERT INTO scratch VALUES (1)")
                    time.sleep(rnd.random() * 0.003)
                sid = f"s{rnd.randrange(SESSIONS)}"
                (last,) = conn.execute(
                    "SELECT last_seq FROM sessions WHERE id = %s FOR UPDATE", (sid,)
                ).fetchone()  # type: ignore[misc]
                for _k in range(rnd.randint(1, 3)):
                    last += 1
                    conn.execute(
                        "INSERT INTO events (session_id, seq) VALUES (%s, %s)", (sid, last)
                    )
                conn.execute("UPDATE sessions SET last_seq = %s WHERE id = %s", (last, sid))
                time.sleep(rnd.random() * 0.005)  # commit late: ids become visible out of order


def follow(url: str, kind: str, done: mp.Event, out: mp.Queue) -> None:  # type: ignore[type-arg]
    seen: list[tuple[int, str, int]] = []
    pos: tuple[str, int] = ("0", 0)
    with psycopg.connect(url, autocommit=True) as conn:
        quiet, deadline = 0, time.monotonic() + 60
        while quiet < 3 and time.monotonic() < deadline:
            finished = done.is_set()
            if kind == "naive":
                rows = conn.execute(NAIVE_READ, (pos[1],)).fetchall()
            else:
                rows = conn.execute(XMIN_READ, pos).fetchall()
            for r in rows:
                seen.append((int(r[0]), r[1], int(r[2])))
                pos = (str(r[3]), int(r[0]))
            # (the xmin reader may wait for transactions of other databases of the cluster)
            total = conn.execute("SELECT count(*) FROM events").fetchone()[0]  # type: ignore[index]
            quiet = (
                quiet + 1
                if (finished and not rows and (kind == "naive" or len(set(seen)) >= total))
                else 0
            )
            if not rows:
                time.sleep(0.005)
    out.put((kind, seen))


def main() -> None:
    base = sys.argv[1] if len(sys.argv) > 1 else "postgresql://postgres@127.0.0.1:5432/postgres"
    db = "proto_" + uuid.uuid4().hex[:8]
    with psycopg.connect(base, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {db}")
    url = base.rsplit("/", 1)[0] + "/" + db
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(SCHEMA)
            for i in range(SESSIONS):
                conn.execute("INSERT INTO sessions (id) VALUES (%s)", (f"s{i}",))
        done, out = mp.Event(), mp.Queue()
        readers = [mp.Process(target=follow, args=(url, k, done, out)) for k in ("naive", "xmin")]
        writers = [mp.Process(target=writer, args=(url, 300, i)) for i in range(6)]
        for p in readers + writers:
            p.start()
        for p in writers:
            p.join()
        done.set()
        results = dict(out.get() for _ in readers)
        for p in readers:
            p.join()
        with psycopg.connect(url) as conn:
            every = {int(r[0]) for r in conn.execute("SELECT id FROM events")}
        bad = False
        for kind, seen in sorted(results.items()):
            ids = [s[0] for s in seen]
            missed = len(every - set(ids))
            repeated = len(ids) - len(set(ids))
            last: dict[str, int] = {}
            disorder = 0
            for _id, sid, seq in seen:
                if seq != last.get(sid, 0) + 1:
                    disorder += 1
                last[sid] = seq
            print(
                f"{kind:6} events={len(every)} delivered={len(ids)} missed={missed} "
                f"repeated={repeated} per-session order violations={disorder}"
            )
            bad |= kind == "xmin" and (missed or repeated or disorder)
        sys.exit(1 if bad else 0)
    finally:
        with psycopg.connect(base, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")


if __name__ == "__main__":
    main()
