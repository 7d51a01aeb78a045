"""Migration 24: the requests' usage by time, for what a per-day budget reads
(`_usage.agent_spend_in`, `user_spend_in`): one index entry per request, none for the other
events. A leaf module, so the migrations import no reader."""

USAGE_AT = "CREATE INDEX events_usage_at ON events (at_ms) WHERE type = 'usage.recorded'"
