"""`Place`: a session's location as this process serves it (docs/locations.md)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..config import Config


@dataclass(frozen=True, slots=True)
class Place:
    """A location as a driver serves it: the workspace root (the tools' root, where the
    instruction sources are read) and the configuration of that workspace."""

    root: Path
    config: Config
