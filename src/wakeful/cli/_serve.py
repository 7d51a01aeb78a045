"""`wakeful serve`: the session API, its live log streams and the web inspector over HTTP."""

from __future__ import annotations

import ipaddress
import signal
from pathlib import Path

import click

from ._common import db_option

DEFAULT_PORT = 8765


def _token_path() -> Path:
    import platformdirs

    return Path(platformdirs.user_config_dir("wakeful")) / "server-token"


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", default=DEFAULT_PORT, show_default=True, type=click.IntRange(0, 65535))
@click.option(
    "--token",
    envvar="WAKEFUL_SERVER_TOKEN",
    default=None,
    metavar="TOKEN",
    help="Bearer token (default: generated once and kept in the user config directory).",
)
@click.option(
    "--sensitive-token",
    envvar="WAKEFUL_SERVER_SENSITIVE_TOKEN",
    default=None,
    metavar="TOKEN",
    help="A token that may also read instruction text (sensitive=true).",
)
@click.option("--model", metavar="SPEC", help="Default model of new sessions.")
@click.option("--agent", metavar="NAME", help="Default agent of new sessions.")
@click.option(
    "--max-body",
    type=click.IntRange(min=1024),
    default=None,
    metavar="BYTES",
    help="Largest request body accepted (default 4 MiB); larger ones get 413.",
)
@click.option(
    "--recover/--no-recover",
    default=True,
    show_default=True,
    help="At start-up, drive sessions left with pending input or an orphaned claim.",
)
@click.option(
    "--schedules/--no-schedules",
    default=True,
    show_default=True,
    help="Fire due schedules and drive what they admit, as a worker does.",
)
@click.option(
    "--root-path",
    default="",
    metavar="PREFIX",
    help="The path a proxy serves this under and strips (e.g. /wakeful); links keep it.",
)
@click.option(
    "--log-level",
    type=click.Choice(["critical", "error", "warning", "info", "debug"]),
    default="info",
    show_default=True,
)
@db_option
def serve(
    host: str,
    port: int,
    token: str | None,
    sensitive_token: str | None,
    model: str | None,
    agent: str | None,
    max_body: int | None,
    recover: bool,
    schedules: bool,
    root_path: str,
    log_level: str,
    db: str | None,
) -> None:
    """Serve sessions over HTTP (API under /sessions, SSE logs, inspector at /ui/)."""
    import uvicorn

    from .. import server
    from ..execution import Runtime

    generated = False
    if not token:
        path = _token_path()
        token, generated = server.load_or_create_token(path)
        where = f"kept in {path}"
    else:
        where = "from --token / WAKEFUL_SERVER_TOKEN"
    tokens = server.Tokens([token], [sensitive_token] if sensitive_token else [])
    runtime = Runtime(db, model=model, agent=agent)
    settings = server.Settings(
        max_body_bytes=max_body or server.DEFAULT_MAX_BODY, recover=recover, schedules=schedules
    )
    app = server.create_app(runtime, tokens=tokens, settings=settings, own_runtime=True)
    base = f"http://{host if ':' not in host else f'[{host}]'}:{port}{root_path.rstrip('/')}"
    if generated:
        click.echo(f"generated a server token ({where}):\n  {token}", err=True)
        click.echo(f"inspector: {base}/ui/login#token={token}", err=True)
    else:
        click.echo(f"token {where}; inspector: {base}/ui/", err=True)
    if not _is_loopback(host):
        click.echo(f"warning: listening on {host}, beyond this machine; use TLS in front", err=True)
    # uvicorn shuts down on SIGTERM, restores the handler it found and raises the signal again:
    # with Python's default handler the process then dies of it (exit 143) after a clean stop.
    signal.signal(signal.SIGTERM, _stopped)
    uvicorn.run(
        app,
        host=host,
        port=port,
        log_level=log_level,
        timeout_graceful_shutdown=5,
        root_path=root_path.rstrip("/"),
    )


def _stopped(signum: int, frame: object) -> None:
    """SIGTERM outside uvicorn's own handling (after its clean shutdown): exit 0."""
    raise SystemExit(0)
