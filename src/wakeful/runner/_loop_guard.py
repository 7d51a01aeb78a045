"""Loop guards: a turn that repeats itself pauses with reason `loop` instead of spending on.

Two rules, over the tool calls of one turn, each call seen as (name, input, result): the same
call with the same input and the same result made `repeats` times, or `no_progress_steps`
steps in a row whose every call repeats one already made in the turn with the same result
(nothing new came back). Either raises `LoopDetected`; the turn then ends `paused` with
`error_kind` `loop` and a message naming the repeated call (`docs/spend.md`). A new prompt
continues the session. `[loop_guard]` in `wakeful.toml` sets the thresholds or turns it off.

The counts live in the turn's runner: a turn resumed in another process after a crash starts
counting again, so the guard can only come later, never earlier, than configured.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence

from ..config import LoopGuardConfig
from ..messages import ToolCallBlock, ToolResultBlock, tool_result_text

LOOP_KIND = "loop"  # the `error_kind` of a turn a loop guard paused
SHOWN_INPUT_CHARS = 200  # of the repeated call's input, in the pause's message


class LoopDetected(Exception):
    """Raised inside a turn when a loop guard trips; the message names the repeated call."""


def _key(call: ToolCallBlock, result: ToolResultBlock | None) -> tuple[str, str, str]:
    args = json.dumps(call.input, sort_keys=True, ensure_ascii=False)
    out = "" if result is None else f"{result.is_error}:{tool_result_text(result.output)}"
    return call.name, args, out


def _shown(name: str, args: str) -> str:
    short = args if len(args) <= SHOWN_INPUT_CHARS else args[:SHOWN_INPUT_CHARS] + "…"
    return f"{name} {short}"


class LoopGuard:
    """The counts of one turn's tool calls (see the module docstring)."""

    def __init__(self, config: LoopGuardConfig) -> None:
        self.config = config
        self._seen: Counter[tuple[str, str, str]] = Counter()
        self._stalled = 0  # steps in a row that brought nothing new

    def observe(self, calls: Sequence[ToolCallBlock], results: Sequence[ToolResultBlock]) -> None:
        """Count one step's calls and their results; `LoopDetected` when a rule trips."""
        if not self.config.enabled or not calls:
            return
        by_id = {r.call_id: r for r in results}
        new = False
        for call in calls:
            key = _key(call, by_id.get(call.id))
            new = new or key not in self._seen
            self._seen[key] += 1
            if self._seen[key] >= self.config.repeats:
                raise LoopDetected(
                    f"loop: the same call with the same result {self._seen[key]} times in this "
                    f"turn: {_shown(key[0], key[1])}"
                )
        self._stalled = 0 if new else self._stalled + 1
        if self._stalled >= self.config.no_progress_steps:
            name, args, _ = max(self._seen, key=lambda k: self._seen[k])
            raise LoopDetected(
                f"loop: {self._stalled} steps in a row brought no new tool result; most "
                f"repeated: {_shown(name, args)}"
            )
