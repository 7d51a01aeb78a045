"""`wakeful token create|list|revoke` as a user runs them, and a `wakeful serve` process that
takes the tokens they make and never writes one to its output (docs/access.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.cli.conftest import Wk
from tests.server.conftest import ECHO, script
from tests.server.test_serve_cli import Serve, _env

OPERATOR = "operator-token-7c1d9e2b4a"


def test_create_list_revoke(wk: Wk):
    made = json.loads(
        wk("token", "create", "--user", "alice", "--scope", "drive,read", "--format", "json").stdout
    )
    assert made["user"] == "alice" and made["scopes"] == ["read", "drive"]
    assert made["secret"].startswith("wk_")
    text = wk("token", "create", "--user", "bob", "--label", "ci")
    secret = text.stdout.strip()
    assert secret.startswith("wk_") and "shown once" in text.stderr
    listed = json.loads(wk("token", "list", "--format", "json").stdout)
    assert [t["user"] for t in listed] == ["alice", "bob"]
    assert made["secret"] not in json.dumps(listed) and secret not in json.dumps(listed)
    assert (
        json.loads(wk("token", "list", "--user", "bob", "--format", "json").stdout)[0]["label"]
        == "ci"
    )
    gone = wk("token", "revoke", made["id"])
    assert gone.stdout.strip() == f"revoked {made['id']} (alice)"
    assert "revoked" in wk("token", "list").stdout


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["create", "--user", "a", "--scope", "root"], "unknown scope 'root'"),
        (["create", "--user", "bad name"], "bad user name"),
        (["revoke", "tok_0000000000000000"], "no token tok_0000000000000000"),
    ],
)
def test_bad_input_is_one_line(wk: Wk, args: list[str], says: str):
    if args[0] == "revoke":
        wk("token", "create", "--user", "someone")  # the store exists
    done = wk("token", *args, check=False)
    assert done.returncode != 0 and says in done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_serve_takes_user_tokens_and_logs_none(tmp_path: Path):
    env = _env(tmp_path)

    def wk(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "wakeful", *args],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        return done.stdout.strip()

    alice = wk("token", "create", "--user", "alice", "--scope", "read,drive")
    reader = wk("token", "create", "--user", "rita", "--scope", "read")
    server = Serve(tmp_path, "--token", OPERATOR, "--model", script(tmp_path, ECHO), env=env)
    try:
        with httpx.Client(base_url=server.url, timeout=30) as c:
            auth = {"Authorization": f"Bearer {alice}"}
            made = c.post("/sessions", json={"prompt": {"text": "hi", "wait": True}}, headers=auth)
            assert made.status_code == 201, made.text
            sid = made.json()["session"]["id"]
            rita = {"Authorization": f"Bearer {reader}"}
            assert c.get(f"/sessions/{sid}", headers=rita).status_code == 404
            assert c.post("/sessions", json={}, headers=rita).status_code == 403
            c.post("/ui/login", data={"token": alice})
            link = json.loads(wk("share", sid, "--format", "json"))["secret"]
            with httpx.Client(base_url=server.url, timeout=30) as browser:
                opened = browser.post("/ui/share", data={"secret": link}, follow_redirects=True)
                assert opened.status_code == 200 and "hello" in opened.text
            revoked = json.loads(wk("token", "list", "--format", "json"))[1]["id"]
            wk("token", "revoke", revoked)
            assert c.get("/sessions", headers=rita).status_code == 401
    finally:
        assert server.stop() == 0
    log = server.output()
    assert 'GET /sessions HTTP/1.1" 401' in log  # the access log is on
    for secret in (alice, reader, OPERATOR, link):
        assert secret not in log


def test_share_create_list_revoke(wk: Wk, db_url: str):
    from wakeful.store import open_store

    store = open_store(db_url)
    sid = store.create_session(title="shared").id
    store.close()
    made = json.loads(wk("share", sid[:10], "--expires", "2h", "--format", "json").stdout)
    assert made["session_id"] == sid and made["link"] == f"/ui/share#{made['secret']}"
    text = wk("share", sid, "--url", "http://example.test/")
    assert text.stdout.strip().startswith("http://example.test/ui/share#wks_")
    listed = json.loads(wk("share", "list", sid, "--format", "json").stdout)
    assert len(listed) == 2 and made["secret"] not in json.dumps(listed)
    assert wk("share", "revoke", made["id"]).stdout.strip() == f"revoked {made['id']} ({sid})"
    assert "revoked" in wk("share", "list").stdout
    bad = wk("share", sid, "--expires", "100d", check=False)
    assert bad.returncode != 0 and "at most 90d" in bad.stderr


def test_a_token_expires_when_asked_and_the_list_says_so(wk: Wk, db_url: str):
    from wakeful.store import open_store, token_digest

    made = json.loads(
        wk("token", "create", "--user", "ann", "--expires", "7d", "--format", "json").stdout
    )
    assert made["expires_ms"] - made["created_ms"] == 7 * 86_400_000
    assert "live until " in wk("token", "list").stdout
    store = open_store(db_url)
    held = store.access.find_token(digest=token_digest(made["secret"]))
    store.close()
    assert held is not None and held.refusal(made["expires_ms"]) is not None
    forever = wk("token", "create", "--user", "ann", "--format", "json").stdout
    assert json.loads(forever)["expires_ms"] is None
    bad = wk("token", "create", "--user", "ann", "--expires", "later", check=False)
    assert bad.returncode != 0 and "bad interval 'later'" in bad.stderr
