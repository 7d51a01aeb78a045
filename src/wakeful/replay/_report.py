"""A run's report: per model, pass rate, tokens, cost and latency (p50/p95); each case's
results side by side; changes against a saved baseline report; the same report as JUnit XML.

Invariant: every figure is computed from the run's results once, in `report`; the text table,
`--format json`, the baseline comparison, the JUnit file and the inspector page all read that
one dict, so they cannot disagree.
"""

from __future__ import annotations

import json
import math
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..events import CaseResult
from ._runs import RunView


def percentile(values: list[int], p: float) -> int:
    """The nearest-rank `p`-th percentile of `values` (0 for none)."""
    if not values:
        return 0
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


def _cost(results: list[CaseResult]) -> float | None:
    """The results' total cost; None (unknown) when a reply's model had no known price."""
    replies = [r for r in results if r.error is None]
    if any(r.cost_usd is None for r in replies):
        return None
    return round(sum(r.cost_usd or 0.0 for r in results), 6)


def _row(model: str, results: list[CaseResult]) -> dict[str, Any]:
    latencies = [r.latency_ms for r in results if r.error is None]
    passed = sum(r.passed for r in results)
    return {
        "model": model,
        "cases": len(results),
        "passed": passed,
        "failed": sum(not r.passed and r.error is None for r in results),
        "errors": sum(r.error is not None for r in results),
        "pass_rate": round(passed / len(results), 4) if results else 0.0,
        "input_tokens": sum(r.input_tokens for r in results),
        "output_tokens": sum(r.output_tokens for r in results),
        "cost_usd": _cost(results),
        "latency_p50_ms": percentile(latencies, 50),
        "latency_p95_ms": percentile(latencies, 95),
    }


def report(view: RunView) -> dict[str, Any]:
    """The run's report as JSON-ready data (see the module docstring)."""
    started = view.started
    cases = []
    for case in started.cases:
        results = {
            m: view.results[(case.id, m)].model_dump(mode="json")
            for m in started.models
            if (case.id, m) in view.results
        }
        attempts = {m: view.attempts.get((case.id, m), 0) for m in started.models}
        cases.append(
            {
                "id": case.id,
                "kind": case.kind,
                "prompt": case.prompt,
                "session_id": case.session_id,
                "turn": case.turn,
                "step": case.step,
                "results": results,
                "attempts": attempts,
            }
        )
    models = [
        _row(m, [view.results[(c.id, m)] for c in started.cases if (c.id, m) in view.results])
        for m in started.models
    ]
    return {
        "run_id": view.run_id,
        "name": started.name,
        "kind": started.kind,
        "source": started.source,
        "finished": view.ended,
        "total": view.total,
        "done": len(view.results),
        "models": models,
        "cases": cases,
    }


def load_baseline(path: Path) -> dict[str, Any]:
    """A report saved earlier (`--format json` or `--save-baseline`); `UsageError` if it is not."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"no baseline file {path}") from None
    except ValueError as err:
        raise UsageError(f"{path}: not a JSON report: {err}") from None
    if not isinstance(data, dict) or not isinstance(data.get("cases"), list):
        raise UsageError(f"{path}: not an eval report (no `cases`)")
    return data


def compare(now: dict[str, Any], baseline: dict[str, Any]) -> dict[str, Any]:
    """What changed since `baseline`: each (case, model) that passed there and fails now (a
    regression) or the other way, and each model's pass rate before and after."""
    before = {
        (c["id"], m): r.get("passed", False)
        for c in baseline["cases"]
        for m, r in c.get("results", {}).items()
    }
    regressions, fixed = [], []
    for case in now["cases"]:
        for model, result in case["results"].items():
            was = before.get((case["id"], model))
            if was is True and not result.get("passed", False):
                regressions.append({"case": case["id"], "model": model})
            elif was is False and result.get("passed", False):
                fixed.append({"case": case["id"], "model": model})
    rates = {r["model"]: r["pass_rate"] for r in baseline.get("models", [])}
    models = [
        {"model": r["model"], "before": rates.get(r["model"]), "after": r["pass_rate"]}
        for r in now["models"]
    ]
    return {"regressions": regressions, "fixed": fixed, "models": models}


def junit_xml(data: dict[str, Any]) -> str:
    """The report as JUnit XML: a test suite per model, a test case per case (a failure for a
    failed grade, an error for a request that failed)."""
    root = ET.Element("testsuites", name=data["name"])
    for row in data["models"]:
        model = row["model"]
        suite = ET.SubElement(
            root,
            "testsuite",
            name=f"{data['name']} [{model}]",
            tests=str(row["cases"]),
            failures=str(row["failed"]),
            errors=str(row["errors"]),
        )
        for case in data["cases"]:
            result = case["results"].get(model)
            if result is None:
                continue
            seconds = f"{result.get('latency_ms', 0) / 1000:.3f}"
            test = ET.SubElement(
                suite,
                "testcase",
                classname=f"{data['name']}.{model}",
                name=case["id"],
                time=seconds,
            )
            if result.get("error") is not None:
                ET.SubElement(
                    test,
                    "error",
                    message=str(result["error"])[:500],
                    type=str(result.get("error_kind") or "error"),
                )
            elif not result.get("passed", False):
                failed = [g for g in result.get("grades", []) if not g.get("passed", False)]
                why = "; ".join(f"{g['grader']}: {g.get('detail', '')}" for g in failed)
                ET.SubElement(test, "failure", message=why[:500] or "failed")
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def table_lines(data: dict[str, Any]) -> list[str]:
    """The per-model table as text lines."""
    lines = [
        f"{'model':<36} {'pass':>9} {'rate':>6} {'errors':>6} {'tokens in/out':>15} "
        f"{'cost $':>9} {'p50 ms':>7} {'p95 ms':>7}"
    ]
    for r in data["models"]:
        passed = f"{r['passed']}/{r['cases']}"
        tokens = f"{r['input_tokens']}/{r['output_tokens']}"
        lines.append(
            f"{r['model'][-36:]:<36} {passed:>9} {r['pass_rate']:>6.0%} {r['errors']:>6} "
            f"{tokens:>15} {_cost_text(r['cost_usd']):>9} {r['latency_p50_ms']:>7} {r['latency_p95_ms']:>7}"
        )
    return lines


def _cost_text(cost: float | None) -> str:
    return "unknown" if cost is None else f"{cost:.4f}"
