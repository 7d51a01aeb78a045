"""`replay --check`: re-drive a recorded session through today's code (instructions, tools,
agents, history shaping, compaction), answered by its own recording with no network and no
key, and report the first request that differs from the recorded one.

The re-drive runs in a scratch store in a temporary directory, under the session's own id (the
id is part of some requests: OpenAI's `prompt_cache_key`), at the session's location, with the
session's model and agent. Each turn's inputs are sent as they started it (an input steered in
mid-turn is sent with its turn's first ones). Every request is answered by the `recorded`
provider (`_recording.py`), every tool call with its recorded result (the work-state tools run
for real), every approval is granted (the recorded result says what happened), retries wait
1 ms.

Invariant: the source session's store is only read. Requests compare by digest; a body that
differs only in the ids of its messages (the scripted provider's body carries them, and a
re-drive mints new ones) counts as the same request.
"""

from __future__ import annotations

import json
import re
import tempfile
from collections import deque
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import JsonValue

from ..config import Config, RetryConfig, load_config
from ..errors import LocationUnavailableError
from ..execution import Place, Runtime, Toolbox, off_loop
from ..instructions import Source
from ..providers import Provider, make_provider
from ..runner import Agent, Tool, rebuild_request
from ..store import SqlStore, open_store
from ._recording import (
    Exchange,
    Live,
    RecordedProvider,
    Recording,
    read_recording,
    recorded_tools,
)
from ._source import step_receipts

# The ids a re-drive mints anew (messages, turns) where a body carries them (scripted bodies do).
_ID = re.compile(r'"((?:msg|turn)_[A-Za-z0-9]+)"')


@dataclass(frozen=True, slots=True)
class Difference:
    """The first request of a re-drive that is not the recorded one: which (1-based, with its
    turn and step), both digests (None: that side sent no such request), the sections whose
    content changed (id, recorded digest, re-driven digest), and both bodies."""

    index: int
    label: str
    recorded_digest: str | None
    replayed_digest: str | None
    sections: tuple[tuple[str, str | None, str | None], ...]
    recorded_body: JsonValue
    replayed_body: JsonValue
    note: str = ""


@dataclass(frozen=True, slots=True)
class CheckResult:
    """A session's check: how many recorded requests, how many the re-drive reproduced before
    the first difference (all of them when `difference` is None), and how many of those had
    exactly the recorded digest (the others differed only in minted ids)."""

    session_id: str
    requests: int
    matched: int
    difference: Difference | None
    exact: int = 0

    @property
    def ok(self) -> bool:
        """Whether every request was reproduced."""
        return self.difference is None


class RecordedToolbox(Toolbox):
    """Today's tools for the agent, each answering from the recording (`recorded_tools`; for
    real once `live.on`)."""

    def __init__(self, recording: Recording, live: Live | None = None) -> None:
        super().__init__()
        self._recording = recording
        self._live = live

    def for_agent(
        self,
        agent: Agent,
        root: Path,
        config: Config,
        *,
        delegation: bool,
        off: Collection[str] = (),
    ) -> tuple[Agent, dict[str, Tool], list[Source]]:
        """The real tool list, its calls answered from the recording."""
        agent, tools, sources = super().for_agent(
            agent, root, config, delegation=delegation, off=off
        )
        return agent, recorded_tools(tools, self._recording.results, self._live), sources


class _Redrive(Runtime):
    """A runtime whose every model is the recorded provider over one shared answer queue."""

    def __init__(self, recording: Recording, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._answers: deque[Exchange] = deque(recording.exchanges)
        self.toolbox = RecordedToolbox(recording)

    def check_model(self, spec: str, place: Place | None = None) -> None:
        """Any model can be re-driven: nothing is sent."""

    def build_provider(self, spec: str, place: Place | None = None) -> Provider:
        """The recorded provider, shaping bodies as `spec`'s provider does."""
        config = self.config if place is None else place.config
        inner = make_provider(spec, **config.providers.options_for(spec))
        return RecordedProvider(inner, self._answers)


async def _allow(_name: str, _input: dict[str, object]) -> bool:
    return True


def _labels(store: SqlStore, session_id: str) -> dict[str, str]:
    labels = {
        s.receipt.receipt_id: f"turn {s.turn} step {s.receipt.step}"
        for s in step_receipts(store, session_id)
    }
    for r in store.receipts(session_id):
        labels.setdefault(r.receipt_id, f"{r.purpose} request")
    return labels


def _body(store: SqlStore, session_id: str, exchange: Exchange, config: Config) -> JsonValue:
    spec = exchange.receipt.model
    provider = make_provider(spec, **config.providers.options_for(spec))
    return provider.wire_request(
        rebuild_request(store, session_id, exchange.receipt, provider.name)
    )


def _normalized(body: JsonValue) -> str:
    """The body's canonical JSON with each minted id (a message's, a turn's) replaced by the
    order of its first appearance."""
    names: dict[str, str] = {}

    def rename(match: re.Match[str]) -> str:
        found = match.group(1)
        return f'"{names.setdefault(found, f"{found[:4]}#{len(names)}")}"'

    return _ID.sub(rename, json.dumps(body, sort_keys=True, ensure_ascii=False))


def _sections(
    a: Exchange | None, b: Exchange | None
) -> tuple[tuple[str, str | None, str | None], ...]:
    before = {sid: d for sid, _src, d in (a.receipt.sections if a else ())}
    after = {sid: d for sid, _src, d in (b.receipt.sections if b else ())}
    return tuple(
        (sid, before.get(sid), after.get(sid))
        for sid in dict.fromkeys([*before, *after])
        if before.get(sid) != after.get(sid)
    )


def compare(
    source: SqlStore,
    scratch: SqlStore,
    session_id: str,
    recorded: list[Exchange],
    replayed: list[Exchange],
    config: Config,
) -> CheckResult:
    """The first difference between the recorded and the re-driven requests, in order."""
    labels = _labels(source, session_id)
    exact = 0
    for n in range(max(len(recorded), len(replayed))):
        a = recorded[n] if n < len(recorded) else None
        b = replayed[n] if n < len(replayed) else None
        if a is not None and b is not None:
            if a.receipt.request_digest == b.receipt.request_digest:
                exact += 1
                continue
            body_a = _body(source, session_id, a, config)
            body_b = _body(scratch, session_id, b, config)
            if _normalized(body_a) == _normalized(body_b):
                continue  # the same request but for the ids the re-drive minted
        else:
            body_a = _body(source, session_id, a, config) if a else None
            body_b = _body(scratch, session_id, b, config) if b else None
        note = (
            "today's code sent no such request"
            if b is None
            else "today's code sent a request the recording does not have"
            if a is None
            else ""
        )
        label = labels.get(a.receipt.receipt_id, "request") if a else "an extra request"
        difference = Difference(
            n + 1,
            label,
            a.receipt.request_digest if a else None,
            b.receipt.request_digest if b else None,
            _sections(a, b),
            body_a,
            body_b,
            note,
        )
        return CheckResult(session_id, len(recorded), n, difference, exact)
    return CheckResult(session_id, len(recorded), len(recorded), None, exact)


def _redrive_config(root: Path) -> Config:
    """The configuration of the location at `root`, its retries without waiting: a re-drive
    sends the same requests however long the recording waited between them."""
    config = load_config(root)
    retry = RetryConfig(
        initial_delay_ms=1,
        max_delay_ms=1,
        jitter_percent=0,
        poll_interval_ms=1,
        max_retries=config.retry.max_retries,
    )
    return config.model_copy(update={"retry": retry})


async def check_session(store: SqlStore, session: str) -> CheckResult:
    """Re-drive `session` from its recording and compare every request (module docstring)."""
    sid = await off_loop(store.resolve_session_id, session)
    row = await off_loop(store.get_session, sid)
    recording = await off_loop(read_recording, store, sid)
    metadata: dict[str, JsonValue] = await off_loop(store.metadata, sid)
    root = Path(row.location) if row.location else Path.cwd()
    if not root.is_dir():  # its tools and instructions live there
        raise LocationUnavailableError(
            f"{sid} lives at {root}, which is not a directory on this host: check it there",
            location=str(root),
        )
    config = _redrive_config(root)
    with tempfile.TemporaryDirectory(prefix="wakeful-check-") as tmp:
        scratch = open_store(str(Path(tmp) / "check.db"))
        runtime = _Redrive(
            recording,
            store=scratch,
            workspace=root,
            config=config,
            model=row.model,
            agent=row.agent,
            ask=_allow,
        )
        try:
            await off_loop(
                scratch.create_session,
                sid,
                title=row.title,
                agent=row.agent,
                model=row.model,
                metadata=metadata,
                location=row.location,
            )
            for batch in recording.batches:
                for input_id in batch:
                    item = recording.inputs[input_id]
                    await off_loop(
                        runtime.send,
                        session_id=sid,
                        input_id=input_id,
                        kind=item.kind,
                        payload=item.payload,
                        delivery=item.delivery,
                        create=False,
                        resume=False,
                    )
                await runtime.drive(sid)
            replayed = (await off_loop(read_recording, scratch, sid)).exchanges
            return await off_loop(
                compare, store, scratch, sid, recording.exchanges, replayed, config
            )
        finally:
            await runtime.aclose()
