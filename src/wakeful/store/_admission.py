"""`AdmissionMixin`: `SqlStore`'s admissions, one input (`admit`) or many in one transaction
(`admit_together`), before any execution (invariants 1 and 3). The inbox's SQL is
`store/_inbox.py`; this is how an admission picks its transaction (one server-side statement on
PostgreSQL, a transaction here otherwise, blobs with it) and inserts a session lazily.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from .._ids import new_input_id
from ..errors import ConflictError, NotFoundError, UsageError
from . import _inbox
from ._append import put_blobs_in
from ._media import externalize
from ._records import Admission, AdmissionRequest

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pydantic import JsonValue

    from ..clock import Clock
    from ..events import Delivery, InputKind, SessionCreated
    from ._backend import Backend, Tx
    from ._records import InboxItem

_NOT_YET = UsageError("not admitted yet")  # `admit_together`'s place holder


def _input_id(input_id: str | None, delivery: Delivery) -> str:
    """The id an admission stores (a fresh one when none is given), after checking that
    `delivery` is a mode."""
    if delivery not in ("steer", "queue"):
        raise UsageError(f"delivery must be 'steer' or 'queue', not {delivery!r}")
    return input_id or new_input_id()


def _no_session(session_id: str) -> NotFoundError:
    """What an admission into a session that does not exist raises."""
    return NotFoundError(f"no session {session_id}")


class AdmissionMixin:
    """Admission of `SqlStore` (see the module docstring)."""

    backend: Backend
    clock: Clock

    if TYPE_CHECKING:  # `SqlStore`'s own

        def input(self, session_id: str, input_id: str) -> InboxItem: ...
        def _insert_session(self, tx: Tx, sid: str, created: SessionCreated) -> None: ...

    def admit(
        self,
        session_id: str,
        input_id: str | None,
        kind: InputKind,
        payload: dict[str, JsonValue],
        delivery: Delivery = "steer",
        *,
        create: SessionCreated | None = None,
        actor: str | None = None,
    ) -> Admission:
        """Admit one input durably, before any execution (invariants 1 and 3).

        With `create`, a session that does not exist yet is inserted in the same transaction
        (lazy materialization); without it, an unknown session raises `NotFoundError`. Inline
        media in the payload's blocks is stored as blobs in the same transaction and the
        payload keeps their refs (`_media.externalize`). `actor` (who admits it) is recorded
        in the `inbox.enqueued` event.
        """
        iid = _input_id(input_id, delivery)
        now = self.clock.now_ms()
        payload, media = externalize(payload)  # inline media: stored once, as blobs
        # What the admission writes is built once, for the statement or a transaction below.
        prepared = _inbox.enqueued(iid, kind, payload, delivery, actor)
        if media:  # blobs with the admission: one transaction here (either backend)
            with self.backend.transaction(write=True) as tx:
                admission = self._admit_here(
                    tx, session_id, iid, kind, payload, delivery, now, create, prepared
                )
                put_blobs_in(tx, media, session_id, now)
                return admission
        # PostgreSQL: the whole admission is one statement, its own transaction.
        row = self.backend.admit_alone(
            _inbox.server_admission(
                session_id, iid, kind, payload, delivery, now, prepared, self.backend.cipher
            )
        )
        if row is not None:
            admitted = _inbox.admission_outcome(
                row, session_id, iid, kind, payload, delivery, lambda: self.input(session_id, iid)
            )
            if admitted is not None:
                return Admission(*admitted)
        # SQLite (no one-statement admission), or no such session (nothing was written): one
        # transaction here, which inserts the session first when `create` says how.
        with self.backend.transaction(write=True) as tx:
            return self._admit_here(
                tx, session_id, iid, kind, payload, delivery, now, create, prepared
            )

    def admit_together(self, requests: Sequence[AdmissionRequest]) -> list[Admission | Exception]:
        """Admit each request into its existing session as `admit` would, all in one write
        transaction (one commit), and return each one's outcome in order: its `Admission`, or
        the error `admit` raises for it (an unknown session, an input id naming other content,
        a bad delivery mode...). Each admission is durable when this returns.

        An unknown session or a conflicting input id is found before that request writes
        anything, so it fails alone and the others go on in the same transaction. Any other
        failure (a statement the database refuses, a failed commit) rolls the whole
        transaction back; every request is then admitted alone, under the input id it was
        given here, so each gets exactly what `admit` gives it (and one that did commit, when
        a commit's outcome was unknown, is found again, not doubled). One request is `admit`."""
        outcomes: list[Admission | Exception] = []
        todo: list[tuple[int, AdmissionRequest]] = []
        for r in requests:
            try:
                todo.append((len(outcomes), replace(r, input_id=_input_id(r.input_id, r.delivery))))
            except UsageError as err:
                outcomes.append(err)
                continue
            outcomes.append(_NOT_YET)
        if len(todo) > 1:
            try:
                self._admit_in_one(todo, outcomes)
                return outcomes
            except Exception:  # rolled back: nothing of it was written
                pass
        for index, r in todo:
            outcomes[index] = self._admit_alone(r)
        return outcomes

    def _admit_in_one(
        self, todo: list[tuple[int, AdmissionRequest]], outcomes: list[Admission | Exception]
    ) -> None:
        """`admit_together`'s transaction: fills in `outcomes`, or raises (all rolled back)."""
        now = self.clock.now_ms()
        externalized = [externalize(r.payload) for _, r in todo]  # inline media: as blobs
        requests = [
            replace(r, payload=p) for (_, r), (p, _) in zip(todo, externalized, strict=True)
        ]
        with self.backend.transaction(write=True) as tx:
            admitted = _inbox.admit_all_in(tx, requests, now)
            for (index, r), (_, media), out in zip(todo, externalized, admitted, strict=True):
                if out is None:
                    outcomes[index] = _no_session(r.session_id)
                elif isinstance(out, ConflictError):
                    outcomes[index] = out
                else:
                    outcomes[index] = Admission(*out)
                    put_blobs_in(tx, media, r.session_id, now)

    def _admit_alone(self, r: AdmissionRequest) -> Admission | Exception:
        """`admit` of one request, its error returned rather than raised."""
        try:
            return self.admit(
                r.session_id, r.input_id, r.kind, r.payload, r.delivery, actor=r.actor
            )
        except Exception as err:
            return err

    def _admit_here(
        self,
        tx: Tx,
        session_id: str,
        iid: str,
        kind: InputKind,
        payload: dict[str, JsonValue],
        delivery: Delivery,
        now: int,
        create: SessionCreated | None,
        prepared: _inbox.Enqueued | None = None,
    ) -> Admission:
        """Admit inside `tx`, inserting the session first when it is missing and `create` says
        how (lazy materialization). `prepared` is `_inbox.enqueued` of the input, when built."""
        admitted = _inbox.admit_in(tx, session_id, iid, kind, payload, delivery, now, prepared)
        made = False
        if admitted is None:
            if create is None:
                raise _no_session(session_id)
            try:
                self._insert_session(tx, session_id, create)
                made = True
            except ConflictError:  # a concurrent admission created it (its commit was waited for)
                made = False
            admitted = _inbox.admit_in(tx, session_id, iid, kind, payload, delivery, now, prepared)
            assert admitted is not None
        item, created = admitted
        return Admission(item, created, made)
