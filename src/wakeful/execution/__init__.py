"""Coordinator, claims and leases, interruption, recovery, workers; and the `Runtime` facade."""

from ._coordinator import Coordinator, SessionNotFoundError
from ._drain import DrainOptions, DrainResult, drain
from ._owner import current_owner, owner_is_dead
from ._runtime import Runtime, SendResult, default_model, run_sync
from ._worker import WorkerStats, run_worker

__all__ = [
    "Coordinator",
    "DrainOptions",
    "DrainResult",
    "Runtime",
    "SendResult",
    "SessionNotFoundError",
    "WorkerStats",
    "current_owner",
    "default_model",
    "drain",
    "owner_is_dead",
    "run_sync",
    "run_worker",
]
