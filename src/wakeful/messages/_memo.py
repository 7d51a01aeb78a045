"""Memoizing a pure function of a message (or of any object treated as read-only) by the
object's identity.

Messages are frozen, so anything computed from one never changes. A memo entry keeps its object
alive, so the object's `id()` cannot be reused by another one while the entry exists. The memo is
bounded and drops its oldest entries first.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from itertools import compress, count
from operator import eq, is_, is_not, ne, not_
from typing import Any, Generic, TypeVar

from ._blocks import Message

A = TypeVar("A")
T = TypeVar("T")


class IdentityMemo(Generic[A, T]):
    """`memo(obj)` is `fn(obj)`, computed once per object (at most `size` kept). The object must
    not change while it is in the memo (a message is frozen; a JSON value is used read-only)."""

    __slots__ = ("_fn", "_entries", "_size")

    def __init__(self, fn: Callable[[A], T], size: int = 65_536) -> None:
        self._fn = fn
        self._entries: OrderedDict[int, tuple[A, T]] = OrderedDict()
        self._size = size

    def __call__(self, message: A) -> T:
        """`fn(message)`, from the memo when this very object was seen before."""
        hit = self._entries.get(id(message))
        if hit is not None and hit[0] is message:
            return hit[1]
        value = self._fn(message)
        self._entries[id(message)] = (message, value)
        if len(self._entries) > self._size:
            self._entries.popitem(last=False)
        return value


class PrefixMemo(Generic[T]):
    """`memo(messages)` is `[fn(m) for m in messages]`, reusing the values of an earlier call
    for the messages these start with (the very same objects, as far as both agree: a growing
    history whose newest message was replaced by its stored copy costs what changed). `fn` must
    be pure; one entry is kept per first message (a session's history), at most `size`. The
    returned list is shared: read it, do not change it."""

    __slots__ = ("_fn", "_entries", "_size")

    def __init__(self, fn: Callable[[Message], T], size: int = 64) -> None:
        self._fn = fn
        self._entries: OrderedDict[int, tuple[tuple[Message, ...], list[T]]] = OrderedDict()
        self._size = size

    def __call__(self, messages: tuple[Message, ...]) -> list[T]:
        """The values of `messages`, in order."""
        if not messages:
            return []
        key = id(messages[0])
        hit = self._entries.get(key)
        fn = self._fn
        if hit is None:
            out = [fn(m) for m in messages]
        else:
            seen, values = hit
            kept = shared_prefix(seen, messages)
            if kept == len(seen) == len(messages):
                out = values
            else:
                out = values[:kept] + [fn(m) for m in messages[kept:]]
        self._entries[key] = (messages, out)
        self._entries.move_to_end(key)
        if len(self._entries) > self._size:
            self._entries.popitem(last=False)
        return out


class PrefixTotal:
    """`total(messages)` is `sum(fn(m) for m in messages)`, kept as running totals per history
    (one entry per first message, at most `size`): a request that extends the last one of its
    history (the same objects, as far as both agree) costs its new messages and one pass in C
    to find where they start, not a copy and a sum of the whole history. `fn` must be pure and
    return an int."""

    __slots__ = ("_fn", "_entries", "_size")

    def __init__(self, fn: Callable[[Message], int], size: int = 64) -> None:
        self._fn = fn
        # id(first message) -> (the last messages of that history, totals[i]: the first i's)
        self._entries: OrderedDict[int, tuple[tuple[Message, ...], list[int]]] = OrderedDict()
        self._size = size

    def __call__(self, messages: tuple[Message, ...]) -> int:
        """The sum of `fn` over `messages`."""
        if not messages:
            return 0
        key = id(messages[0])
        hit = self._entries.get(key)
        if hit is None:
            totals, kept = [0], 0
        else:
            seen, totals = hit
            kept = len(seen) if seen is messages else shared_prefix(seen, messages)
            del totals[kept + 1 :]
        fn = self._fn
        total = totals[kept]
        for message in messages[kept:]:
            total += fn(message)
            totals.append(total)
        self._entries[key] = (messages, totals)
        self._entries.move_to_end(key)
        if len(self._entries) > self._size:
            self._entries.popitem(last=False)
        return total


def shared_prefix(
    a: Sequence[object], b: Sequence[object], same: Callable[[Any, Any], bool] = is_
) -> int:
    """How many leading items `a` and `b` share: the same objects, or equal ones with `same=eq`.
    Compared in C, in one pass that stops at the first difference and builds no list (`map`,
    `compress`): a Python loop over a long history cost more than `fn` itself."""
    differ = _DIFFER.get(same)
    differs = map(differ, a, b) if differ is not None else map(not_, map(same, a, b))
    return next(compress(count(), differs), min(len(a), len(b)))


_DIFFER: dict[Callable[[Any, Any], bool], Callable[[Any, Any], bool]] = {is_: is_not, eq: ne}
