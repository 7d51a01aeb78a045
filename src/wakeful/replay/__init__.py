"""Replay and evals from recorded sessions (docs/replay.md): a recorded step's request sent to
other models (`replay_step`), a session re-driven through today's code against its recorded
replies (`check_session`, the `recorded` provider), and eval suites run as durable runs
(`load_suite`, `run_suite`, `report`). A run is a session of its own: nothing here writes to a
source session.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_names

if TYPE_CHECKING:
    from ._answer import ask, reply_diff
    from ._api import StepReplay, replay_step, run_suite
    from ._check import CheckResult, Difference, check_session
    from ._engine import Engine, Limits, Progress
    from ._recording import RecordedProvider, Recording, read_recording
    from ._report import compare, junit_xml, load_baseline, report, table_lines
    from ._runs import RunView, read_run
    from ._source import Recorded, Step, body_diff, body_text, label, load_step, pick, step_receipts
    from ._suite import Suite, load_suite

_LAZY = {
    "CheckResult": "wakeful.replay._check",
    "Difference": "wakeful.replay._check",
    "Engine": "wakeful.replay._engine",
    "Limits": "wakeful.replay._engine",
    "Progress": "wakeful.replay._engine",
    "Recorded": "wakeful.replay._source",
    "RecordedProvider": "wakeful.replay._recording",
    "Recording": "wakeful.replay._recording",
    "RunView": "wakeful.replay._runs",
    "Step": "wakeful.replay._source",
    "StepReplay": "wakeful.replay._api",
    "Suite": "wakeful.replay._suite",
    "ask": "wakeful.replay._answer",
    "body_diff": "wakeful.replay._source",
    "body_text": "wakeful.replay._source",
    "check_session": "wakeful.replay._check",
    "compare": "wakeful.replay._report",
    "junit_xml": "wakeful.replay._report",
    "label": "wakeful.replay._source",
    "load_baseline": "wakeful.replay._report",
    "load_step": "wakeful.replay._source",
    "load_suite": "wakeful.replay._suite",
    "pick": "wakeful.replay._source",
    "read_recording": "wakeful.replay._recording",
    "read_run": "wakeful.replay._runs",
    "replay_step": "wakeful.replay._api",
    "reply_diff": "wakeful.replay._answer",
    "report": "wakeful.replay._report",
    "run_suite": "wakeful.replay._api",
    "step_receipts": "wakeful.replay._source",
    "table_lines": "wakeful.replay._report",
}

__getattr__ = lazy_names(__name__, _LAZY, globals())

__all__ = [
    "CheckResult",
    "Difference",
    "RecordedProvider",
    "Recording",
    "check_session",
    "read_recording",
    "Engine",
    "Limits",
    "Progress",
    "Recorded",
    "RunView",
    "Step",
    "StepReplay",
    "Suite",
    "ask",
    "body_diff",
    "body_text",
    "compare",
    "junit_xml",
    "label",
    "load_baseline",
    "load_step",
    "load_suite",
    "pick",
    "read_run",
    "reply_diff",
    "replay_step",
    "report",
    "run_suite",
    "step_receipts",
    "table_lines",
]
