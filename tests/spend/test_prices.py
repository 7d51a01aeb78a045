"""Prices are data (`runner/prices.toml`), overridden in `[prices]` for a model, a model
prefix or every model of a server, and a model with no known price costs unknown, never zero:
in the event, the run records, `session show`, the API and `wakeful replay`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.conftest import Wk, write_script
from wakeful.config import Config, PriceConfig, load_config
from wakeful.errors import UsageError
from wakeful.events import UsageRecorded, dump_event
from wakeful.execution import Runtime
from wakeful.providers import Usage
from wakeful.runner import PriceTable, cost_usd, known_price, run_records
from wakeful.runner._pricing import shipped_prices, usage_event

MILLION = Usage(1_000_000, 1_000_000)


def test_the_shipped_table_is_data_and_an_unknown_model_has_no_price() -> None:
    assert "claude-sonnet-4" in shipped_prices() and "gpt-4o-mini" in shipped_prices()
    assert cost_usd("anthropic:claude-sonnet-4-5", MILLION) == pytest.approx(18.0)
    assert cost_usd("openai:gpt-4o-mini-2024-07-18", MILLION) == pytest.approx(0.75)  # longest
    assert cost_usd("scripted:/tmp/x.json", MILLION) is None
    assert cost_usd("openai-compatible:llama3@http://127.0.0.1:8000/v1", MILLION) is None
    assert not known_price("local") and known_price("gpt-5")
    # Unknown is stored as unknown: the event carries no cost at all (not 0.0).
    event = usage_event("scripted:/tmp/x.json", MILLION, "rcp_1")
    assert event.cost_usd is None and "cost_usd" not in json.loads(dump_event(event))
    assert UsageRecorded.model_validate_json(dump_event(event)).cost_usd is None


def test_configured_prices_win_by_spec_then_server_then_longest_prefix() -> None:
    table = PriceTable.of(
        {
            "openai-compatible:llama3@http://gpu:8000/v1": PriceConfig(input=1.0, output=2.0),
            "@http://gpu:8000/v1": PriceConfig(input=0.0, output=0.0),
            "gpt-4o": PriceConfig(input=5.0, output=20.0, cache_read=1.0),
            "my-": PriceConfig(input=3.0, output=3.0),
        }
    )
    assert table.cost("openai-compatible:llama3@http://gpu:8000/v1", MILLION) == 3.0
    assert table.cost("openai-compatible:qwen@http://gpu:8000/v1", MILLION) == 0.0  # free, known
    assert table.cost("openai-compatible:qwen@http://other:8000/v1", MILLION) is None
    assert table.cost("openai:gpt-4o", MILLION) == 25.0  # the override, not the list price
    assert table.cost("openai:gpt-4o-mini", MILLION) == 25.0  # the longest prefix is configured
    assert table.cost("anthropic:claude-haiku-4-5", MILLION) == pytest.approx(6.0)  # shipped
    assert table.cost("openai-compatible:my-model@http://x:1/v1", MILLION) == 6.0
    cached = Usage(1_000_000, 0, cache_read_tokens=1_000_000)
    assert table.cost("openai:gpt-4o", cached) == 1.0
    # An unset cache write rate is the input rate.
    written = Usage(1_000_000, 0, cache_write_tokens=1_000_000)
    assert table.cost("openai:gpt-4o", written) == 5.0


def test_prices_load_from_wakeful_toml_and_bad_ones_are_one_line(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "wakeful.toml").write_text(
        '[prices."@http://127.0.0.1:9/v1"]\ninput = 1\noutput = 2.5\n'
    )
    config = load_config(tmp_path, user_dir=tmp_path / "user")
    assert config.prices["@http://127.0.0.1:9/v1"] == PriceConfig(input=1.0, output=2.5)
    (tmp_path / "wakeful.toml").write_text("[prices.x]\ninput = -1\noutput = 1\n")
    with pytest.raises(UsageError, match="prices"):
        load_config(tmp_path, user_dir=tmp_path / "user")


async def test_a_session_records_unknown_or_configured_cost(tmp_path: Path) -> None:
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"rules": [{"match": ".", "replies": [{"text": "hi"}]}]}))
    model = f"scripted:{script}"
    rt = Runtime(str(tmp_path / "a.db"), model=model, workspace=tmp_path)
    try:
        [turn] = await rt.run("hello")
        [usage] = [e.event for e in rt.store.events(turn_session(rt), types=["usage.recorded"])]
        assert isinstance(usage, UsageRecorded) and usage.cost_usd is None
        [record] = run_records(rt.store, turn_session(rt))
        assert record.to_json()["cost_usd"] is None and record.unpriced == 1
    finally:
        await rt.aclose()
    priced = Config(prices={model: PriceConfig(input=1000.0, output=1000.0)})
    rt = Runtime(str(tmp_path / "b.db"), model=model, workspace=tmp_path, config=priced)
    try:
        await rt.run("hello")
        [usage] = [e.event for e in rt.store.events(turn_session(rt), types=["usage.recorded"])]
        assert isinstance(usage, UsageRecorded)
        assert usage.input_tokens > 0
        assert usage.cost_usd == pytest.approx((usage.input_tokens + usage.output_tokens) / 1000)
    finally:
        await rt.aclose()


def turn_session(rt: Runtime) -> str:
    row = rt.store.latest_session()
    assert row is not None
    return row.id


def test_replay_and_session_show_say_unknown_never_zero(wk: Wk, workdir: Path) -> None:
    model = write_script(workdir, [{"match": ".", "replies": [{"text": "plain answer"}]}])
    sid = json.loads(wk("run", "--model", model, "--format", "json", "hello").stdout)["session_id"]
    shown = wk("session", "show", sid).stdout
    assert "unknown" in shown and "$0.0000" not in shown
    replayed = wk("replay", sid, "--turn", "1", "--step", "1", "--model", model).stdout
    assert "unknown" in replayed and "$0.000000" not in replayed
    data = json.loads(
        wk("replay", sid, "--turn", "1", "--step", "1", "--model", model, "--format", "json").stdout
    )
    assert data["models"][model]["cost_usd"] is None
    # Priced in wakeful.toml, the same replay shows a cost.
    (workdir / "wakeful.toml").write_text(f'[prices."{model}"]\ninput = 1.0\noutput = 1.0\n')
    sid2 = json.loads(wk("run", "--model", model, "--format", "json", "hi").stdout)["session_id"]
    [line] = [x for x in wk("session", "show", sid2).stdout.splitlines() if x.startswith("usage")]
    assert "unknown" not in line and "$" in line
