"""Named crash points for the crash tests: `crash_point(label)` kills this process with SIGKILL.

A no-op unless the environment variable `WAKEFUL_CRASH_AT` names the label. The value is
``LABEL`` (crash at the first hit) or ``LABEL@N`` (crash at the N-th hit in this process). The
crash tests start a real `wakeful` process with the variable set, let it die at that exact point,
and check what a new process recovers from the store. Nothing else may depend on it: production
processes never set the variable. It is read once, when the process imports this module (the
tests set it in the environment a process starts with), so a point costs a comparison: a
recovered session passes a dozen of them, and `os.environ.get` is three Python calls.

Labels (where they sit):

- ``drain.claimed``: a drain took its claim and has written nothing else.
- ``drain.healed``: recovery failed the calls an earlier process left running.
- ``receipt.before`` / ``receipt.after``: around persisting a physical attempt's receipt. A
  step after a read-only tool step has its receipt built ahead and written by the step
  boundary (`RequestBuilder.build_ahead`): then ``receipt.before`` is hit before that boundary's
  write (the held reply and results are not durable yet; when a delivery there means the
  receipt is not written, the attempt hits it again before its own write), ``receipt.after``
  after it when it wrote the receipt; either way ``receipt.after`` means the receipt is
  durable and no request was sent.
- ``stream.delta``: each streamed text chunk (use ``@N`` to die mid-stream).
- ``reply.saved``: the assistant message is durable, with its calls' `tool.started`
  (committed together); no tool has run.
- ``approval.requested``: the reply and its calls' `approval.requested` are durable (no call
  started), the turn's `turn.ended` (paused, awaiting approval) is not.
- ``approval.started``: the decided calls' `tool.started` are durable, none has run.
- ``retry.wait``: a retry deadline was persisted, before the wait.
- ``tool.started``: the tool step begins, no tool has run; the calls are durable unless all
  are read-only (a read-only step commits its reply together with the results).
- ``tool.done``: every tool finished its side effect, results not yet persisted.
- ``tool.saving``: saving the results failed with a transient store fault; before the wait.
- ``compaction.summarizing``: a compaction's summary receipt is durable, its request not sent.
- ``turn.ending``: the final reply is durable, `turn.ended` is not.
- ``rewind.file``: a rewind renamed one more file into place (``@N``: after the N-th), the
  others not yet; its `session.reverted` is not written.
- ``rewind.files``: a rewind restored the files, its `session.reverted` is not written.
- ``child.reported``: a background child settled and its report is in the parent's inbox;
  the parent was not woken yet.
"""

from __future__ import annotations

import os
import signal

ENV = "WAKEFUL_CRASH_AT"

_hits: dict[str, int] = {}
_AT = os.environ.get(ENV) or None  # (read once: see the module docstring)


def crash_point(label: str) -> None:
    """Die here with SIGKILL when `WAKEFUL_CRASH_AT` selects `label` (see the module docstring)."""
    if _AT is None:
        return
    name, _, nth = _AT.partition("@")
    if name != label:
        return
    _hits[label] = _hits.get(label, 0) + 1
    if _hits[label] >= int(nth or 1):
        os.kill(os.getpid(), signal.SIGKILL)
