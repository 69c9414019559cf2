"""The server's edge (parley.server.edge), on real servers on 127.0.0.1:

- an open server answers only loopback `Host` names and no foreign `Origin`, on every route and binding
  (issue 28, item 3: DNS rebinding);
- a secured server authenticates from the headers before any route runs or any body is read: an
  unauthenticated body is never read (item 7), unknown paths and agents are 401, not a 404 listing the agents,
  and /readyz shows no backend error text (item 18);
- Parley's own routes (`/trace`, `/pushLog`, an unknown agent's card) answer google.rpc.Status bodies and quote
  at most 64 characters of an id (issue 27, item 5).
"""

from __future__ import annotations

import httpx
import pytest

from support import LiveServer, raw_exchange, secured_app

V1 = {"A2A-Version": "1.0"}
SEND = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {
    "message": {"messageId": "m-edge", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}}
LIST = {"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}


def status_error(resp: httpx.Response, code: int, reason: str) -> str:
    """The message of a google.rpc.Status error body with HTTP status `code` and ErrorInfo `reason`."""
    assert resp.status_code == code, (resp.status_code, resp.text[:300])
    error = resp.json()["error"]
    assert error["code"] == code and error["details"][0]["reason"] == reason, error
    return error["message"]


# --- item 3: an open server answers only loopback names ---------------------------------------------------------


@pytest.mark.parametrize("headers", [{"Host": "evil.example"}, {"Host": "evil.example:8000"},
                                     {"Origin": "http://evil.example"}, {"Origin": "null"}],
                         ids=["host", "host-port", "origin", "origin-null"])
def test_an_open_server_refuses_a_foreign_host_or_origin_on_every_binding(server: LiveServer,
                                                                           headers: dict[str, str]) -> None:
    url = server.url
    rpc = httpx.post(f"{url}/a2a/echo", json=LIST, headers={**V1, **headers})
    assert rpc.status_code == 403, rpc.text
    error = rpc.json()["error"]
    assert error["code"] == -31403 and "loopback" in error["message"], error
    message = status_error(httpx.get(f"{url}/a2a/echo/tasks", headers={**V1, **headers}), 403, "UNTRUSTED_HOST")
    assert "evil.example" in message or "null" in message
    status_error(httpx.get(f"{url}/.well-known/agent-card.json", headers=headers), 403, "UNTRUSTED_HOST")
    sent = httpx.post(f"{url}/", json=SEND, headers={**V1, **headers})
    assert sent.status_code == 403 and "result" not in sent.json()


def test_an_open_server_answers_loopback_names_and_origins(server: LiveServer) -> None:
    port = server.port
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", "localhost", f"[::1]:{port}"):
        for origin in (None, "http://localhost:3000", f"http://127.0.0.1:{port}"):
            headers = {**V1, "Host": host, **({"Origin": origin} if origin else {})}
            sent = httpx.post(f"{server.url}/a2a/echo", json=SEND, headers=headers)
            assert sent.status_code == 200 and "result" in sent.json(), (host, origin, sent.text)
            assert httpx.get(f"{server.url}/a2a/echo/tasks", headers=headers).status_code == 200
            assert httpx.get(f"{server.url}/.well-known/agent-card.json", headers=headers).status_code == 200


# --- items 7 and 18: a secured server authenticates first -------------------------------------------------------


@pytest.fixture(scope="module")
def secured() -> tuple[LiveServer, str]:
    app, key = secured_app()
    srv = LiveServer(app).start()
    yield srv, key
    srv.stop()


@pytest.mark.parametrize("path", ["/a2a/echo", "/", "/a2a/echo/message:send", "/message:send",
                                  "/a2a/echo/v1/message:send"])
def test_an_unauthenticated_body_is_not_read(secured: tuple[LiveServer, str], path: str) -> None:
    """6.75 MB declared (under max_body_bytes), 1 KiB sent: the 401 comes anyway, and the connection closes."""
    srv, _ = secured
    head = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{srv.port}\r\nContent-Type: application/json\r\n"
            f"A2A-Version: 1.0\r\nContent-Length: 6750000")
    answer = raw_exchange(srv.port, head, b"{" + b" " * 1023)
    assert answer.startswith(b"HTTP/1.1 401 "), answer[:300]
    assert b"connection: close" in answer.lower()


def test_a_secured_server_names_nothing_before_authentication(secured: tuple[LiveServer, str]) -> None:
    srv, key = secured
    url = srv.url
    for method, path in (("GET", "/a2a/nobody/tasks"), ("GET", "/no/such/path"), ("GET", "/a2a/echo/nothing"),
                         ("DELETE", "/a2a/echo/tasks"), ("GET", "/a2a/nobody/.well-known/agent-card.json"),
                         ("GET", "/agents"), ("GET", "/tasks/x/trace"), ("GET", "/a2a/nobody/tasks/x/pushLog"),
                         ("POST", "/a2a/nobody")):
        resp = httpx.request(method, url + path, headers=V1)
        assert resp.status_code == 401, (method, path, resp.status_code, resp.text[:200])
        assert "echo" not in resp.text and "nobody" not in resp.text, (path, resp.text)
        assert "www-authenticate" in resp.headers
    for path in ("/.well-known/agent-card.json", "/.well-known/agent.json", "/a2a/echo/.well-known/agent-card.json",
                 "/healthz", "/readyz", "/.well-known/jwks.json"):
        assert httpx.get(url + path).status_code == 200, path
    # Authenticated, the same requests get their real answers.
    status_error(httpx.get(f"{url}/a2a/nobody/tasks", headers={**V1, "X-API-Key": key}), 404, "METHOD_NOT_FOUND")
    sent = httpx.post(f"{url}/a2a/echo", json=SEND, headers={**V1, "X-API-Key": key})
    assert sent.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


def test_readyz_names_the_part_that_is_down_not_its_error(secured: tuple[LiveServer, str]) -> None:
    srv, _ = secured
    runtime = srv.server.config.app.state.parley
    secret = "could not connect to server at /var/run/secret-socket (password=hunter2)"

    async def broken() -> None:
        raise OSError(secret)

    saved = runtime.store.ping
    runtime.store.ping = broken
    try:
        resp = httpx.get(srv.url + "/readyz")
    finally:
        runtime.store.ping = saved
    assert resp.status_code == 503
    assert resp.json()["checks"]["store"] == "unavailable"
    assert "hunter2" not in resp.text and "secret-socket" not in resp.text and "OSError" not in resp.text


# --- issue 27, item 5: Parley's own routes answer google.rpc.Status, quoting short ids --------------------------


def test_parley_routes_answer_status_bodies_with_clipped_ids(server: LiveServer) -> None:
    long_id = "x" * 30_000
    url = server.url
    for path in (f"/tasks/{long_id}/trace", f"/tasks/{long_id}/pushLog", f"/a2a/echo/tasks/{long_id}/trace",
                 f"/a2a/echo/tasks/{long_id}/pushLog"):
        resp = httpx.get(url + path)
        message = status_error(resp, 404, "TASK_NOT_FOUND")
        assert "x" * 64 + "…" in message and len(resp.content) < 1000, (path, len(resp.content))
    for path in (f"/a2a/{long_id}/tasks/t1/trace", f"/a2a/{long_id}/tasks/t1/pushLog",
                 f"/a2a/{long_id}/.well-known/agent-card.json", f"/a2a/{long_id}/tasks"):
        resp = httpx.get(url + path, headers=V1)
        message = status_error(resp, 404, "METHOD_NOT_FOUND")
        assert "x" * 64 + "…" in message and len(resp.content) < 1000, (path, len(resp.content))
    message = status_error(httpx.get(f"{url}/tasks/t1/trace?depth=zero"), 400, "INVALID_PARAMS")
    assert "depth" in message
