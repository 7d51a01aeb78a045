"""The provider family table: one row per family (how a spec's model part is read, the options
its factory takes, the environment variable of its API key, its default limits, the factory),
in place of an if-chain in `make_provider`.

Third-party families register through the `wakeful.providers` entry point group, the way `llm`
and pytest plugins do: a distribution declares

    [project.entry-points."wakeful.providers"]
    echo = "wakeful_echo:ECHO"

where `ECHO` is a `ProviderFamily` named `echo` (or a callable returning one), and `echo:MODEL`
then works wherever a model spec does, with no change to wakeful (docs/contributing.md). The
entry points are read on the first spec whose family is not built in (cold start: a built-in
spec reads none), once per process. A built-in name cannot be taken over.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any

from ..errors import UsageError

if TYPE_CHECKING:
    from ._base import Provider

ENTRY_POINTS = "wakeful.providers"
_MODEL = re.compile(r"^[^\s@]+$")
Limits = Callable[[str], tuple[int, int]]  # model name -> (context window, output allowance)
Factory = Callable[["ModelSpec", dict[str, Any]], "Provider"]


@dataclass(frozen=True)
class ModelSpec:
    """A parsed model spec: the provider family, the model (or script path) and a base URL."""

    family: str
    model: str
    base_url: str | None = None

    def __str__(self) -> str:
        family = find_family(self.family)
        if family is not None and family.bare_model is not None:
            return self.family
        if self.base_url is not None:
            return f"{self.family}:{self.model}@{self.base_url}"
        return f"{self.family}:{self.model}"


def named_model(family: str, rest: str) -> tuple[str, str | None]:
    """A spec's model part for most families: a name without spaces or '@' (no base URL)."""
    if not _MODEL.match(rest):
        raise ValueError(f"expected {family}:MODEL with a model name and no spaces or '@'")
    return rest, None


@dataclass(frozen=True)
class ProviderFamily:
    """One provider family: `name:MODEL` specs, built by `factory(spec, options)`.

    `options` are the options the factory takes besides `context_window` and
    `max_output_tokens` (any other is a `UsageError` naming the allowed ones); `limits` gives a
    model's default (context window, output allowance), set as those two options unless given
    (None: the factory decides, as `scripted` reads them from its script); `key_env` is the
    environment variable of its API key (checked by `check_model` unless an `api_key` option
    is given); `model` reads the spec's part after `name:` into (model, base URL), raising
    `ValueError` with the reason; `check` validates what `check_model` cannot see from the spec
    (a scripted file); `bare_model` makes the bare name a spec of that model (`local`).
    """

    name: str
    factory: Factory
    options: frozenset[str] = frozenset()
    key_env: str | None = None
    limits: Limits | None = None
    model: Callable[[str, str], tuple[str, str | None]] = named_model
    check: Callable[[ModelSpec, dict[str, Any]], None] | None = None
    bare_model: str | None = None


_BUILTIN: dict[str, ProviderFamily] = {}
_plugins: dict[str, ProviderFamily] | None = None


def register_builtin(family: ProviderFamily) -> None:
    """Add a family shipped with wakeful (`_spec.py` registers them at import)."""
    _BUILTIN[family.name] = family


def _load_plugins() -> dict[str, ProviderFamily]:
    global _plugins
    if _plugins is None:
        found: dict[str, ProviderFamily] = {}
        for ep in entry_points(group=ENTRY_POINTS):
            if ep.name in _BUILTIN or ep.name in found:
                continue  # a built-in family (or the first registration) keeps its name
            try:
                value = ep.load()
                family = value if isinstance(value, ProviderFamily) else value()
            except Exception as err:  # a broken plugin: one line, not a traceback
                raise UsageError(
                    f"provider family {ep.name!r} ({ep.value}) cannot be loaded: "
                    f"{type(err).__name__}: {err}"
                ) from None
            if not isinstance(family, ProviderFamily) or family.name != ep.name:
                raise UsageError(
                    f"entry point {ep.name} = {ep.value} in {ENTRY_POINTS} is not a "
                    f"ProviderFamily named {ep.name!r}"
                )
            found[ep.name] = family
        _plugins = found
    return _plugins


def find_family(name: str) -> ProviderFamily | None:
    """The family called `name`: built in, else registered through an entry point; None."""
    return _BUILTIN.get(name) or _load_plugins().get(name)


def family_names() -> list[str]:
    """Every family's name: the built-in ones in their order, then the registered ones."""
    return [*_BUILTIN, *sorted(_load_plugins())]
