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

from ..errors import FileConflictError, FileRestoreError, UsageError
from ..events import FileRestore
from ..messages import Message, TextBlock
from ..runner import crash_point
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


@dataclass(slots=True)
class _Step:
    """One file of a restore: where it is, its move, what it holds now (bytes and digest)."""

    target: Path
    move: FileMove
    before: bytes | None
    current: str | None
    staged: Path | None = None  # the new content, written beside the target, not yet renamed


def _read(root: Path, move: FileMove) -> _Step | str:
    """The step of one move, or why its target cannot be restored (nothing is written)."""
    target = _inside(root, move.path)
    if target.is_dir() and not target.is_symlink():
        return f"{move.path}: a directory is where the file was"
    for parent in target.relative_to(root.resolve()).parents:
        if (root / parent).exists() and not (root / parent).is_dir():
            return f"{move.path}: {parent} is not a directory"
    try:
        before = target.read_bytes() if target.exists() or target.is_symlink() else None
    except OSError as err:
        return f"{move.path}: cannot be read ({err.strerror or err})"
    return _Step(target, move, before, None if before is None else blob_digest(before))


def restore_files(
    root: Path,
    moves: Sequence[FileMove],
    blob: Callable[[str], bytes],
    *,
    force: bool,
    keep: Callable[[bytes], object],
) -> list[FileRestore]:
    """Put every file back, all of them or none; return what was done.

    First every target is checked: `FileRestoreError` when one cannot be read or is not a
    file, `FileConflictError` when one holds something else and `force` is false (forced,
    that other content is first given to `keep`, stored as a blob, so the unrevert that
    reverses this can put it back). Then each new content is written beside its target, and
    only when all are written are they renamed over their targets; a failure there (an
    immutable file, a full disk) puts the files already renamed back as they were and raises
    `FileRestoreError`: nothing changed. A file already holding its target counts as
    restored (`FileRestore.replaced` equals its digest): the second run of a rewind a crash cut
    short between its files completes it."""
    steps: list[_Step] = []
    unreadable: list[str] = []
    for move in moves:
        step = _read(root, move)
        if isinstance(step, str):
            unreadable.append(step)
        else:
            steps.append(step)
    if unreadable:
        raise FileRestoreError(
            "cannot restore " + "; ".join(unreadable) + ": nothing was changed",
            paths=[u.split(": ", 1)[0] for u in unreadable],
        )
    conflicts = [s.move.path for s in steps if s.current not in (s.move.expected, s.move.target)]
    if conflicts and not force:
        raise FileConflictError(
            f"{len(conflicts)} file(s) changed since the session wrote them: "
            + ", ".join(conflicts)
            + " (use force to overwrite them)",
            paths=conflicts,
        )
    todo = [s for s in steps if s.current != s.move.target]
    try:
        for step in todo:
            _stage(step, blob)
    except OSError as err:
        _unstage(todo)
        raise FileRestoreError(
            f"cannot restore {_path_of(todo, err)}: {err.strerror or err}; nothing was changed",
            paths=[_path_of(todo, err)],
        ) from None
    for step in steps:
        if step.current not in (None, step.move.expected, step.move.target):  # forced over
            keep(step.before or b"")
    _commit(todo)
    return [FileRestore(path=s.move.path, digest=s.move.target, replaced=s.current) for s in steps]


def _path_of(steps: Sequence[_Step], err: OSError) -> str:
    """The recorded path of the file an `OSError` was about (its first step when unknown)."""
    for step in steps:
        if err.filename is not None and Path(err.filename) in (step.target, step.staged):
            return step.move.path
    return steps[0].move.path if steps else "?"


def _stage(step: _Step, blob: Callable[[str], bytes]) -> None:
    """Write the new content of `step` to a temporary file beside its target (a deletion
    needs none), creating missing directories; permissions follow the file it replaces."""
    if step.move.target is None:
        return
    parent = step.target.parent
    parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=parent, prefix=f".{step.target.name}.", suffix=".rewind")
    step.staged = Path(tmp)
    with os.fdopen(fd, "wb") as f:
        f.write(blob(step.move.target))
        f.flush()
        os.fsync(f.fileno())
    if step.before is not None:
        os.chmod(tmp, step.target.stat().st_mode & 0o7777)


def _unstage(steps: Sequence[_Step]) -> None:
    for step in steps:
        if step.staged is not None:
            step.staged.unlink(missing_ok=True)
            step.staged = None


def _commit(steps: Sequence[_Step]) -> None:
    """Rename each staged file over its target (or delete the target); on a failure, put back
    the files already changed and raise `FileRestoreError` (nothing changed)."""
    done: list[_Step] = []
    try:
        for step in steps:
            if step.staged is None:
                step.target.unlink(missing_ok=True)
            else:
                os.replace(step.staged, step.target)
                step.staged = None
            done.append(step)
            crash_point("rewind.file")
    except OSError as err:
        failed = steps[len(done)].move.path
        _unstage(steps)
        left = _put_back(done)
        raise FileRestoreError(
            f"cannot restore {failed}: {err.strerror or err}; "
            + ("nothing was changed" if not left else "could not put back " + ", ".join(left)),
            paths=[failed],
        ) from None


def _put_back(done: Sequence[_Step]) -> list[str]:
    """Put the files of `done` back to what they held; the paths that could not be."""
    left = []
    for step in reversed(done):
        try:
            _put(step.target, step.before)
        except OSError:
            left.append(step.move.path)
    return left


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
    the `shell` commands whose effects stay (never reversible), the reverted prompt's text
    (to edit and send again), and the restored files an earlier, interrupted run had already
    put back."""

    session_id: str
    seq: int
    from_seq: int
    hidden: int
    files_restored: tuple[str, ...] = ()
    files_left: tuple[str, ...] = ()
    shell_calls: tuple[str, ...] = ()
    prompt: str | None = None
    # restored files that already held their restored content: an earlier run of this rewind
    # was cut short (a crash) between its files and its record, and this run completed it
    files_completed: tuple[str, ...] = ()

    def as_json(self) -> dict[str, object]:
        """The result as a JSON object (the CLI's and the API's shape)."""
        return {
            "session_id": self.session_id,
            "seq": self.seq,
            "from_seq": self.from_seq,
            "hidden": self.hidden,
            "files_restored": list(self.files_restored),
            "files_left": list(self.files_left),
            "shell_calls": list(self.shell_calls),
            "prompt": self.prompt,
            "files_completed": list(self.files_completed),
        }

    def warnings(self) -> list[str]:
        """One line per thing the rewind could not undo."""
        out = []
        if self.files_completed:
            out.append(
                f"{len(self.files_completed)} file(s) already held the content they are restored "
                "to: an earlier run of this rewind was cut short before it was recorded, and this "
                "run completed it: " + ", ".join(self.files_completed)
            )
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


def completed_before(moves: Sequence[FileMove], restored: Sequence[FileRestore]) -> tuple[str, ...]:
    """The files of a restore that already held their target when it began though the
    session had left them otherwise: an earlier run put them back and was cut short."""
    return tuple(
        r.path
        for m, r in zip(moves, restored, strict=True)
        if m.expected != m.target and r.replaced == m.target
    )


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
