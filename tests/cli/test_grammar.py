"""One grammar for the command line (issue 38 item 8, docs/cli.md "One grammar"): every
command's `--help` is walked and held to it, and the forms it promises work as typed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from tests.cli.conftest import write_script
from wakeful.cli._common import FORMATS
from wakeful.cli._grammar import TURN
from wakeful.cli._main import cli

# Commands with a `--session` that is not the session they act on: a schedule's target.
SESSION_AS_TARGET = {"schedule add"}


def commands(group: click.Group = cli, prefix: str = "") -> Iterator[tuple[str, click.Command]]:
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command is not None, name
        path = f"{prefix}{name}"
        if isinstance(command, click.Group):
            yield from commands(command, f"{path} ")
        else:
            yield path, command


ALL = dict(commands())


def test_the_walk_finds_every_command():
    assert {"run", "chat", "send", "log", "debug prompt", "session show", "schedule rm"} <= set(ALL)


@pytest.mark.parametrize("path", sorted(ALL))
def test_each_command_follows_the_grammar(path: str):
    command = ALL[path]
    args = [p for p in command.params if isinstance(p, click.Argument)]
    options = {o: p for p in command.params if isinstance(p, click.Option) for o in p.opts}
    help_text = CliRunner().invoke(cli, [*path.split(), "--help"], terminal_width=200).output
    usage = help_text.splitlines()[0]
    # a session acted on is the first positional, `--session` an accepted (hidden) alias
    if "--session" in options and path not in SESSION_AS_TARGET:
        assert options["--session"].name == "session_alias" and options["--session"].hidden
        assert args and args[0].name == "positional", path
        assert usage.split("[OPTIONS] ")[1].lstrip("[").startswith("SESSION"), usage
    assert not any(a.name in ("session", "session_id") for a in args), path  # no alias
    fmt = options.get("--format")
    if fmt is not None:  # the same choices everywhere, text first and the default
        choices = list(fmt.type.choices)  # type: ignore[attr-defined]
        assert set(choices) <= set(FORMATS) and choices[0] == "text", (path, choices)
        assert "json" in choices and fmt.default == "text", path
    if "--turn" in options:  # a number or an id prefix, everywhere
        assert options["--turn"].type is TURN, path
        assert "number" in help_text and "prefix" in help_text, path


def test_db_is_accepted_before_the_subcommand(wk, workdir: Path, db_url: str, cli_env):
    sid = json.loads(
        wk("run", "--model", write_script(workdir, HELLO), "--format", "json", "hi").stdout
    )["session_id"]
    del cli_env["WAKEFUL_DB"]
    listed = json.loads(wk("--db", db_url, "session", "list", "--format", "json").stdout)
    assert [r["id"] for r in listed] == [sid]


HELLO = [{"match": ".", "replies": [{"text": "hello back"}]}]


def test_session_first_everywhere_with_the_old_option_kept(wk, workdir: Path):
    model = write_script(workdir, HELLO)
    sid = json.loads(wk("run", "--model", model, "--format", "json", "one").stdout)["session_id"]
    short = sid.removeprefix("ses_")[:8]
    # `run SESSION PROMPT` continues it; a lone argument is still the prompt
    again = json.loads(wk("run", short, "two", "--format", "json").stdout)
    assert again["session_id"] == sid
    for args in (("log", short), ("log", "--session", sid)):
        lines = wk(*args, "--format", "jsonl").stdout.splitlines()
        assert lines and all(json.loads(line)["session_id"] == sid for line in lines)
    assert json.loads(wk("log", short, "--format", "json").stdout)[0]["seq"] == 1
    sent = wk("send", short, "three", "--no-wake").stdout.strip()
    assert (
        sent
        == wk("send", "three", "--session", sid, "--no-wake", "--input-id", sent).stdout.strip()
    )
    assert "interrupt" not in wk("interrupt", short).stderr
    twice = wk("log", sid, "--session", sid, check=False)
    assert twice.returncode == 2 and len(twice.stderr.splitlines()) == 1
    missing = wk("log", check=False)
    assert missing.returncode == 2 and "missing SESSION" in missing.stderr
    # --continue --fork forks the latest session here
    forked = json.loads(wk("run", "--continue", "--fork", "four", "--format", "json").stdout)
    assert forked["session_id"] != sid
    # the listings' old `table` still reads, as `text`; `--children` names what it does
    assert wk("session", "list", "--format", "table").stdout == wk("session", "list").stdout
    assert sid in wk("session", "list", "--children").stdout


def test_turns_by_number_or_id_prefix_everywhere(wk, workdir: Path):
    model = write_script(workdir, HELLO)
    sid = json.loads(wk("run", "--model", model, "--format", "json", "one").stdout)["session_id"]
    second = json.loads(wk("run", sid, "two", "--format", "json").stdout)["turn_id"]
    by_number = json.loads(wk("debug", "prompt", sid, "--turn", "2", "--format", "json").stdout)
    prefix = second.removeprefix("turn_")[:6]
    # digits name a turn by number: a prefix of digits only is written with its `turn_`
    ref = f"turn_{prefix}" if prefix.isdigit() else prefix
    by_prefix = json.loads(wk("debug", "prompt", sid, "--turn", ref, "--format", "json").stdout)
    assert by_number["turn_id"] == by_prefix["turn_id"] == second
    rewound = json.loads(wk("session", "rewind", sid, "--turn", "2", "--format", "json").stdout)
    assert rewound["prompt"] == "two"
    wk("session", "unrevert", sid)
    rewound = json.loads(
        wk("session", "rewind", sid, "--turn", f"turn_{prefix}", "--format", "json").stdout
    )
    assert rewound["prompt"] == "two"
    none = wk("debug", "prompt", sid, "--turn", "9", check=False)
    assert none.returncode == 2 and "no turn 9" in none.stderr


def test_schedule_ids_by_unique_prefix(wk, workdir: Path):
    model = write_script(workdir, HELLO)
    made = json.loads(
        wk("schedule", "add", "hi", "--every", "1h", "--model", model, "--format", "json").stdout
    )
    short = made["id"].removeprefix("sch_")[:6]
    assert json.loads(wk("schedule", "show", short, "--format", "json").stdout)["id"] == made["id"]
    assert "paused" in wk("schedule", "pause", made["id"][:10]).stdout
    gone = wk("schedule", "rm", "sch_zzzz", check=False)
    assert gone.returncode == 2 and "no schedule" in gone.stderr
