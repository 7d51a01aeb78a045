"""Defaults that modules below the configuration use without loading its pydantic models (cold
start, issue 25): `wakeful.config` declares its `[store]` fields' defaults with these, so each
value is written once."""

# SQLite: how long a writer waits for another's lock (`[store] busy_timeout_ms`).
SQLITE_BUSY_TIMEOUT_MS = 5_000
# PostgreSQL: lock wait, statement, and idle-in-transaction limits (`[store] *_timeout_ms`).
PG_LOCK_TIMEOUT_MS = 10_000
PG_STATEMENT_TIMEOUT_MS = 30_000
PG_IDLE_IN_TRANSACTION_TIMEOUT_MS = 5_000
