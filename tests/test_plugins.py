"""Extension points, not edits (issue 35 item 7): the example package in examples/wakeful-echo
adds a provider family, a tool and a store backend through entry points, with no wakeful file
touched. Installed here as pip would leave it: a `.dist-info` with its `entry_points.txt` (from
the example's own pyproject) on the path of a real `wakeful` subprocess; not a patch."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import wakeful
from tests.execution.helpers import cli_env

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "wakeful-echo"


def _install(site: Path) -> None:
    """What `pip install examples/wakeful-echo` writes that wakeful reads: the dist-info."""
    project = tomllib.loads((EXAMPLE / "pyproject.toml").read_text())["project"]
    info = site / f"wakeful_echo-{project['version']}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {project['version']}\n"
    )
    groups = [
        f"[{group}]\n" + "".join(f"{name} = {value}\n" for name, value in points.items())
        for group, points in project["entry-points"].items()
    ]
    (info / "entry_points.txt").write_text("\n".join(groups))


def _env(tmp_path: Path, installed: bool) -> dict[str, str]:
    env = cli_env(f"filemap://{tmp_path / 'store'}", tmp_path / "home")
    site = tmp_path / "site"
    if installed:
        _install(site)
    paths = [str(site), str(EXAMPLE / "src")] if installed else []
    env["PYTHONPATH"] = os.pathsep.join([*paths, str(Path(wakeful.__file__).parents[1])])
    return env


def _wakeful(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "wakeful", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def work(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    (work / ".git").mkdir(parents=True)
    return work


def test_a_provider_family_and_a_store_backend_from_an_outside_package(tmp_path, work):
    env = _env(tmp_path, installed=True)
    done = _wakeful(["run", "--model", "echo:loud", "hello there"], env, work)
    assert done.returncode == 0, done.stderr
    assert "HELLO THERE" in done.stdout
    assert (tmp_path / "store").is_dir()  # the session lives in the plugin's backend
    listed = _wakeful(["session", "list", "--format", "json"], env, work)
    assert listed.returncode == 0 and '"model": "echo:loud"' in listed.stdout, listed.stderr


def test_a_tool_and_the_family_table_from_an_outside_package(tmp_path, work):
    probe = (
        "from wakeful.execution._toolbox import installed_tools\n"
        "from wakeful.providers import make_provider, parse_model_spec, default_limits\n"
        "p = make_provider('echo:plain')\n"
        "print(p.name, p.context_window, p.max_output_tokens, str(parse_model_spec('echo:x')),\n"
        "      default_limits(parse_model_spec('echo:x')), sorted(installed_tools()))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        env=_env(tmp_path, installed=True),
        cwd=work,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split(" ", 3)[:3] == ["echo", "8192", "1024"]
    assert "echo:x (8192, 1024) ['shout']" in done.stdout


def test_without_the_package_the_family_and_scheme_are_one_line_errors(tmp_path, work):
    env = _env(tmp_path, installed=False)
    done = _wakeful(["session", "list"], env, work)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "no store backend for filemap://" in done.stderr
    env["WAKEFUL_DB"] = str(tmp_path / "s.db")
    done = _wakeful(["run", "--model", "echo:loud", "hi"], env, work)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "unknown provider 'echo'" in done.stderr
