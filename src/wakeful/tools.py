"""The public tool API: write a tool, register it, name it in configuration.

```python
from pydantic import BaseModel
from wakeful.tools import tool

class Shout(BaseModel):
    text: str

@tool(read_only=True)
def shout(args: Shout) -> str:
    \"\"\"Upper-case the text.\"\"\"
    return args.text.upper()
```

Register it with `Runtime(tools=[shout])` (or `runtime.add_tool(shout)`), or name it in
`wakeful.toml` so every process driving the session loads it: `[tools] shout =
"package.module:shout"`. See `docs/tools.md`.
"""

from .runner.tools import (
    ExtensionState,
    FunctionTool,
    PermissionPolicy,
    Tool,
    ToolContext,
    ToolFailure,
    ToolOutcome,
    ToolUnavailable,
    load_tool,
    tool,
)

__all__ = [
    "ExtensionState",
    "FunctionTool",
    "PermissionPolicy",
    "Tool",
    "ToolContext",
    "ToolFailure",
    "ToolUnavailable",
    "ToolOutcome",
    "load_tool",
    "tool",
]
