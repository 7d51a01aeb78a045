"""The marks of an `instructions.updated` delta that carry no value, a leaf module (`_types`
and the plain reading both use them; neither imports the other for them)."""

from __future__ import annotations

INSTRUCTION_REMOVED = "removed"
"""An `instructions.updated` delta's mark for a source that had a value and has none now."""
INSTRUCTION_ABSENT = "absent"
"""A complete delta's mark (a session's first, or the first after a rewind) for a source with no
value: nothing was removed, there was nothing. Deltas written before this mark say `removed`."""
NO_INSTRUCTION_VALUE = frozenset({INSTRUCTION_REMOVED, INSTRUCTION_ABSENT})
"""The marks of a delta that carry no value (every other mark is a SHA-256 digest)."""
