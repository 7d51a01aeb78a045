"""Defaults that modules below the configuration use without loading its pydantic models (cold
start, issue 25): `wakeful.config` declares its `[store]` fields' defaults with these, so each
value is written once."""

# SQLite: how long a writer waits for another's lock (`[store] busy_timeout_ms`).
SQLITE_BUSY_TIMEOUT_MS = 5_000
# PostgreSQL: lock wait, statement, and idle-in-transaction limits (`[store] *_timeout_ms`).
PG_LOCK_TIMEOUT_MS = 10_000
PG_STATEMENT_TIMEOUT_MS = 30_000
PG_IDLE_IN_TRANSACTION_TIMEOUT_MS = 5_000

# Claims and drains (`[execution]`; `DrainOptions` for a drain started without a configuration):
# how long a claim's lease runs unless renewed, how often recovery of one input is attempted
# before it is rejected, and how often a waiting driver polls the store.
LEASE_MS = 30_000
MAX_RECOVERY_ATTEMPTS = 3
POLL_INTERVAL_MS = 250
# How many sessions one worker process drives at once (`wakeful worker --concurrency`): sized
# for sessions that mostly wait on a model (docs/execution.md, "Sizing a worker").
WORKER_CONCURRENCY = 32
# Durable retry (`[retry] poll_interval_ms`): how often a waiting retry looks for new input.
RETRY_POLL_INTERVAL_MS = 250
