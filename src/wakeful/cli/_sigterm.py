"""SIGTERM held while the command line starts, so a command that stops cleanly on it (`worker`)
gets one sent while it was still importing and opening its store (issue 36: a worker killed
as it started died of the signal, exit -15, instead of stopping as a running one does).

`hold()` blocks SIGTERM in the main thread as `main` starts; a signal sent meanwhile stays
pending (the kernel keeps it), none is lost. `release()` restores the mask: a command that
takes SIGTERM calls it once its handler is in place, and the pending signal reaches that
handler; for every other command the group releases it before the command runs, so the
signal then does what it did before (ends the process). Only the main thread's mask changes,
and only on platforms with `pthread_sigmask` (not Windows, where nothing is held)."""

from __future__ import annotations

import signal
import threading

_held: set[int | signal.Signals] | None = None  # the mask before `hold`, while held


def hold() -> None:
    """Block SIGTERM in this process's main thread until `release` (idempotent)."""
    global _held
    if (
        _held is not None
        or not hasattr(signal, "pthread_sigmask")
        or threading.current_thread() is not threading.main_thread()
    ):
        return
    _held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})


def release() -> None:
    """Restore the mask `hold` changed: a SIGTERM sent meanwhile is delivered now, to the
    handler in place (idempotent; nothing when nothing is held)."""
    global _held
    if _held is None or threading.current_thread() is not threading.main_thread():
        return
    before, _held = _held, None
    signal.pthread_sigmask(signal.SIG_SETMASK, before)
