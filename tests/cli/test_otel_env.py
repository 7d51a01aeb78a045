"""`OTEL_*` variables configure tracing in a `wakeful` process: spans exported (here by the
console exporter) and the receipt naming them."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.conftest import Wk, write_script


def session_of(output: str) -> str:
    """The session id `wakeful run` reports."""
    return next(line.split()[1] for line in output.splitlines() if line.startswith("session "))


def test_otel_traces_exporter_console_prints_the_turns_spans(
    wk: Wk, workdir: Path, cli_env: dict[str, str]
):
    model = write_script(workdir, [{"match": ".", "replies": [{"text": "hi there"}]}])
    cli_env |= {"OTEL_TRACES_EXPORTER": "console", "OTEL_SERVICE_NAME": "wk-test"}
    done = wk("run", "--model", model, "zebra-prompt")
    assert '"name": "invoke_agent build"' in done.stdout
    assert '"gen_ai.operation.name": "chat"' in done.stdout
    assert '"service.name": "wk-test"' in done.stdout
    assert "zebra-prompt" not in done.stdout  # no prompt text exported by default
    sid = session_of(done.stdout + done.stderr)
    receipt = json.loads(wk("debug", "prompt", "--session", sid, "--format", "json").stdout)
    assert f'"trace_id": "0x{receipt["trace_id"]}"' in done.stdout
    assert f'"span_id": "0x{receipt["span_id"]}"' in done.stdout


def test_without_otel_variables_nothing_is_traced(wk: Wk, workdir: Path):
    model = write_script(workdir, [{"match": ".", "replies": [{"text": "hi there"}]}])
    done = wk("run", "--model", model, "hello")
    assert "invoke_agent" not in done.stdout
    sid = session_of(done.stdout + done.stderr)
    receipt = json.loads(wk("debug", "prompt", "--session", sid, "--format", "json").stdout)
    assert "trace_id" not in receipt
