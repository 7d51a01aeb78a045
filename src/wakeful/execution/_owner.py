"""Who a driver is and whether it lives: owned by `wakeful.store` (claims and the status a
listing shows both need it); re-exported here for the execution layer."""

from __future__ import annotations

from ..store import current_owner, host_id, owner_is_dead

__all__ = ["current_owner", "host_id", "owner_is_dead"]
