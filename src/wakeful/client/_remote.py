"""`RemoteStore`: a server's sessions through the store's own read and admission methods.

It implements the `wakeful.store.Store` protocol in full and answers with the store's records
(`SessionRow`, `Page`, `StoredEvent`, `SyncMarker`, `InboxItem`, `Message`, `ReceiptRecorded`,
`PruneCounts`, `Claim`), so code written against `Store` for listing, showing, following and
admitting works against a server unchanged. It also writes what a host that keeps sessions
writes (create, append, prune, blobs: `docs/hosts.md`), with the server fencing each append by
a claim of its own. Writes that only a driver makes (claims, promotion) are not offered: the
server's own coordinator drives its sessions. What the server redacts stays redacted here
(reading a blob by digest needs the sensitive scope).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

from pydantic import JsonValue

from ..errors import NotFoundError, UsageError
from ..events import (
    Delivery,
    InputKind,
    ReceiptRecorded,
    SessionEvent,
    StoredEvent,
    ToolCallEnded,
    ToolCallStarted,
    load_event,
)
from ..messages import Message, message_from_dict
from ..store import (
    Admission,
    Claim,
    InboxItem,
    Page,
    PruneCounts,
    SearchHit,
    SearchPage,
    SessionRow,
    SessionSummary,
    SyncMarker,
    ToolCallRow,
)
from ._sync import Client


def session_row(data: dict[str, Any]) -> SessionRow:
    """A `SessionRow` from the API's session JSON."""
    usage = data["usage"]
    return SessionRow(
        data["id"],
        data["parent_id"],
        data["root_id"],
        data["forked_from"],
        data["fork_seq"],
        data["title"],
        data["agent"],
        data["model"],
        data["status"],
        bool(data["archived"]),
        int(data["created_ms"]),
        int(data["updated_ms"]),
        int(data["last_seq"]),
        int(usage["input_tokens"]),
        int(usage["output_tokens"]),
        float(usage["cost_usd"]),
        data.get("location"),
        data.get("waiting_for"),
        int(usage.get("cache_read_tokens", 0)),
        int(usage.get("cache_write_tokens", 0)),
    )


def stored_event(data: dict[str, Any]) -> StoredEvent:
    """A `StoredEvent` from the API's event JSON."""
    return StoredEvent(
        int(data["id"]),
        data["session_id"],
        int(data["seq"]),
        int(data["at_ms"]),
        load_event(json.dumps(data["data"])),
    )


def _item(session_id: str, data: dict[str, Any]) -> InboxItem:
    return InboxItem(
        session_id,
        data["input_id"],
        int(data["seq"]),
        data["kind"],
        data["delivery"],
        data["payload"],
        data["status"],
    )


class RemoteStore:
    """The store of a server at `url` (`http://HOST:PORT`); `token` as for `Client`, `headers`
    sent with every request, `timeout` (seconds) bounding each (the seed's `createRemoteStore`
    options)."""

    def __init__(
        self,
        url: str,
        token: str | None = None,
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float = 30.0,
        client: Client | None = None,
    ) -> None:
        self.client = client or Client(url, token, headers=headers, timeout=timeout)
        self._url = url

    @property
    def url(self) -> str:
        """The server's base URL."""
        return self._url

    def close(self) -> None:
        """Close the HTTP connections."""
        self.client.close()

    # -- sessions ----------------------------------------------------------------------------

    def list_sessions(
        self,
        *,
        roots_only: bool = True,
        archived: bool | None = False,
        limit: int = 50,
        cursor: str | None = None,
        agent: str | None = None,
        location: str | None = None,
    ) -> Page:
        """A page of sessions, newest first (of `agent`, at `location`, when given; the API
        caps a page at 500)."""
        rows: list[SessionRow] = []
        while True:
            page = self.client.list_sessions(
                roots=roots_only,
                archived=archived,
                limit=min(limit - len(rows), 500),
                cursor=cursor,
                agent=agent,
                location=location,
            )
            rows += [session_row(s) for s in page["sessions"]]
            cursor = page["next_cursor"]
            if cursor is None or len(rows) >= limit:
                return Page(rows, cursor)

    def search(
        self,
        text: str,
        *,
        roots_only: bool = False,
        archived: bool | None = False,
        limit: int = 20,
        offset: int = 0,
    ) -> SearchPage:
        """Sessions whose content matches `text`, best first (the server's `GET /sessions?q=`)."""
        page = self.client.list_sessions(
            roots=roots_only,
            archived=archived,
            limit=min(limit, 500),
            cursor=str(offset) if offset else None,
            q=text,
        )
        hits = [
            SearchHit(session_row(s), int(s["match"]["seq"]), s["match"]["snippet"])
            for s in page["sessions"]
            if s.get("match")
        ]
        more = page["next_cursor"]
        return SearchPage(hits, None if more is None else int(more))

    def get_session(self, session_id: str) -> SessionRow:
        """The session's row; `NotFoundError` if there is none."""
        return session_row(self.client.get_session(session_id))

    def children(self, session_id: str) -> list[SessionRow]:
        """The session's child sessions (the server reads them from its index)."""
        ids = self.client.get_session(session_id).get("children", [])
        return [session_row(self.client.get_session(cid)) for cid in ids]

    def resolve_session_id(self, ref: str) -> str:
        """The full id of the session `ref` (an id or a unique prefix) names; the server
        resolves it (`NotFoundError`, or a `UsageError` naming the candidates)."""
        return self.get_session(ref).id

    def session_summaries(self, session_ids: Sequence[str]) -> dict[str, SessionSummary]:
        """What a listing shows beside each session, from each session's page."""
        out: dict[str, SessionSummary] = {}
        for sid in dict.fromkeys(session_ids):
            try:
                s = self.client.get_session(sid)["summary"]
            except NotFoundError:  # as a local store: an unknown session counts nothing
                out[sid] = SessionSummary()
                continue
            out[sid] = SessionSummary(
                s["turns"],
                s["child_sessions"],
                s["user_messages"],
                s["artifacts"],
                s["first_prompt"],
            )
        return out

    def find_session(self, session_id: str) -> SessionRow | None:
        """The session's row, or None."""
        try:
            return self.get_session(session_id)
        except NotFoundError:
            return None

    def high_water(self, session_id: str) -> int:
        """The session's newest `seq`."""
        return self.get_session(session_id).last_seq

    def work_state(self, session_id: str) -> dict[str, JsonValue]:
        """Goal, plan, todos and jobs by kind."""
        value: dict[str, JsonValue] = self.client.get_session(session_id)["work_state"]
        return value

    def current_claim(self, session_id: str) -> Claim | None:
        """The session's unreleased claim as the server reports it (no token: it is not yours)."""
        claim = self.client.get_session(session_id)["claim"]
        if claim is None:
            return None
        return Claim(
            session_id,
            claim["owner"],
            "",
            int(claim["epoch"]),
            int(claim["lease_until_ms"]),
            int(claim["attempts"]),
        )

    def fork(self, session_id: str, through_seq: int | None = None, **fields: Any) -> SessionRow:
        """Fork through `through_seq`; only `title` may be set."""
        extra = set(fields) - {"title"}
        if extra:
            raise UsageError(f"a remote fork sets only title, not {', '.join(sorted(extra))}")
        return session_row(self.client.fork(session_id, through_seq, title=fields.get("title")))

    def set_archived(self, session_id: str, archived: bool = True) -> None:
        """Set or clear the archive marker."""
        self.client.archive(session_id, archived)

    def delete(self, session_id: str, *, actor: str | None = None) -> PruneCounts:
        """Delete a session and its children. `actor` is not sent: the server records the
        user of this client's token as who deleted it."""
        c = self.client.delete(session_id)
        return PruneCounts(
            sessions=c["sessions"], events=c["events"], messages=c["messages"], roots=c["roots"]
        )

    # -- transcript, inbox, receipts ---------------------------------------------------------

    def messages_with_seq(
        self, session_id: str, after_seq: int = 0, limit: int | None = None
    ) -> list[tuple[int, Message]]:
        """The transcript with each message's `seq`: after `after_seq`, at most `limit` (the
        API serves at most 1,000 a request: a larger limit reads several pages)."""
        out: list[tuple[int, Message]] = []
        while True:
            want = None if limit is None else min(limit - len(out), 1000)
            data = self.client.messages(session_id, after_seq, limit=want)
            out += [(int(m["seq"]), message_from_dict(m["message"])) for m in data["messages"]]
            after = data.get("next_after")
            if want is None or after is None or len(out) == limit:
                return out
            after_seq = int(after)

    def messages(
        self, session_id: str, after_seq: int = 0, limit: int | None = None
    ) -> list[Message]:
        """The transcript in log order (a page: see `messages_with_seq`)."""
        return [m for _, m in self.messages_with_seq(session_id, after_seq, limit)]

    def pending(self, session_id: str) -> list[InboxItem]:
        """Pending inbox items in enqueue order."""
        return [_item(session_id, i) for i in self.client.pending(session_id)["items"]]

    def admit(
        self,
        session_id: str,
        input_id: str | None,
        kind: InputKind,
        payload: dict[str, JsonValue],
        delivery: Delivery = "steer",
        *,
        resume: bool = False,
    ) -> Admission:
        """Admit a user input (`payload`: text or blocks); with `resume`, the server drives it."""
        if kind != "user":
            raise UsageError("a remote store admits user inputs only (compaction: Client.compact)")
        text, blocks = payload.get("text"), payload.get("blocks")
        meta = payload.get("metadata")
        out = self.client.prompt(
            session_id,
            text if isinstance(text, str) else None,
            # The server validates each block (a 422 names a malformed one): passed as given.
            blocks=blocks if isinstance(blocks, list) else None,  # type: ignore[arg-type]  # JSON values the server checks
            input_id=input_id,
            delivery=delivery,
            resume=resume,
            metadata=meta if isinstance(meta, dict) else None,
        )
        item = InboxItem(
            session_id,
            out["input_id"],
            0,
            "user",
            delivery,
            payload,
            out["status"],
            out.get("message_id"),
        )
        return Admission(item, bool(out["created"]))

    def tool_calls(self, session_id: str, status: str | None = None) -> list[ToolCallRow]:
        """Tool calls in start order (optionally only those with `status`), folded from the
        session's `tool.started` and `tool.ended` events as the store's projection is."""
        calls: dict[tuple[str, str], ToolCallRow] = {}
        for ev in self.events(session_id, types=("tool.started", "tool.ended")):
            e = ev.event
            if isinstance(e, ToolCallStarted):
                calls[(e.message_id, e.call_id)] = ToolCallRow(
                    e.message_id, e.call_id, e.name, "running", ev.seq
                )
            elif isinstance(e, ToolCallEnded) and (e.message_id, e.call_id) in calls:
                row = calls[(e.message_id, e.call_id)]
                calls[(e.message_id, e.call_id)] = replace(row, status=e.status)
        rows = sorted(calls.values(), key=lambda r: r.started_seq)
        return [r for r in rows if status is None or r.status == status]

    def receipts(self, session_id: str) -> list[ReceiptRecorded]:
        """Prompt receipts (sections as digests)."""
        out = []
        for r in self.client.receipts(session_id)["receipts"]:
            out.append(
                ReceiptRecorded(
                    receipt_id=r["receipt_id"],
                    turn_id=r["turn_id"],
                    step=r["step"],
                    attempt=r["attempt"],
                    model=r["model"],
                    request_digest=r["request_digest"],
                    sections=tuple((s["id"], s["source"], s["digest"]) for s in r["sections"]),
                    message_ids=tuple(r["message_ids"]),
                    purpose=r["purpose"],
                )
            )
        return out

    # -- what hosts that keep sessions write (docs/hosts.md) ---------------------------------

    def create_session(self, session_id: str | None = None, **fields: Any) -> SessionRow:
        """Create a top-level session (with `session_id`, that id: `ConflictError` when taken)
        of `title`, `agent`, `model`, `metadata` and `location` (a directory of the server's
        host; default: the server's workspace). The server checks agent and model."""
        extra = set(fields) - {"title", "agent", "model", "metadata", "location"}
        if extra:
            raise UsageError(
                f"a remote store creates top-level sessions of title, agent, model, "
                f"metadata and location, not {', '.join(sorted(extra))}"
            )
        made = self.client.create_session(session_id=session_id, **fields)
        return session_row(made["session"])

    def update_session(self, session_id: str, claim: Any = None, **fields: Any) -> None:
        """Rename the session (`title` only: agent and model change through a fork or the
        server's own commands)."""
        if claim is not None or set(fields) != {"title"}:
            raise UsageError("a remote store updates a session's title only, without a claim")
        self.client.rename(session_id, fields["title"])

    def append(
        self,
        session_id: str,
        events: Sequence[SessionEvent],
        claim: Any = None,
        *,
        blobs: Sequence[bytes] = (),
    ) -> list[StoredEvent]:
        """Append events of the kinds a host may write (messages, work state, usage) and store
        `blobs` with them, in one transaction on the server, which takes the session's claim
        for the write itself (so `claim` must be None). `ConflictError` while a driver holds
        the session; `UsageError` names a kind a host may not write."""
        if claim is not None:
            raise UsageError("a remote append takes no claim: the server fences it itself")
        bodies = [e.model_dump(mode="json", exclude_none=True) for e in events]
        out = self.client.append_events(session_id, bodies, blobs)
        at = int(out["at_ms"])
        return [
            StoredEvent(int(i), session_id, int(seq), at, e)
            for i, seq, e in zip(out["ids"], out["seqs"], events, strict=True)
        ]

    def prune(self, older_than_ms: int, action: str = "preview") -> PruneCounts:
        """Root sessions idle since before `older_than_ms`: `preview`, `archive` or `delete`."""
        c = self.client.prune(older_than_ms, action)
        return PruneCounts(
            sessions=c["sessions"], events=c["events"], messages=c["messages"], roots=c["roots"]
        )

    def put_blob(self, data: bytes, session_id: str | None = None) -> str:
        """Store bytes once by SHA-256 and return the digest; with a session, reference it."""
        return str(self.client.put_blob(data, session_id)["digest"])

    def get_blob(self, digest: str) -> bytes:
        """The bytes of a blob (the token needs the sensitive scope); `NotFoundError` if absent."""
        return self.client.get_blob(digest)

    def get_blobs(self, digests: Sequence[str]) -> dict[str, bytes]:
        """The bytes of each blob in `digests`, by digest; `NotFoundError` if any is absent."""
        return {d: self.get_blob(d) for d in dict.fromkeys(digests)}

    # -- the log -----------------------------------------------------------------------------

    def events(
        self, session_id: str, after: int = 0, limit: int | None = None, types: Sequence[str] = ()
    ) -> list[StoredEvent]:
        """Durable events with `seq > after`, in order (optionally of some types)."""
        if after == 0:
            self.get_session(session_id)  # an unknown session is an error, as in SqlStore
        out: list[StoredEvent] = []
        while limit is None or len(out) < limit:
            page = self.client.events(session_id, after, limit=1000)
            for data in page["events"]:
                ev = stored_event(data)
                if not types or ev.type in types:
                    out.append(ev)
            if not page["events"]:
                break
            after = int(page["next_after"])
        return out if limit is None else out[:limit]

    def log(
        self,
        session_id: str,
        after: int = 0,
        *,
        follow: bool = False,
        idle_timeout_s: float | None = None,
        stop: Callable[[], bool] | None = None,
    ) -> Iterator[StoredEvent | SyncMarker]:
        """Durable events after `after`; with `follow`, a `SyncMarker` then live events."""
        self.get_session(session_id)
        stream = self.client.log(
            session_id, after, follow=follow, idle_timeout=idle_timeout_s, pings=True
        )
        yield from self._convert(stream, "seq", stop)

    def log_all(
        self,
        after_id: int = 0,
        *,
        follow: bool = False,
        idle_timeout_s: float | None = None,
        stop: Callable[[], bool] | None = None,
    ) -> Iterator[StoredEvent | SyncMarker]:
        """The instance-wide log in its order (`after_id`: the last id seen); same contract as `log`."""
        stream = self.client.events_stream(
            after_id, follow=follow, idle_timeout=idle_timeout_s, pings=True
        )
        yield from self._convert(stream, "id", stop)

    @staticmethod
    def _convert(
        stream: Iterator[Any], field: str, stop: Callable[[], bool] | None
    ) -> Iterator[StoredEvent | SyncMarker]:
        try:
            for ev in stream:
                if stop is not None and stop():
                    return
                if ev.event == "message":
                    yield stored_event(ev.data)
                elif ev.event == "sync":
                    yield SyncMarker(int(ev.data[field]))
        finally:
            close = getattr(stream, "close", None)
            if close is not None:
                close()
