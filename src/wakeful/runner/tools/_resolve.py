"""Tools named by import path (`[tools] NAME = "package.module:attribute"`), so every process
that drives a session (run, worker, server) loads the same tools from the same configuration.

The attribute may be a `FunctionTool` (from `@tool`), a plain function (made one), a `Tool`
instance, or a `Tool` class (instantiated without arguments). The module is imported normally;
when it is not found, the workspace root is added to `sys.path` and it is tried once more (a
project's own `tools.py` beside its `wakeful.toml`).

Invariant: anything that goes wrong is a `UsageError` naming `tools.NAME` and why, so a session
that needs the tool is not driven by this process (its turn ends `blocked` with the reason).
"""

from __future__ import annotations

import importlib
import inspect
import sys
from pathlib import Path
from typing import Any

from ...errors import UsageError
from ._base import Tool
from ._custom import FunctionTool, check_tool_name


def load_tool(name: str, path: str, root: Path) -> Tool:
    """The tool `path` names, offered as `name`; `UsageError` saying why it cannot be loaded."""
    where = f"tools.{name}"
    try:
        check_tool_name(name)
    except UsageError as err:
        raise UsageError(f"{where}: {err}") from None
    module_name, sep, attr = path.partition(":")
    if not sep or not module_name or not attr:
        raise UsageError(f"{where}: {path!r} is not an import path 'package.module:attribute'")
    module = _import(where, module_name, root)
    obj: Any = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise UsageError(f"{where}: {module_name} has no attribute {attr!r}") from None
    return _as_tool(where, name, obj)


def _import(where: str, module_name: str, root: Path) -> Any:
    importlib.invalidate_caches()  # a module installed since this process last looked
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        top = module_name.partition(".")[0]
        if err.name not in (module_name, top) or str(root) in sys.path:
            raise UsageError(f"{where}: cannot import {module_name}: {err}") from None
    except Exception as err:  # the module itself failed
        raise UsageError(
            f"{where}: importing {module_name} failed: {type(err).__name__}: {err}"
        ) from None
    sys.path.append(str(root))  # a project's own module beside its configuration
    try:
        return importlib.import_module(module_name)
    except Exception as err:
        raise UsageError(
            f"{where}: cannot import {module_name} (also tried {root}): {type(err).__name__}: {err}"
        ) from None


def _as_tool(where: str, name: str, obj: Any) -> Tool:
    try:
        if isinstance(obj, FunctionTool):
            if obj.name == name:
                return obj
            return FunctionTool(
                obj.fn,
                name=name,
                description=obj.description,
                read_only=obj.read_only,
                permission=None if obj.permission_key == obj.name else obj.permission_key,
            )
        if inspect.isclass(obj):
            obj = obj()
        elif inspect.isfunction(obj) or inspect.ismethod(obj):
            return FunctionTool(obj, name=name)
    except UsageError as err:
        raise UsageError(f"{where}: {err}") from None
    except Exception as err:
        raise UsageError(f"{where}: cannot make the tool: {type(err).__name__}: {err}") from None
    missing = [
        a for a in ("name", "description", "read_only", "input_model", "run") if not hasattr(obj, a)
    ]
    if missing:
        raise UsageError(f"{where}: {type(obj).__name__} is not a tool (no {', '.join(missing)})")
    if obj.name != name:
        raise UsageError(f"{where}: the tool is named {obj.name!r}; use that name as the key")
    tool: Tool = obj
    return tool
