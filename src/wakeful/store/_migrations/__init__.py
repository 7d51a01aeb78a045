"""Numbered schema migrations for both backends, each applied once and recorded.

Invariant: a migration, once released, never changes; a new need is a new number. Each entry is
`(number, name, sqlite_sql, postgres_sql)` (`Migration`). `MIGRATIONS` is one ordered list, made
of eras, one module each: `_v01` (1-10), `_v11` (11-20), `_v21` (21 on). **A new migration is
appended to the end of `_v21.ERA`** (or of the newest era module, once there is a later one),
numbered one above the last entry, and its number is added to `_schema_version.NUMBERS` (an
up-to-date open reads those and imports no era); a rebase that meets another new
migration there renumbers its own after it. The backends apply them (`_sqlite._migrate`, `PostgresBackend._migrate`),
splitting each script with `statements`.
"""

from __future__ import annotations

from .._schema_version import LATEST
from . import _v01, _v11, _v21
from ._statements import Migration, statements

MIGRATIONS: list[Migration] = [*_v01.ERA, *_v11.ERA, *_v21.ERA]

__all__ = ["LATEST", "MIGRATIONS", "Migration", "statements"]
