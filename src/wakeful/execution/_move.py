"""Moving a session: admission checks the destination; the move itself is delivered between
turns (`wakeful.store`: `session.moved` and a system message commit with the delivery); the
driver then rebinds the turn's context to the new location (tools, instruction sources,
configuration, permissions) and records the instruction values read there as a delta.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ..errors import UsageError
from ..instructions import sync_instructions
from ..store import ClaimToken, LocalStore
from ._port import SessionSetup


def existing_location(path: str | Path, what: str = "move") -> str:
    """`path` as the absolute, resolved directory a session may live in (be created at, or
    move to); a one-line `UsageError` starting with `what` when it is not a directory on this
    host."""
    text = str(path)
    if not text.strip():
        raise UsageError(f"{what}: the location must not be empty")
    try:
        resolved = Path(text).expanduser().resolve()
        found = resolved.is_dir()
        where = str(resolved)
        where.encode("utf-8")  # a lone surrogate cannot be stored as text
    except (OSError, ValueError, RuntimeError):  # a NUL, an undecodable name, a symlink loop
        found = False
    if not found or "\0" in text:
        raise UsageError(f"{what}: {text!r} is not a directory on this host")
    return where


def rebind(
    store: LocalStore,
    session_id: str,
    claim: ClaimToken | None,
    make_context: Callable[[], SessionSetup],
) -> SessionSetup:
    """How the session runs at its (new) location, under the same claim, after its
    instruction sources were read there and any change admitted as a delta (with its
    chronological system message). `LocationUnavailableError` when this driver does not
    serve the new location."""
    fresh = make_context()
    sync_instructions(store, session_id, fresh.ctx.instruction_sources, claim)
    return fresh
