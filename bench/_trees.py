"""Another source tree's wakeful beside this one's, for a bench's same-run baseline.

`compiled_copy` copies a tree's package with its bytecode compiled, as installing a package
does (the tree is not written to), and `tree_env` puts it first on `PYTHONPATH`: with
`PYTHONDONTWRITEBYTECODE=1` in the environment, as on the machines these figures come from,
every process started from a source tree would compile wakeful again (~0.1-0.2 s of CPU each).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path


def compiled_copy(folder: Path, src: str | None) -> str:
    """A copy of the wakeful package of the source tree `src` (this process's when None) under
    `folder`, its bytecode compiled; returns the directory to put first on `PYTHONPATH`."""
    import wakeful

    package = Path(wakeful.__file__).parent if src is None else Path(src, "src", "wakeful")
    shutil.copytree(package, folder / "wakeful", ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", str(folder)],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return str(folder)


def tree_env(path: str) -> dict[str, str]:
    """The environment of a process importing wakeful from `path` first."""
    return os.environ | {"PYTHONPATH": os.pathsep.join([path, os.environ.get("PYTHONPATH", "")])}
