"""`wakeful eval` suites: what a suite may say (and the one-line error for what it may not,
with no run created), each grader kind, per-model limits, the report, its JUnit file and a
baseline comparison that exits 1 on a regression."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.cli.conftest import Wk
from wakeful.errors import UsageError
from wakeful.events import CaseResult, EvalCase, ToolCallSeen
from wakeful.execution import Runtime
from wakeful.replay import Limits, Progress, junit_xml, load_suite, report, run_suite
from wakeful.replay._graders import grade
from wakeful.replay._report import percentile


def _script(path: Path, rules: list[dict]) -> str:
    path.write_text(json.dumps({"rules": rules}))
    return f"scripted:{path}"


GOOD = [
    {
        "match": "weather",
        "replies": [
            {"tool_calls": [{"name": "get_weather", "input": {"city": "Oslo", "unit": "c"}}]}
        ],
    },
    {"match": "json", "replies": [{"text": 'Here:\n```json\n{"name": "Ada", "age": 36}\n```'}]},
    {"match": "judge", "replies": [{"text": "PASS\nit is polite"}]},
    {"match": ".", "replies": [{"text": "Paris is the capital of France."}]},
]
BAD = [{"match": ".", "replies": [{"text": "I do not know."}]}]


def _suite(tmp_path: Path, models: str, extra: str = "") -> Path:
    (tmp_path / "graders.py").write_text(
        "def short(result, case):\n    return len(result.text) < 40, f'{len(result.text)} chars'\n"
    )
    path = tmp_path / "suite.toml"
    path.write_text(f"""name = "smoke"
models = {models}
{extra}
[[cases]]
id = "capital"
prompt = "What is the capital of France?"
graders = [{{kind = "contains", value = "paris", ignore_case = true}},
           {{kind = "regex", pattern = "capital"}},
           {{kind = "python", function = "graders.py:short"}}]

[[cases]]
id = "weather"
prompt = "weather in Oslo?"
graders = [{{kind = "tool_called", name = "get_weather", arguments = {{city = "Oslo"}}}}]

[[cases]]
id = "person"
prompt = "json please"
graders = [{{kind = "json_schema", schema = {{type = "object", required = ["name", "age"], properties = {{age = {{type = "integer"}}}}}}}}]
""")
    return path


async def test_a_suite_runs_every_grader_and_reports_per_model(tmp_path: Path) -> None:
    good = _script(tmp_path / "good.json", GOOD)
    bad = _script(tmp_path / "bad.json", BAD)
    path = _suite(tmp_path, f'["{good}", {{spec = "{bad}", concurrency = 1, rpm = 6000}}]')
    rt = Runtime(str(tmp_path / "s.db"), workspace=tmp_path, model=good)
    seen: list[Progress] = []
    suite = load_suite(rt.store, path)
    assert suite.limits == {bad: Limits(1, 6000.0)}
    view = await run_suite(rt, suite, progress=seen.append)
    data = report(view)
    rows = {r["model"]: r for r in data["models"]}
    assert (rows[good]["passed"], rows[good]["cases"], rows[good]["pass_rate"]) == (3, 3, 1.0)
    assert (rows[bad]["passed"], rows[bad]["failed"]) == (0, 3)
    assert sorted(p.done for p in seen) == list(range(1, 7)) and {p.total for p in seen} == {6}
    capital = next(c for c in data["cases"] if c["id"] == "capital")["results"][bad]
    assert [g["passed"] for g in capital["grades"]] == [False, False, True]
    assert capital["grades"][2]["detail"] == "14 chars"
    # The JUnit file says what the report says.
    root = ET.fromstring(junit_xml(data))
    suites = {s.get("name"): s for s in root.iter("testsuite")}
    assert suites[f"smoke [{bad}]"].get("failures") == "3"
    assert len(suites[f"smoke [{bad}]"].findall("testcase/failure")) == 3
    assert suites[f"smoke [{good}]"].findall("testcase/failure") == []
    # Running the same suite again starts a new run; the finished one is kept.
    again = await run_suite(rt, load_suite(rt.store, path))
    assert again.run_id != view.run_id and again.ended
    await rt.aclose()


async def test_the_judge_and_grader_failures(tmp_path: Path) -> None:
    judge = _script(
        tmp_path / "judge.json",
        [
            {"match": "polite", "replies": [{"text": "PASS\nit answers politely"}]},
            {"match": ".", "replies": [{"text": "FAIL\nno rubric I know"}]},
        ],
    )
    rt = Runtime(str(tmp_path / "s.db"), workspace=tmp_path, model=judge)
    from wakeful.events import EvalStarted
    from wakeful.replay import Engine, read_run
    from wakeful.replay._runs import create_run

    case = EvalCase(
        id="c",
        kind="prompt",
        prompt="hi",
        graders=(
            {"kind": "judge", "model": judge, "rubric": "Is it polite?"},
            {"kind": "judge", "model": judge, "rubric": "Is it French?"},
        ),
    )
    started = EvalStarted(name="j", models=(judge,), cases=(case,))
    run_id = create_run(rt.store, None, started, title="eval j", location=None, metadata={})
    engine = Engine(rt, read_run(rt.store, run_id), base=tmp_path)
    result = CaseResult(text="Hello, how may I help?")
    grades = await grade(case.graders, result, case, base=tmp_path, judge=engine._judge)
    assert [(g.passed, g.detail) for g in grades] == [
        (True, "it answers politely"),
        (False, "no rubric I know"),
    ]
    # A reply that failed is not graded: its error decides.
    assert (
        await grade(
            case.graders, CaseResult(error="boom"), case, base=tmp_path, judge=engine._judge
        )
        == ()
    )
    # A python grader that raises fails the reply, saying why.
    (tmp_path / "g.py").write_text("def broken(result, case):\n    raise ValueError('nope')\n")
    [g] = await grade(
        ({"kind": "python", "function": "g.py:broken"},),
        result,
        case,
        base=tmp_path,
        judge=engine._judge,
    )
    assert not g.passed and "ValueError: nope" in g.detail
    # tool_called checks the arguments given, not only the name.
    called = CaseResult(tool_calls=(ToolCallSeen(name="f", input={"a": 1, "b": 2}),))
    spec = ({"kind": "tool_called", "name": "f", "arguments": {"a": 2}},)
    [g] = await grade(spec, called, case, base=tmp_path, judge=engine._judge)
    assert not g.passed and "other arguments" in g.detail
    await rt.aclose()


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        ('[[cases]]\nid = "x"\nprompt = "p"\ngraders = [{kind = "vibes"}]', "grader kind 'vibes'"),
        (
            '[[cases]]\nid = "x"\nprompt = "p"\ngraders = [{kind = "regex", pattern = "("}]',
            "bad regex",
        ),
        (
            '[[cases]]\nid = "x"\nprompt = "p"\ngraders = [{kind = "python", function = "nofile.py:f"}]',
            "no grader file",
        ),
        (
            '[[cases]]\nid = "x"\nprompt = "p"\ngraders = [{kind = "json_schema", schema = {type = 5}}]',
            "bad JSON schema",
        ),
        ('[[cases]]\nid = "x"\nprompt = "p"\ncolour = "red"', "unknown key(s) colour"),
        ('[[cases]]\nid = "x"\nsession = "ses_nothere"', "ses_nothere"),
        ('[[cases]]\nid = "capital"\nprompt = "again"', "used twice"),
        ('[[select]]\nquery = "zebra"', "no recorded session matches"),
    ],
)
def test_a_bad_suite_is_one_error_and_no_run(tmp_path: Path, extra: str, words: str) -> None:
    good = _script(tmp_path / "good.json", GOOD)
    path = _suite(tmp_path, f'["{good}"]', "")
    path.write_text(path.read_text() + "\n" + extra + "\n")
    rt = Runtime(str(tmp_path / "s.db"), workspace=tmp_path, model=good)
    with pytest.raises(UsageError, match=re.escape(words)):
        load_suite(rt.store, path)
    assert rt.store.list_sessions().sessions == []
    rt.close()


def test_percentiles_are_nearest_rank() -> None:
    values = list(range(1, 101))
    assert (percentile(values, 50), percentile(values, 95), percentile([], 50)) == (50, 95, 0)
    assert percentile([7], 95) == 7


def test_the_command_line_saves_a_baseline_and_fails_on_a_regression(wk: Wk, workdir: Path) -> None:
    model = workdir.parent / "m.json"
    model.write_text(json.dumps({"rules": GOOD}))
    suite = _suite(workdir, f'["scripted:{model}"]')
    first = wk("eval", str(suite), "--save-baseline", "base.json", "--junit", "j.xml")
    assert "3/3" in first.stdout and "100%" in first.stdout
    assert json.loads((workdir / "base.json").read_text())["models"][0]["pass_rate"] == 1.0
    model.write_text(json.dumps({"rules": BAD}))  # the model got worse
    worse = wk("eval", str(suite), "--baseline", "base.json", check=False)
    assert worse.returncode == 1, worse.stderr
    assert "REGRESSION capital" in worse.stdout and "100% -> 0%" in worse.stdout
    as_json = json.loads(
        wk("eval", str(suite), "--baseline", "base.json", "--format", "json", check=False).stdout
    )
    assert len(as_json["baseline"]["regressions"]) == 3
    bad = wk("eval", "missing.toml", check=False)
    assert bad.returncode == 2 and "no suite file" in bad.stderr


async def test_turn_cases_run_tools_and_selections_find_tagged_sessions(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "wakeful.toml").write_text('[permissions]\nshell = "allow"\n')
    model = _script(
        tmp_path / "m.json",
        [
            {
                "match": "count",
                "replies": [
                    {
                        "tool_calls": [
                            {"name": "shell", "input": {"command": "echo ran >> ran.txt"}}
                        ]
                    },
                    {"text": "counted"},
                ],
            },
            {"match": ".", "replies": [{"text": "tagged answer"}]},
        ],
    )
    rt = Runtime(str(tmp_path / "s.db"), workspace=work, model=model)
    [first] = await rt.run("hello tagged")
    tagged = rt.store.list_sessions().sessions[0].id
    rt.update_metadata(tagged, {"tags": ["golden"], "team": "infra"})
    await rt.run("hello untagged")
    suite = work / "suite.toml"
    suite.write_text(f'''models = ["{model}"]
[[cases]]
id = "count"
prompt = "count it"
mode = "turn"
graders = [{{kind = "tool_called", name = "shell"}}, {{kind = "contains", value = "counted"}}]
[[select]]
tag = "golden"
metadata = {{team = "infra"}}
graders = [{{kind = "contains", value = "tagged answer"}}]
''')
    loaded = load_suite(rt.store, suite)
    assert [c.id for c in loaded.cases] == ["count", f"select1/{tagged}"]
    view = await run_suite(rt, loaded)
    count = view.results[("count", model)]
    assert count.passed and (work / "ran.txt").read_text() == "ran\n"  # the tool really ran
    case_session = rt.store.get_session(count.session_id or "")
    assert rt.store.metadata(case_session.id)["eval_run"] == view.run_id
    assert view.results[(f"select1/{tagged}", model)].passed
    # A run's sessions are never selected as cases.
    again = load_suite(rt.store, suite)
    assert [c.id for c in again.cases] == ["count", f"select1/{tagged}"]
    await rt.aclose()
