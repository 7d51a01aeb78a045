"""Public names of a package loaded from their modules on first use, so that importing the
package (as a cheap command such as `wakeful --version` does) loads none of its parts."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_names(
    package: str, modules: Mapping[str, str], namespace: dict[str, Any]
) -> Callable[[str], Any]:
    """A module `__getattr__` for `package`: a name in `modules` is imported from its module the
    first time it is asked for and kept in `namespace` (the package's globals), so later reads
    are plain lookups; any other name is an `AttributeError`."""

    def __getattr__(name: str) -> Any:
        module = modules.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    return __getattr__
