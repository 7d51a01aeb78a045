"""Every id wakeful mints, in one place: a prefix naming what it identifies and random hex.

| id | shape |
| --- | --- |
| session | ``ses_`` + 24 hex |
| turn | ``turn_`` + 16 hex |
| input | ``in_`` + 24 hex |
| message | ``msg_`` + 32 hex |
| prompt receipt | ``rcp_`` + 16 hex |
| schedule | ``sch_`` + 24 hex |
| artifact | ``art_`` + 24 hex |
| claim token | 32 hex |
| user token id | ``tok_`` + 16 hex |
| share link id | ``shr_`` + 16 hex |

Randomness comes from `os.urandom`, what `secrets.token_hex` uses, without loading `secrets`
(and OpenSSL) at import (cold start, issue 25). Ids derived from other ids (a schedule fire's
input id, a forked message's id) are not minted: their derivations live beside their owners.
"""

from __future__ import annotations

import os


def random_hex(nbytes: int) -> str:
    """`nbytes` random bytes from the OS as hex (`2 * nbytes` characters)."""
    return os.urandom(nbytes).hex()


def new_session_id() -> str:
    """A fresh session id: ``ses_`` + 24 hex characters."""
    return f"ses_{random_hex(12)}"


def new_turn_id() -> str:
    """A fresh turn id: ``turn_`` + 16 hex characters."""
    return f"turn_{random_hex(8)}"


def new_input_id() -> str:
    """A fresh inbox input id: ``in_`` + 24 hex characters."""
    return f"in_{random_hex(12)}"


def new_message_id() -> str:
    """A fresh, unique message id (``msg_`` + 32 hex characters)."""
    return f"msg_{random_hex(16)}"


def new_receipt_id() -> str:
    """A fresh prompt receipt id: ``rcp_`` + 16 hex characters."""
    return f"rcp_{random_hex(8)}"


def new_schedule_id() -> str:
    """A fresh schedule id: ``sch_`` + 24 hex characters."""
    return f"sch_{random_hex(12)}"


def new_artifact_id() -> str:
    """A fresh artifact id: ``art_`` + 24 hex characters."""
    return f"art_{random_hex(12)}"


def new_claim_token() -> str:
    """A fresh claim token (32 hex characters): what fences one drain's writes."""
    return random_hex(16)


def new_token_id() -> str:
    """A fresh id of a user's token (not the token): ``tok_`` + 16 hex characters."""
    return f"tok_{random_hex(8)}"


def new_share_id() -> str:
    """A fresh id of a share link (not the link's secret): ``shr_`` + 16 hex characters."""
    return f"shr_{random_hex(8)}"
