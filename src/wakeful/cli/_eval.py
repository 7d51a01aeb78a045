"""`wakeful eval SUITE.toml`: run a suite's cases against its models as a durable run (a
killed run, started again with the same suite, resumes: what is done is not sent again), then
print the report (docs/replay.md).

Exit codes: 0, or 1 when `--baseline` is given and a case that passed there fails now; a bad
suite is the usual one-line error (exit 2) and creates no run.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import click

from ._common import db_option, format_option, local_runtime, print_json, printable

REGRESSION_EXIT = 1


@click.command(name="eval")
@click.argument("suite", type=click.Path(dir_okay=False, path_type=Path), metavar="SUITE.toml")
@click.option(
    "--junit",
    "junit",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    metavar="FILE",
    help="Also write the report as JUnit XML.",
)
@click.option(
    "--baseline",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    metavar="FILE",
    help="A saved report: list changes, exit 1 on a regression.",
)
@click.option(
    "--save-baseline",
    "save",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    metavar="FILE",
    help="Save this report as a baseline.",
)
@format_option("text", "json")
@db_option
def eval_(
    suite: Path,
    junit: Path | None,
    baseline: Path | None,
    save: Path | None,
    fmt: str,
    db: str | None,
) -> None:
    """Run an eval suite against its models and report per model."""
    import json

    from ..execution import off_loop
    from ..replay import compare, junit_xml, load_baseline, load_suite, report, run_suite

    before = load_baseline(baseline) if baseline is not None else None  # before any writing
    runtime = local_runtime(db, "eval", create=True)
    bar = _Bar() if fmt == "text" and sys.stderr.isatty() else None

    async def main() -> dict[str, Any]:
        try:
            loaded = await off_loop(load_suite, runtime.store, suite)
            view = await run_suite(runtime, loaded, progress=bar.advance if bar else None)
            return report(view)
        finally:
            if bar is not None:
                bar.stop()
            await runtime.aclose()

    data = asyncio.run(main())
    if before is not None:
        data["baseline"] = compare(data, before)
    if junit is not None:
        junit.write_text(junit_xml(data), encoding="utf-8")
    if save is not None:
        save.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    if fmt == "json":
        print_json(data)
    else:
        _print(data)
    if data.get("baseline", {}).get("regressions"):
        sys.exit(REGRESSION_EXIT)


def _print(data: dict[str, Any]) -> None:
    from ..replay import table_lines

    click.echo(
        f"eval {printable(data['name'])}: {len(data['cases'])} cases x "
        f"{len(data['models'])} models  (run {data['run_id']})"
    )
    for line in table_lines(data):
        click.echo(printable(line))
    failed = [
        (c["id"], m, r)
        for c in data["cases"]
        for m, r in c["results"].items()
        if not r.get("passed", False)
    ]
    for case_id, model, result in failed[:20]:
        why = result.get("error") or "; ".join(
            f"{g['grader']}: {g.get('detail', '')}"
            for g in result.get("grades", [])
            if not g.get("passed", False)
        )
        click.echo(printable(f"  FAIL {case_id} on {model}: {why}"[:200]))
    if len(failed) > 20:
        click.echo(f"  ... and {len(failed) - 20} more failures (--format json lists them)")
    base = data.get("baseline")
    if base is not None:
        for m in base["models"]:
            click.echo(f"  {m['model']}: pass rate {_rate(m['before'])} -> {_rate(m['after'])}")
        for r in base["regressions"]:
            click.echo(
                printable(f"  REGRESSION {r['case']} on {r['model']}: passed in the baseline")
            )
        for r in base["fixed"]:
            click.echo(printable(f"  fixed {r['case']} on {r['model']}"))


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


class _Bar:
    """A progress bar on stderr, one tick per (case, model) result."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.progress import Progress

        self._progress = Progress(console=Console(stderr=True), transient=True)
        self._task: Any = None
        self._progress.start()

    def advance(self, p: Any) -> None:
        """One more result (`wakeful.replay.Progress`)."""
        if self._task is None:
            self._task = self._progress.add_task("eval", total=p.total, completed=p.done - 1)
        self._progress.update(
            self._task, completed=p.done, description=printable(f"{p.case_id} on {p.model}")[:40]
        )

    def stop(self) -> None:
        """Take the bar off the terminal."""
        self._progress.stop()


eval = eval_  # noqa: A001  # the name the lazy root group looks the command up by
