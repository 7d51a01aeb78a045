"""The id of a location (no pydantic here: `session show` prints it for a session row)."""

from __future__ import annotations

__all__ = ["location_id"]


def location_id(location: str) -> str:
    """The stable id of a location (an absolute workspace path): ``loc_`` + the first 16 hex
    characters of the SHA-256 of the path. The one place a location id is derived."""
    import hashlib  # (here: `hashlib` loads OpenSSL, which a session row's display may not need)

    return "loc_" + hashlib.sha256(location.encode("utf-8", "surrogateescape")).hexdigest()[:16]
