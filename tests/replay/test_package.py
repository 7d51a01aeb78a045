"""`wakeful.replay` exports exactly the names it lists, each loaded on first use: importing
the package loads none of its modules (the CLI imports it for `debug prompt`)."""

from __future__ import annotations

import subprocess
import sys

import wakeful.replay


def test_every_listed_name_loads_and_nothing_else_is_listed() -> None:
    for name in wakeful.replay.__all__:
        assert getattr(wakeful.replay, name) is not None, name
    lazy = set(wakeful.replay._LAZY)  # type: ignore[attr-defined]
    assert lazy == set(wakeful.replay.__all__)


def test_importing_the_package_loads_no_module_of_it() -> None:
    code = (
        "import sys, wakeful.replay; "
        "print(sorted(m for m in sys.modules if m.startswith('wakeful.replay.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
