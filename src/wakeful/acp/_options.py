"""A session's agent and model as ACP modes and configuration options (pure).

ACP's *mode* is wakeful's **agent** (`build`, `plan`, `[agents.NAME]`); its `model` option
(category `model`) is the session's **model spec**. Both are durable session state in wakeful,
changed only by a recorded `session.updated` (`Runtime.set_identity`), so a choice made in the
editor holds for the session wherever it is driven next.

The models offered are the ones this configuration names (the default model, `[agents]`
models, `[providers.models]` keys that are whole specs) and the session's own; the editor shows
them as a list, and any other spec can be set through the library or `wakeful session`.
"""

from __future__ import annotations

from acp.schema import (
    SessionConfigOptionSelect,
    SessionConfigSelectOption,
    SessionMode,
    SessionModeState,
)

from ..config import Config
from ..runner import BUILTIN_AGENTS

MODEL_OPTION = "model"
MODE_OPTION = "mode"


def agents(config: Config) -> dict[str, str]:
    """Every agent a session at this configuration may run as: name -> description."""
    known = {name: agent.description for name, agent in BUILTIN_AGENTS.items()}
    for name, agent in config.agents.items():
        known[name] = agent.description or known.get(name, "")
    return known


def models(config: Config, *current: str | None) -> list[str]:
    """The model specs to offer: the `current` ones first, then those the configuration
    names, each once, in that order."""
    found = [m for m in current if m]
    found.append(config.providers.model or "")
    found += [a.model or "" for a in config.agents.values()]
    found += [spec for spec in config.providers.models if ":" in spec or spec == "local"]
    return list(dict.fromkeys(m for m in found if m))


def modes(config: Config, agent: str) -> SessionModeState:
    """The agents as ACP modes, `agent` current."""
    known = agents(config)
    known.setdefault(agent, "")
    return SessionModeState(
        current_mode_id=agent,
        available_modes=[
            SessionMode(id=name, name=name, description=text or None)
            for name, text in known.items()
        ],
    )


def config_options(config: Config, agent: str, model: str) -> list[SessionConfigOptionSelect]:
    """The session's mode (agent) and model as select options, with their current values."""
    known = agents(config)
    known.setdefault(agent, "")
    return [
        SessionConfigOptionSelect(
            type="select",
            id=MODE_OPTION,
            name="Agent",
            category="mode",
            current_value=agent,
            description="The wakeful agent the session runs as.",
            options=[
                SessionConfigSelectOption(value=n, name=n, description=t or None)
                for n, t in known.items()
            ],
        ),
        SessionConfigOptionSelect(
            type="select",
            id=MODEL_OPTION,
            name="Model",
            category="model",
            current_value=model,
            description="The model spec the session uses.",
            options=[SessionConfigSelectOption(value=m, name=m) for m in models(config, model)],
        ),
    ]
