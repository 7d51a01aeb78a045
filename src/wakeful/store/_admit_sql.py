"""`wakeful_admit`, PostgreSQL's one-statement admission, in each version a migration installs
(5, 6, 11, 17; `_migrations/` applies them). Frozen as the migrations are: a change is a new
version here and a new migration there.
"""

from __future__ import annotations

from ._listing import LIST_SLACK_MS

# One admission as one server-side call (PostgreSQL; SQLite has no round trips to save). It does
# what `_inbox.admit_in` does in Python, statement for statement: the append lock, the session row
# lock, the idempotency check, an event id, the `inbox.enqueued` event, the session's counter, the
# notify and the inbox row. Outcomes: created (with seq and event id), existing (same input id,
# same digest), conflict (same input id, other digest), missing (no such session; nothing written).
ADMIT_FUNCTION = """
CREATE FUNCTION wakeful_admit(
  p_lock BIGINT, p_channel TEXT, p_session TEXT, p_input TEXT, p_kind TEXT, p_delivery TEXT,
  p_digest TEXT, p_type TEXT, p_data TEXT, p_now BIGINT
) RETURNS TABLE (o_outcome TEXT, o_seq BIGINT, o_id BIGINT) AS $$
DECLARE
  v_last BIGINT;
  v_digest TEXT;
  v_id BIGINT;
BEGIN
  PERFORM pg_advisory_xact_lock(p_lock);
  SELECT s.last_seq INTO v_last FROM sessions s WHERE s.id = p_session FOR UPDATE;
  IF NOT FOUND THEN
    RETURN QUERY SELECT 'missing'::TEXT, NULL::BIGINT, NULL::BIGINT;
    RETURN;
  END IF;
  SELECT i.digest INTO v_digest FROM inbox i
    WHERE i.session_id = p_session AND i.input_id = p_input;
  IF FOUND THEN
    RETURN QUERY SELECT CASE WHEN v_digest = p_digest THEN 'existing' ELSE 'conflict' END,
      NULL::BIGINT, NULL::BIGINT;
    RETURN;
  END IF;
  v_id := nextval(pg_get_serial_sequence('events', 'id'));
  INSERT INTO events (id, session_id, seq, type, at_ms, data, epoch)
    VALUES (v_id, p_session, v_last + 1, p_type, p_now, p_data, NULL);
  UPDATE sessions SET last_seq = v_last + 1, updated_ms = p_now WHERE id = p_session;
  PERFORM pg_notify(p_channel, p_session);
  INSERT INTO inbox (session_id, input_id, seq, kind, delivery, digest, status)
    VALUES (p_session, p_input, v_last + 1, p_kind, p_delivery, p_digest, 'pending');
  RETURN QUERY SELECT 'created'::TEXT, v_last + 1, v_id;
END
$$ LANGUAGE plpgsql
"""

# Migration 6's admission: the same outcomes as `ADMIT_FUNCTION` in two statements instead of
# nine. The append lock first; then one statement, whose snapshot is taken after the lock is held
# (so it sees every admission committed before), checks the input id, bumps the session's counter
# (the UPDATE locks the row and finds nothing for a missing session), inserts the event and the
# inbox row. The notify only for a created item. `listed_ms` follows `_listing.listed_ms_after`
# (built from its LIST_SLACK_MS).
ADMIT_FUNCTION_2 = f"""
CREATE OR REPLACE FUNCTION wakeful_admit(
  p_lock BIGINT, p_channel TEXT, p_session TEXT, p_input TEXT, p_kind TEXT, p_delivery TEXT,
  p_digest TEXT, p_type TEXT, p_data TEXT, p_now BIGINT
) RETURNS TABLE (o_outcome TEXT, o_seq BIGINT, o_id BIGINT) AS $$
BEGIN
  PERFORM pg_advisory_xact_lock(p_lock);
  WITH d AS (
    SELECT i.digest FROM inbox i WHERE i.session_id = p_session AND i.input_id = p_input
  ), s AS (
    UPDATE sessions SET last_seq = last_seq + 1, updated_ms = p_now,
      listed_ms = CASE WHEN p_now < listed_ms OR p_now - listed_ms >= {LIST_SLACK_MS} THEN p_now
                       ELSE listed_ms END
    WHERE sessions.id = p_session AND NOT EXISTS (SELECT 1 FROM d) RETURNING last_seq
  ), e AS (
    INSERT INTO events (session_id, seq, type, at_ms, data)
    SELECT p_session, s.last_seq, p_type, p_now, p_data FROM s RETURNING events.id, events.seq
  ), i AS (
    INSERT INTO inbox (session_id, input_id, seq, kind, delivery, digest, status)
    SELECT p_session, p_input, e.seq, p_kind, p_delivery, p_digest, 'pending' FROM e
  )
  SELECT CASE WHEN e.id IS NOT NULL THEN 'created'
              WHEN d.digest IS NULL THEN 'missing'
              WHEN d.digest = p_digest THEN 'existing'
              ELSE 'conflict' END, e.seq, e.id
    INTO o_outcome, o_seq, o_id
    FROM (SELECT 1) AS one LEFT JOIN d ON true LEFT JOIN e ON true;
  IF o_outcome = 'created' THEN
    PERFORM pg_notify(p_channel, p_session);
  END IF;
  RETURN NEXT;
END
$$ LANGUAGE plpgsql
"""

ADMIT_FUNCTION_11 = ADMIT_FUNCTION_2.replace(
    "  PERFORM pg_advisory_xact_lock(p_lock);\n",
    "  PERFORM 1 FROM sessions WHERE sessions.id = p_session FOR UPDATE;\n",
)

# Migration 11's admission notifying only when `p_channel` is given: a NOTIFY queued inside the
# admission's transaction would take PostgreSQL's cluster-wide notify lock at its commit
# (docs/store.md, "LISTEN"), so this wakeful passes NULL and announces a created item after the
# statement, from its notifier. The signature is unchanged: a process started before this
# migration still passes the channel and still notifies (inside, as before).
QUIET_ADMIT = ADMIT_FUNCTION_11.replace(
    "  IF o_outcome = 'created' THEN\n",
    "  IF o_outcome = 'created' AND p_channel IS NOT NULL THEN\n",
)

# Migration 31's admission (`_session_key`): the event goes to `event_log` under the session's
# integer key, which the counting UPDATE returns with the new `seq`. Outcomes, signature and
# notification unchanged.
KEYED_ADMIT = QUIET_ADMIT.replace(
    """RETURNING last_seq
  ), e AS (
    INSERT INTO events (session_id, seq, type, at_ms, data)
    SELECT p_session, s.last_seq, p_type, p_now, p_data FROM s RETURNING events.id, events.seq""",
    """RETURNING last_seq, k
  ), e AS (
    INSERT INTO event_log (sk, seq, type, at_ms, data)
    SELECT s.k, s.last_seq, p_type, p_now, p_data FROM s RETURNING event_log.id, event_log.seq""",
)
