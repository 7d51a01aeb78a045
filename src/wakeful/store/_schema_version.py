"""The migrations' numbers, apart from their SQL: opening a store that is up to date reads only
these (`_sqlite._open`), and imports `_migrations` (every era's scripts) only when a migration
is to run. A new migration adds its number at the end; `tests/store/test_migrations.py` checks
them against the era modules (13, 14 and 16 were never released)."""

from __future__ import annotations

NUMBERS: tuple[int, ...] = (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 15, 17, 18, 19, 20)
NUMBERS += (
    21,
    22,
    23,
    24,
    25,
    26,
    27,
    28,
    29,
    30,
    31,
    32,
    33,
    34,
    35,
    36,
    37,
)  # `_v21`: a new number goes at the end

LATEST = NUMBERS[-1]
