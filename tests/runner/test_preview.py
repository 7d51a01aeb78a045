"""The diff a person deciding on an `edit_file` call is shown (issue 38 item 11): the file's
own line numbers in the hunk header and context lines around the change."""

from __future__ import annotations

from pathlib import Path

from wakeful.runner import preview


def test_an_edit_preview_has_context_and_the_file_line_numbers(tmp_path: Path):
    (tmp_path / "f.txt").write_text("".join(f"line {n}\n" for n in range(1, 11)))
    shown = preview("edit_file", {"path": "f.txt", "old": "line 6\n", "new": "six\n"}, tmp_path)
    lines = shown.splitlines()
    assert lines[:3] == ["--- a/f.txt", "+++ b/f.txt", "@@ -3,7 +3,7 @@"]
    assert lines[3:] == [
        " line 3",
        " line 4",
        " line 5",
        "-line 6",
        "+six",
        " line 7",
        " line 8",
        " line 9",
    ]


def test_an_edit_that_will_not_apply_shows_its_fragments(tmp_path: Path):
    shown = preview("edit_file", {"path": "gone.txt", "old": "a\n", "new": "b\n"}, tmp_path)
    assert shown.splitlines()[-2:] == ["-a", "+b"]
