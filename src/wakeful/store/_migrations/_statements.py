"""A migration's shape and how its script splits into statements (both backends apply each
statement in order, in one transaction per migration: `_sqlite.py`, `_postgres.py`)."""

from __future__ import annotations

Migration = tuple[int, str, str, str]  # (number, name, sqlite_sql, postgres_sql)


def statements(sql: str) -> list[str]:
    """Split a migration script into its statements at semicolons outside `$$` bodies and
    outside a SQLite trigger's `BEGIN ... END` body."""
    out: list[str] = []
    current = ""
    for i, part in enumerate(sql.split("$$")):
        if i % 2:  # inside a dollar-quoted body: semicolons belong to it
            current += f"$${part}$$"
            continue
        pieces = part.split(";")
        current += pieces[0]
        for piece in pieces[1:]:
            if _open_trigger(current):  # the semicolon ends a statement of the trigger's body
                current += ";" + piece
                continue
            out.append(current)
            current = piece
    out.append(current)
    return [s.strip() for s in out if s.strip()]


def _open_trigger(statement: str) -> bool:
    """Whether `statement` is a CREATE TRIGGER whose body has not reached its END yet."""
    text = statement.strip().upper()
    return text.startswith("CREATE TRIGGER") and not text.endswith("END")
