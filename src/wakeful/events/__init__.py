"""Durable event types (the facts) and the codec for them. No I/O.

Every change to a session is one of these events; the store writes an event and the projection
rows it implies in one transaction.
"""

from ._codec import StoredEvent, dump_event, load_event
from ._types import (
    CONTROL_KINDS,
    CompactionEnded,
    Delivery,
    InputDelivered,
    InputEnqueued,
    InputKind,
    InputRejected,
    InstructionsUpdated,
    MessageAdded,
    Outcome,
    ReceiptRecorded,
    RetryCleared,
    RetryScheduled,
    SessionCreated,
    SessionError,
    SessionEvent,
    SessionUpdated,
    ToolCallEnded,
    ToolCallStarted,
    ToolStatus,
    TurnEnded,
    TurnStarted,
    UsageRecorded,
    WorkStateUpdated,
)

__all__ = [
    "CONTROL_KINDS",
    "CompactionEnded",
    "Delivery",
    "InputDelivered",
    "InputEnqueued",
    "InputKind",
    "InputRejected",
    "InstructionsUpdated",
    "MessageAdded",
    "Outcome",
    "ReceiptRecorded",
    "RetryCleared",
    "RetryScheduled",
    "SessionCreated",
    "SessionError",
    "SessionEvent",
    "SessionUpdated",
    "StoredEvent",
    "ToolCallEnded",
    "ToolCallStarted",
    "ToolStatus",
    "TurnEnded",
    "TurnStarted",
    "UsageRecorded",
    "WorkStateUpdated",
    "dump_event",
    "load_event",
]
