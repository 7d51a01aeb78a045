"""Rewinding a session's files with its conversation (`docs/rewind.md`).

The file tools record the content they replaced and wrote (blobs in the store, named in the
result's `file_change` metadata). A rewind with files puts each file the reverted turns changed
back to its content before the first change; an unrevert puts it back to what the rewind
replaced. Invariant: a file that holds neither the content the session left nor the content it
would be restored to was changed by something else: it is refused (`FileConflictError`, with
the list), and nothing is touched, unless forced. A file that already holds the content it
would be restored to counts as restored, so a rewind cut short (by a crash between the files
and the store's commit) completes when run again.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..errors import FileConflictError, UsageError
from ..events import FileRestore
from ..messages import Message, TextBlock
from ..store import FileChange, PendingRevert, blob_digest


@dataclass(frozen=True, slots=True)
class FileMove:
    """Put `path` (relative to the location) from `expected` to `target` (digests; None: no
    file)."""

    path: str
    expected: str | None
    target: str | None


def _inside(root: Path, path: str) -> Path:
    target = (root / path).resolve()
    if not target.is_relative_to(root.resolve()):
        raise UsageError(f"recorded path {path!r} is outside the session's location {root}")
    return target


def _digest_of(target: Path) -> str | None:
    if not target.exists():
        return None
    return blob_digest(target.read_bytes())


def restore_files(
    root: Path, moves: Sequence[FileMove], blob: Callable[[str], bytes], *, force: bool,
    keep: Callable[[bytes], object],
) -> list[FileRestore]:  # fmt: skip
    """Check every file, then put each back (atomically: a temporary file renamed over it);
    return what was done. `FileConflictError` before anything is written when a file holds
    something else and `force` is false; forced, that other content is first given to
    `keep` (stored as a blob), so the unrevert that reverses this can put it back."""
    plan: list[tuple[Path, FileMove, str | None]] = []
    conflicts: list[str] = []
    for move in moves:
        target = _inside(root, move.path)
        current = _digest_of(target)
        if current not in (move.expected, move.target) and not force:
            conflicts.append(move.path)
        plan.append((target, move, current))
    if conflicts:
        raise FileConflictError(
            f"{len(conflicts)} file(s) changed since the session wrote them: "
            + ", ".join(conflicts) + " (use force to overwrite them)",
            paths=conflicts,
        )  # fmt: skip
    done: list[FileRestore] = []
    for target, move, current in plan:
        if current not in (None, move.expected, move.target):  # forced over another's change
            keep(target.read_bytes())
        if current != move.target:
            _put(target, None if move.target is None else blob(move.target))
        done.append(FileRestore(path=move.path, digest=move.target, replaced=current))
    return done


def _put(target: Path, data: bytes | None) -> None:
    if data is None:
        target.unlink(missing_ok=True)
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".rewind")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        if target.exists():
            os.chmod(tmp, target.stat().st_mode & 0o7777)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@dataclass(frozen=True, slots=True)
class RewindResult:
    """What a rewind or an unrevert did: `hidden` messages (or brought back), the files put
    back, the files the reverted turns changed that were left alone (a rewind without files),
    the `shell` commands whose effects stay (never reversible), and the reverted prompt's text
    (to edit and send again)."""

    session_id: str
    seq: int
    from_seq: int
    hidden: int
    files_restored: tuple[str, ...] = ()
    files_left: tuple[str, ...] = ()
    shell_calls: tuple[str, ...] = ()
    prompt: str | None = None

    def as_json(self) -> dict[str, object]:
        """The result as a JSON object (the CLI's and the API's shape)."""
        return {
            "session_id": self.session_id, "seq": self.seq, "from_seq": self.from_seq,
            "hidden": self.hidden, "files_restored": list(self.files_restored),
            "files_left": list(self.files_left), "shell_calls": list(self.shell_calls),
            "prompt": self.prompt,
        }  # fmt: skip

    def warnings(self) -> list[str]:
        """One line per thing the rewind could not undo."""
        out = []
        if self.shell_calls:
            out.append(
                f"{len(self.shell_calls)} shell command(s) ran in the reverted turns; their "
                "effects are not reversed: " + "; ".join(c[:80] for c in self.shell_calls)
            )
        if self.files_left:
            out.append(
                f"{len(self.files_left)} file(s) the reverted turns changed were left as they "
                "are (rewind with files to restore them): " + ", ".join(self.files_left)
            )
        return out


def revert_moves(changes: Sequence[FileChange]) -> list[FileMove]:
    """A rewind's file moves: each file from what the session left back to what it replaced."""
    return [FileMove(c.path, c.after, c.before) for c in changes]


def unrevert_moves(pending: PendingRevert) -> list[FileMove]:
    """An unrevert's file moves: each file from what the rewind left back to what it replaced."""
    return [FileMove(c.path, c.before, c.after) for c in pending.files]


def prompt_text(message: Message) -> str | None:
    """The text of a reverted prompt (None: the first hidden message is not one)."""
    if message.role != "user":
        return None
    text = "".join(b.text for b in message.blocks if isinstance(b, TextBlock))
    return text or None
