"""`parley serve` as a real process: development mode, refusing to expose an open server, and the switch to
secured as soon as a key exists in its database.

- On a loopback address with no credentials the server is open (every caller is `anonymous`) and says so
  loudly on stderr; the quick start (`parley send URL TEXT`) works without a key, and the cards declare
  no security they would not enforce.
- On a non-loopback address with no credentials it refuses to start (naming `--insecure` and
  `parley keys create`), unless `--insecure` is given.
- Once a key exists in its `--db` (made before it starts, or while it runs: noticed within a second),
  every request without a key gets HTTP 401, and the cards declare the API-key scheme.
- A server that was secured on a non-loopback address must not fall open when its keys go away.

A2A 1.0 section 7.1 (production deployments use protected communication), section 7.4 (the server MUST
authenticate every request based on its declared authentication requirements), section 7.3 / 8 (the
card's `securitySchemes` tell clients what is required) and section 3.3.2 (authentication errors: HTTP 401).
"""

from __future__ import annotations

import json
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from support import needs

from .secured import (
    ENV,
    PARLEY,
    SECURED_RECHECK,
    TIMEOUT,
    WAIT,
    Served,
    cli,
    create_key,
    error_of,
    free_port,
    jsonrpc,
    keys_json,
    non_loopback_ip,
    ok,
    one_error_line,
    poll,
    send_jsonrpc,
    served,
)

UNAUTHENTICATED = -31401
DEV_WARNING = ("WARNING", "no credentials configured", "development mode")


def card(url: str, v1: bool = True) -> dict:
    resp = httpx.get(url + "/.well-known/agent-card.json", headers={"A2A-Version": "1.0"} if v1 else {},
                     timeout=WAIT)
    assert resp.status_code == 200, resp.text
    return resp.json()


def warning_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "WARNING" in line and "credentials" in line]


def exposed_hosts() -> list[object]:
    ip = non_loopback_ip()
    return ["0.0.0.0", pytest.param(ip or "no-ip", id="machine-ip",
                                    marks=pytest.mark.skipif(ip is None, reason="no non-loopback address"))]


@pytest.fixture
def db(tmp_path: Path) -> str:
    return str(tmp_path / "parley.db")


# --- development mode on loopback --------------------------------------------------------------------------------


def test_loopback_without_keys_starts_in_development_mode(db: str) -> None:
    """Section 7.4 read with 7.1: with nothing configured the loopback server is open, and says so on stderr
    (a WARNING naming development mode and how to require a key); the quick-start `parley send` works
    without a key, and the card declares no security scheme (it enforces none)."""
    with served("--db", db) as srv:
        warned = warning_lines(srv.stderr)
        assert len(warned) == 1, srv.stderr
        for fragment in (*DEV_WARNING, "anonymous", "parley keys create"):
            assert fragment in warned[0], (fragment, warned[0])
        assert warned[0] not in srv.stdout
        out = ok("send", srv.url, "hello without a key").stdout
        assert "completed" in out and "hello without a key" in out
        public = card(srv.url)
        assert "securitySchemes" not in public and "securityRequirements" not in public
        assert "security" not in card(srv.url, v1=False)


# --- non-loopback addresses ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("host", exposed_hosts())
def test_a_non_loopback_address_without_credentials_refuses_to_start(db: str, host: str) -> None:
    """Section 7.1 / 7.4: an open server on an address others can reach would trust every client, so
    `parley serve --host HOST` without credentials exits non-zero before listening, with one line that names
    the two ways out: `--insecure`, or making a key (`parley keys create`)."""
    port = free_port()
    proc = subprocess.run([*PARLEY, "serve", "--host", host, "--port", str(port), "--db", db], check=False,
                          capture_output=True, text=True, env=ENV, timeout=TIMEOUT)
    line = one_error_line(proc, "--insecure", "parley keys create")
    assert host in line
    with pytest.raises(httpx.TransportError):
        httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2)


def test_a_non_loopback_address_with_insecure_starts_open(db: str) -> None:
    """Section 7.1: `--insecure` is the explicit opt-in to an open server on a reachable address: it starts,
    warns that every client that can reach it is trusted, and serves requests without a key."""
    with served("--host", "0.0.0.0", "--insecure", "--db", db) as srv:
        warned = warning_lines(srv.stderr)
        assert len(warned) == 1 and "every client that can reach it" in warned[0], srv.stderr
        assert send_jsonrpc(srv.agent_url("echo"), "open").status_code == 200
        assert ok("send", srv.url, "insecure but working").returncode == 0


def test_a_non_loopback_address_with_a_key_starts_without_insecure(db: str) -> None:
    """Section 7.4: a key in the database is a credential, so a non-loopback server starts without
    `--insecure`, prints no development-mode warning, and refuses requests without a key (401)."""
    key = create_key("echo", "--db", db)
    with served("--host", "0.0.0.0", "--db", db) as srv:
        assert warning_lines(srv.stderr) == [], srv.stderr
        resp = send_jsonrpc(srv.agent_url("echo"), "anyone?")
        assert resp.status_code == 401 and error_of(resp)["code"] == UNAUTHENTICATED
        assert send_jsonrpc(srv.agent_url("echo"), "me", token=key.token).status_code == 200


# --- a key appears ------------------------------------------------------------------------------------------------------


def test_once_a_key_exists_requests_without_a_key_get_401(db: str) -> None:
    """Section 7.4 and 3.3.2: a key made in the server's --db while it runs in development mode secures it
    within the documented second: from then on a request without a key gets HTTP 401 with a
    WWW-Authenticate challenge (JSON-RPC error -31401), `parley send` without a key fails with that error,
    and with the key (`--api-key`, or PARLEY_API_KEY) it works. The card now declares the API-key scheme."""
    with served("--db", db) as srv:
        url = srv.agent_url("echo")
        assert send_jsonrpc(url, "still open").status_code == 200
        key = create_key("echo", "--db", db)
        resp, took = poll(lambda: r if (r := send_jsonrpc(url, "now?")).status_code != 200 else None,
                          within=SECURED_RECHECK + 5, what="requests without a key are refused")
        assert took <= SECURED_RECHECK + 1.0, f"open for {took:.2f}s after the key was made"
        assert resp.status_code == 401, resp.text
        assert "X-API-Key" in resp.headers.get("www-authenticate", "")
        assert error_of(resp)["code"] == UNAUTHENTICATED
        one_error_line(cli("send", srv.url, "no key"), "-31401")
        out = ok("--api-key", key.token, "send", srv.url, "with a key").stdout
        assert "completed" in out and "with a key" in out
        assert "completed" in ok("send", srv.url, "from the environment", env={"PARLEY_API_KEY": key.token}).stdout
        public = card(srv.url)
        assert public["securitySchemes"]["apiKey"]["apiKeySecurityScheme"]["name"] == "X-API-Key"
        assert public["securityRequirements"] == [{"schemes": {"apiKey": {"list": []}}}]


@pytest.fixture
def exposed(db: str) -> Iterator[tuple[Served, str]]:
    key = create_key("echo", "--db", db)
    with served("--host", "0.0.0.0", "--db", db) as srv:
        yield srv, key.id


def test_revoking_the_last_key_does_not_open_a_non_loopback_server(exposed: tuple[Served, str], db: str) -> None:
    """Sections 7.1 and 7.4: a server on a non-loopback address that started secured (without --insecure)
    must keep authenticating every request when its only key is revoked: it may refuse everyone, but it must
    never fall back to trusting every client, which it would have refused to start as. Requests without a
    key are watched for twice the documented recheck interval after the revocation."""
    srv, key_id = exposed
    url = srv.agent_url("echo")
    assert send_jsonrpc(url, "before").status_code == 401
    ok("keys", "revoke", key_id, "--db", db)
    window = 2.5 * SECURED_RECHECK
    start = time.monotonic()
    seen = []
    while time.monotonic() - start < window:  # an observation window, not a synchronisation
        status = send_jsonrpc(url, "after the revocation").status_code
        seen.append(status)
        assert status == 401, (f"{time.monotonic() - start:.2f}s after its last key was revoked, the server on "
                               f"0.0.0.0 answered a request without a key with HTTP {status}: it trusts every "
                               f"client now (statuses seen: {sorted(set(seen))})")
        time.sleep(0.05)


# --- secured: the banner says so, and the deliberate way back (issue 26) --------------------------------------------


def test_a_secured_server_says_so_at_start_with_its_active_keys(db: str) -> None:
    """The start-up banner names what secures the server (how many API keys are active, and the command that
    lists them), instead of staying silent while every request without a key gets 401."""
    first = create_key("echo", "--db", db)
    second = create_key("echo", "--db", db)
    ok("keys", "revoke", second.id, "--db", db)
    with served("--db", db) as srv:
        secured = [line for line in srv.stderr.splitlines() if line.startswith("secured:")]
        assert len(secured) == 1, srv.stderr
        assert "1 active API key(s) of 2" in secured[0] and f"parley keys list --db {db}" in secured[0]
        assert not warning_lines(srv.stderr)
        assert send_jsonrpc(srv.url, "hello", token=None).status_code == 401
        assert send_jsonrpc(srv.url, "hello", token=first.token).status_code == 200


def test_purge_after_revoking_every_key_is_the_way_back_to_development_mode(db: str) -> None:
    """Revoking never opens a server by itself; `parley keys purge` forgets revoked and expired keys (never an
    active one), and a restart on loopback is open again, with the task made before the key still there."""
    with served("--db", db) as srv:
        task = send_jsonrpc(srv.url, "made in development mode", token=None).json()["result"]["task"]
    key = create_key("echo", "--db", db)
    refused = ok("keys", "purge", "--db", db)
    assert "purged 0" in refused.stdout and "1 left" in refused.stdout and "stays secured" in refused.stderr
    ok("keys", "revoke", key.id, "--db", db)
    with served("--db", db) as srv:  # revoked, not purged: still secured
        assert send_jsonrpc(srv.url, "hello", token=None).status_code == 401
    purged = ok("keys", "purge", "--db", db)
    assert "purged 1" in purged.stdout and "0 left" in purged.stdout and "development mode" in purged.stderr
    assert keys_json("--db", db) == []
    assert json.loads(ok("keys", "purge", "--db", db, "--json").stdout) == {"purged": [], "left": 0}
    with served("--db", db) as srv:
        assert len(warning_lines(srv.stderr)) == 1
        assert send_jsonrpc(srv.url, "hello", token=None).status_code == 200
        got = jsonrpc(srv.url, "GetTask", {"id": task["id"]}).json()
        assert got["result"]["id"] == task["id"]  # no task was lost on the way


# --- every listening address: gRPC too (issue 28, item 4) -------------------------------------------------------


def grpc_config(tmp_path: Path, grpc_host: str, grpc_port: int) -> str:
    """A parley.toml whose HTTP host is loopback and whose gRPC listens on `grpc_host`."""
    path = tmp_path / "parley.toml"
    path.write_text(f'[server]\nhost = "127.0.0.1"\ngrpc_port = {grpc_port}\ngrpc_host = "{grpc_host}"\n'
                    f'db = "{tmp_path / "parley.db"}"\nbuiltin_agents = true\n')
    return str(path)


@needs("grpc", "grpc")
def test_grpc_on_every_interface_without_credentials_refuses_to_start(tmp_path: Path) -> None:
    """`host` on loopback but `grpc_host = "0.0.0.0"`: an unauthenticated gRPC server on every interface. The
    open-mode rule looks at every listening address: `parley serve` exits before listening, with one line naming
    grpc_host and the ways out."""
    port, grpc_port = free_port(), free_port()
    proc = subprocess.run([*PARLEY, "serve", "--config", grpc_config(tmp_path, "0.0.0.0", grpc_port), "--port",
                           str(port)], check=False, capture_output=True, text=True, env=ENV, timeout=TIMEOUT)
    line = one_error_line(proc, "grpc_host 0.0.0.0", "--insecure", "parley keys create")
    assert "host 127.0.0.1" not in line
    with pytest.raises(httpx.TransportError):
        httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2)


@needs("grpc", "grpc")
def test_grpc_on_every_interface_starts_with_insecure(tmp_path: Path) -> None:
    grpc_port = free_port()
    with served("--config", grpc_config(tmp_path, "0.0.0.0", grpc_port), "--insecure") as srv:
        assert "every client that can reach it" in warning_lines(srv.stderr)[0], srv.stderr
        with socket.create_connection(("127.0.0.1", grpc_port), timeout=WAIT):
            pass  # gRPC listens


@needs("grpc", "grpc")
@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # uvicorn exits its thread
def test_an_app_served_another_way_does_not_start_open_grpc_on_every_interface() -> None:
    """The same rule where `parley serve` does not check it (an app run by uvicorn directly): the gRPC server
    refuses to start, so the app's start-up fails; with `insecure` it starts."""
    from parley.serve import default_app
    from parley.settings import Settings
    from support import LiveServer

    def app(insecure: bool) -> LiveServer:
        settings = Settings(db="memory", grpc_port=free_port(), grpc_host="0.0.0.0", insecure=insecure)
        return LiveServer(default_app(None, settings=settings))

    with pytest.raises(RuntimeError, match="did not start"):
        app(insecure=False).start()
    srv = app(insecure=True).start()
    srv.stop()
