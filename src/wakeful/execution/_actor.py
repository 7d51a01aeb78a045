"""`ActorMixin`: who a `Runtime` records as having admitted, decided, interrupted, rewound or
deleted when a call names nobody (docs/access.md, "Who did what").

Invariant: the actor is a name, never a credential: a server passes its caller's user (or
`operator`), the command line and the library `local:` and the OS user, unless told otherwise.
"""

from __future__ import annotations

from ..store import local_actor


class ActorMixin:
    """The `actor` of `Runtime` (see the module docstring)."""

    _actor: str | None = None

    @property
    def actor(self) -> str:
        """Who this runtime's calls are recorded as when they name no `actor`: set it (e.g.
        `rt.actor = "nightly-job"`), else `local:` and the OS user (`store.local_actor`)."""
        if self._actor is None:
            self._actor = local_actor()
        return self._actor

    @actor.setter
    def actor(self, name: str) -> None:
        self._actor = name
