"""Memoizing a pure function of a message by the message object's identity.

Messages are frozen, so anything computed from one never changes. A memo entry keeps its message
alive, so the object's `id()` cannot be reused by another message while the entry exists. The
memo is bounded and drops its oldest entries first.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

from ._blocks import Message

T = TypeVar("T")


class IdentityMemo(Generic[T]):
    """`memo(message)` is `fn(message)`, computed once per message object (at most `size` kept)."""

    __slots__ = ("_fn", "_entries", "_size")

    def __init__(self, fn: Callable[[Message], T], size: int = 65_536) -> None:
        self._fn = fn
        self._entries: OrderedDict[int, tuple[Message, T]] = OrderedDict()
        self._size = size

    def __call__(self, message: Message) -> T:
        """`fn(message)`, from the memo when this very object was seen before."""
        hit = self._entries.get(id(message))
        if hit is not None and hit[0] is message:
            return hit[1]
        value = self._fn(message)
        self._entries[id(message)] = (message, value)
        if len(self._entries) > self._size:
            self._entries.popitem(last=False)
        return value
