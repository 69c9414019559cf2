"""The admin HTTP API of a running server (src/parley/server/admin.py), end to end over real HTTP.

    POST   /admin/keys        make a key: 201, the token shown once, usable at once on the A2A endpoints
    GET    /admin/keys        list keys: never a secret
    DELETE /admin/keys/{id}   revoke: the key stops working at once; 404 for an unknown id
    GET    /admin/tasks/{id}  any principal's task, with its owner

Every server here is a real uvicorn server on 127.0.0.1 with an in-memory store. It is secured by an
admin key from the environment (`AuthSettings(admin_key_env=...)`) and lists `ops` in
`admin_principals`; A2A calls go through the JSON-RPC binding with `X-API-Key`.

Spec: A2A 1.0 section 7.3 (credentials are obtained out of band: the admin API is one such band),
7.4 (every request is authenticated; 401 with a challenge), 7.5 (authorization on the authenticated
identity: only admins may use the admin API, 403 otherwise), 3.3.2 (error categories: authentication,
authorization, validation with a precise message, not-found), 13.1 (a principal sees only its own tasks;
another's task is TaskNotFound, section 5.4 code -32001).
"""

from __future__ import annotations

import re
import secrets
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from parley.agents.base import RunContext
from parley.app import Parley, Settings
from parley.runtime import Runtime
from parley.security.keys import digest
from parley.settings import AuthSettings
from support import LiveServer

from .secured import TOKEN_RE, poll

WAIT = 15.0  # the longest one observable step may take; a failure detector, never a pacing delay
ADMIN_ENV = "PARLEY_TEST_ADMIN_API_KEY"
QUESTION = "Which colour?"


# --- a live, secured server ----------------------------------------------------------------------------------


@dataclass
class Srv:
    live: LiveServer
    runtime: Runtime
    admin_token: str | None  # the environment's admin key (None: the server has none)

    @property
    def url(self) -> str:
        return self.live.url

    def agent_url(self, agent: str) -> str:
        return f"{self.live.url}/a2a/{agent}"


def build_app(settings: Settings) -> Parley:
    app = Parley(settings=settings)

    @app.agent(id="work", description="Asks a question, then answers", default=True)
    async def work(ctx: RunContext):
        if ctx.turn == 1:
            yield ctx.ask(QUESTION)
            return
        yield f"work: {ctx.text}"

    @app.agent(id="other", description="Answers at once")
    async def other(ctx: RunContext):
        yield f"other: {ctx.text}"

    return app


@pytest.fixture
def start(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., Srv]]:
    """Factory: `start(secured=True)` serves the test agents; secured means an admin key in the environment
    (read when the runtime is built) and `admin_principals = ["ops"]`; `secured=False` is an open server."""
    started: list[LiveServer] = []

    def go(*, secured: bool = True) -> Srv:
        token = None
        if secured:
            token = "adm-" + secrets.token_urlsafe(24)
            monkeypatch.setenv(ADMIN_ENV, token)
            auth = AuthSettings(admin_key_env=ADMIN_ENV, admin_principals=["ops"])
        else:
            monkeypatch.delenv(ADMIN_ENV, raising=False)
            auth = AuthSettings()
        app = build_app(Settings(db="memory", auth=auth))
        live = LiveServer(app).start()
        started.append(live)
        return Srv(live, live.server.config.app.state.parley, token)

    yield go
    for live in started:
        live.stop()


@pytest.fixture
def srv(start: Callable[..., Srv]) -> Srv:
    return start()


# --- requests ------------------------------------------------------------------------------------------------

def hdr(token: str | None) -> dict[str, str]:
    return {"X-API-Key": token} if token else {}


def admin_post(srv: Srv, body: Any, token: str | None = "ADMIN", **kw: Any) -> httpx.Response:
    token = srv.admin_token if token == "ADMIN" else token
    return httpx.post(f"{srv.url}/admin/keys", json=body, headers=hdr(token), timeout=WAIT, **kw)


def admin_get(srv: Srv, path: str, token: str | None = "ADMIN", **kw: Any) -> httpx.Response:
    token = srv.admin_token if token == "ADMIN" else token
    return httpx.get(f"{srv.url}{path}", headers=hdr(token), timeout=WAIT, **kw)


def admin_delete(srv: Srv, path: str, token: str | None = "ADMIN") -> httpx.Response:
    token = srv.admin_token if token == "ADMIN" else token
    return httpx.delete(f"{srv.url}{path}", headers=hdr(token), timeout=WAIT)


def new_key(srv: Srv, **body: Any) -> tuple[dict[str, Any], str]:
    """POST /admin/keys as the environment's admin; (the key record, the token)."""
    resp = admin_post(srv, {"agent": "work", **body})
    assert resp.status_code == 201, resp.text
    data = resp.json()
    return data["key"], data["token"]


def rpc(srv: Srv, agent: str, method: str, params: dict[str, Any], token: str | None) -> httpx.Response:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    return httpx.post(srv.agent_url(agent), json=body, headers={"A2A-Version": "1.0", **hdr(token)}, timeout=WAIT)


def message(text: str, task_id: str | None = None) -> dict[str, Any]:
    msg: dict[str, Any] = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": text}]}
    if task_id:
        msg["taskId"] = task_id
    return msg


def send(srv: Srv, agent: str, text: str, token: str | None, task_id: str | None = None) -> httpx.Response:
    return rpc(srv, agent, "SendMessage", {"message": message(text, task_id)}, token)


def task_of(resp: httpx.Response) -> dict[str, Any]:
    assert resp.status_code == 200, (resp.status_code, resp.text)
    body = resp.json()
    assert "result" in body, body
    return body["result"]["task"]


def rpc_error(resp: httpx.Response) -> dict[str, Any]:
    body = resp.json()
    assert "error" in body, (resp.status_code, body)
    return body["error"]


def api_error(resp: httpx.Response, status: int) -> str:
    """The admin API's error answer: `status`, a JSON body {"error": {"code": status, "message": ...}}."""
    assert resp.status_code == status, (resp.status_code, resp.text)
    assert resp.headers["content-type"].startswith("application/json"), resp.headers
    err = resp.json()["error"]
    assert err["code"] == status, err
    assert isinstance(err["message"], str) and err["message"], err
    return err["message"]


def listed(srv: Srv, query: str = "") -> dict[str, dict[str, Any]]:
    resp = admin_get(srv, f"/admin/keys{query}")
    assert resp.status_code == 200, resp.text
    return {k["id"]: k for k in resp.json()["keys"]}


KEY_FIELDS = {"id", "agent", "name", "scopes", "principal", "createdAt", "lastUsedAt", "expiresAt", "revokedAt",
              "state"}


# --- create ----------------------------------------------------------------------------------------------------


def test_create_returns_201_and_the_token_once_and_the_key_works_at_once(srv: Srv):
    """Sections 7.3 / 7.4: POST /admin/keys answers 201 with the key's record and its token (`pk_<id>_<secret>`,
    `Cache-Control: no-store`); the record holds what was asked (agent, name, scopes, principal, expiry) and
    never the secret. The token authenticates at once on the A2A endpoint of its agent, and the task it makes
    belongs to the named principal (GET /admin/tasks shows that owner)."""
    before = time.time()
    resp = admin_post(srv, {"agent": "work", "name": "ci runner", "scopes": ["a2a", "reports"],
                            "principal": "team-a", "expiresInSeconds": 3600})
    after = time.time()
    assert resp.status_code == 201, resp.text
    assert resp.headers["cache-control"] == "no-store"
    body = resp.json()
    assert set(body) == {"key", "token"}
    token, key = body["token"], body["key"]
    found = TOKEN_RE.fullmatch(token)
    assert found is not None, token
    assert set(key) == KEY_FIELDS
    assert key["id"] == found["id"]
    assert (key["agent"], key["name"], key["scopes"], key["principal"]) == ("work", "ci runner", ["a2a", "reports"],
                                                                           "team-a")
    assert (key["state"], key["revokedAt"], key["lastUsedAt"]) == ("active", None, None)
    assert before - 1 <= key["createdAt"] <= after + 1
    assert before + 3600 - 1 <= key["expiresAt"] <= after + 3600 + 1
    assert found["secret"] not in str(key)

    task = task_of(send(srv, "work", "hello", token))  # works at once: no waiting for the server to notice it
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    seen = admin_get(srv, f"/admin/tasks/{task['id']}")
    assert seen.status_code == 200, seen.text
    assert (seen.json()["owner"], seen.json()["agent"]) == ("team-a", "work")


def test_created_keys_honour_principal_scopes_agent_and_defaults(srv: Srv):
    """Section 7.5 and 13.1: two keys made with the same principal share its tasks; a key with a principal of
    its own (the default, `key:<id>`) gets TaskNotFound (-32001) for them. A key opens only its agent (403 on
    another: PermissionDenied -31403). Default scopes are ["a2a"]. A key made with the `admin` scope opens every
    agent (`agent: "*"`) and may use the admin API; a key without it is refused there with 403."""
    first, first_token = new_key(srv, principal="shared")
    _, second_token = new_key(srv, principal="shared")
    loner, loner_token = new_key(srv)
    assert first["scopes"] == ["a2a"] and loner["scopes"] == ["a2a"]
    assert loner["principal"] == f"key:{loner['id']}"
    assert loner["name"] == ""

    task = task_of(send(srv, "work", "mine", first_token))
    got = rpc(srv, "work", "GetTask", {"id": task["id"]}, second_token)
    assert got.status_code == 200 and got.json()["result"]["id"] == task["id"], got.text
    hidden = rpc(srv, "work", "GetTask", {"id": task["id"]}, loner_token)
    assert rpc_error(hidden)["code"] == -32001

    elsewhere = send(srv, "other", "not yours", first_token)
    assert elsewhere.status_code == 403, elsewhere.text
    assert rpc_error(elsewhere)["code"] == -31403

    assert api_error(admin_get(srv, "/admin/keys", first_token), 403) == "The admin API needs the admin scope"

    admin_key, admin_token = new_key(srv, scopes=["admin"], name="second admin")
    assert (admin_key["agent"], admin_key["scopes"]) == ("*", ["admin"])
    assert admin_get(srv, "/admin/keys", admin_token).status_code == 200
    made = admin_post(srv, {"agent": "other"}, admin_token)  # an admin made by the API can make keys too
    assert made.status_code == 201, made.text
    assert task_of(send(srv, "other", "hi", made.json()["token"]))["status"]["state"] == "TASK_STATE_COMPLETED"


def test_an_expiring_key_works_until_its_expiry_and_not_after(srv: Srv):
    """Section 7.4: a key made with expiresInSeconds=1 authenticates at once, and is refused (401 with
    WWW-Authenticate) from its expiry on, never before; the listing then says `expired`. The wait is bounded
    polling of the server's own clock, not a pacing delay."""
    key, token = new_key(srv, expiresInSeconds=1)
    first = send(srv, "work", "quick", token)
    if time.time() < key["expiresAt"]:  # the request was made before expiry: it must have been served
        assert first.status_code == 200, first.text

    def refused() -> float | None:
        resp = rpc(srv, "work", "ListTasks", {}, token)
        if resp.status_code == 200:
            assert time.time() < key["expiresAt"] + 1, "the key still worked well after its expiry"
            return None
        assert resp.status_code == 401, resp.text
        assert "ApiKey" in resp.headers["www-authenticate"]
        return time.time()

    at, _ = poll(refused, within=WAIT, what="the expired key to be refused")
    assert at >= key["expiresAt"] - 0.5, "the key was refused before its expiry"
    assert listed(srv)[key["id"]]["state"] == "expired"


# --- list ------------------------------------------------------------------------------------------------------


def test_list_shows_every_key_without_any_secret(srv: Srv):
    """Section 7.3 / 13: GET /admin/keys lists every key's record (the create answer's record, plus
    lastUsedAt once used) and no secret: neither a token, nor its secret part, nor the stored digest of the
    secret appears anywhere in the answer. `?agent=` lists the keys that open that agent (admin keys too)."""
    made = [new_key(srv, name="for work"), new_key(srv, agent="other", name="for other", principal="p-other"),
            new_key(srv, scopes=["admin"], name="an admin")]
    task_of(send(srv, "work", "use it", made[0][1]))  # a used key: lastUsedAt is set

    resp = admin_get(srv, "/admin/keys")
    assert resp.status_code == 200, resp.text
    text = resp.text
    keys = {k["id"]: k for k in resp.json()["keys"]}
    assert set(keys) == {k["id"] for k, _ in made}
    pepper = srv.runtime.keys.pepper
    for record, token in made:
        secret = TOKEN_RE.fullmatch(token)["secret"]  # type: ignore[index]
        assert token not in text and secret not in text
        assert digest(pepper, secret) not in text
        shown = keys[record["id"]]
        assert set(shown) == KEY_FIELDS
        assert {k: v for k, v in shown.items() if k != "lastUsedAt"} == {
            k: v for k, v in record.items() if k != "lastUsedAt"}
    assert "token" not in text.lower()
    assert keys[made[0][0]["id"]]["lastUsedAt"] is not None
    assert keys[made[1][0]["id"]]["lastUsedAt"] is None

    assert set(listed(srv, "?agent=other")) == {made[1][0]["id"], made[2][0]["id"]}
    assert set(listed(srv, "?agent=work")) == {made[0][0]["id"], made[2][0]["id"]}


# --- revoke ----------------------------------------------------------------------------------------------------


def test_revoke_stops_the_key_at_once_and_unknown_ids_are_404(srv: Srv):
    """Section 7.4: DELETE /admin/keys/{id} answers 200 with the revoked record (state `revoked`, revokedAt
    set); from then on the key is refused on the A2A endpoint (401, WWW-Authenticate), with no grace period,
    while the owner's other key still works. Revoking again changes nothing (same revokedAt); an unknown id is
    404. The listing shows the key revoked."""
    key, token = new_key(srv, principal="carol")
    _, other_token = new_key(srv, principal="carol")
    task = task_of(send(srv, "work", "before", token))

    before = time.time()
    resp = admin_delete(srv, f"/admin/keys/{key['id']}")
    assert resp.status_code == 200, resp.text
    revoked = resp.json()["key"]
    assert (revoked["id"], revoked["state"]) == (key["id"], "revoked")
    assert before - 1 <= revoked["revokedAt"] <= time.time() + 1

    refused = rpc(srv, "work", "GetTask", {"id": task["id"]}, token)
    assert refused.status_code == 401, refused.text
    assert rpc_error(refused)["code"] == -31401
    assert "ApiKey" in refused.headers["www-authenticate"]
    assert rpc(srv, "work", "GetTask", {"id": task["id"]}, other_token).status_code == 200

    again = admin_delete(srv, f"/admin/keys/{key['id']}")
    assert again.status_code == 200 and again.json()["key"]["revokedAt"] == revoked["revokedAt"]
    assert listed(srv)[key["id"]]["state"] == "revoked"

    api_error(admin_delete(srv, "/admin/keys/0123456789abcdef"), 404)
    api_error(admin_delete(srv, "/admin/keys/nosuchkey"), 404)


# --- any principal's task ----------------------------------------------------------------------------------------


def test_an_admin_sees_any_principals_task_with_its_owner(srv: Srv):
    """Sections 7.5 and 13.1: alice's task is TaskNotFound for bob (-32001, nothing leaks), but GET
    /admin/tasks/{id} shows it to an admin, whoever the admin is (the environment's admin key, a key with the
    `admin` scope, a key of a principal listed in `admin_principals`), with its agent, its owner and the task
    itself (status, history). An unknown task id is 404."""
    _, alice = new_key(srv, principal="alice")
    _, bob = new_key(srv, principal="bob")
    task = task_of(send(srv, "work", "alice's secret plan", alice))
    assert rpc_error(rpc(srv, "work", "GetTask", {"id": task["id"]}, bob))["code"] == -32001

    _, scoped_admin = new_key(srv, scopes=["admin"])
    _, ops = new_key(srv, principal="ops")  # no admin scope: an admin by `admin_principals`
    for token in (srv.admin_token, scoped_admin, ops):
        resp = admin_get(srv, f"/admin/tasks/{task['id']}", token)
        assert resp.status_code == 200, resp.text
        body = resp.json()
        assert (body["agent"], body["owner"]) == ("work", "alice")
        assert body["task"]["id"] == task["id"]
        assert body["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        assert "alice's secret plan" in str(body["task"]["history"])

    assert "not found" in api_error(admin_get(srv, f"/admin/tasks/{uuid.uuid4()}"), 404)


def test_the_task_route_refuses_non_admins_403_and_anonymous_401(srv: Srv):
    """Sections 7.4 / 7.5 / 3.3.2: GET /admin/tasks/{id} with a non-admin key (even the owner's) is 403 and
    shows nothing of the task; without credentials, or with a key the server does not know, it is 401 with a
    `WWW-Authenticate` challenge naming the API key scheme."""
    _, alice = new_key(srv, principal="alice")
    task = task_of(send(srv, "work", "private words", alice))
    path = f"/admin/tasks/{task['id']}"

    forbidden = admin_get(srv, path, alice)
    assert api_error(forbidden, 403) == "The admin API needs the admin scope"
    assert "private words" not in forbidden.text

    for token in (None, "pk_0123456789abcdef_" + "x" * 43, "not-a-key"):
        resp = admin_get(srv, path, token)
        api_error(resp, 401)
        assert "private words" not in resp.text
        challenge = resp.headers.get("www-authenticate", "")
        assert 'ApiKey realm="a2a", header="X-API-Key"' in challenge, resp.headers


@pytest.mark.parametrize("method,path", [("POST", "/admin/keys"), ("GET", "/admin/keys"),
                                         ("DELETE", "/admin/keys/0123456789abcdef"), ("GET", "/admin/tasks/t-1")])
def test_every_admin_route_needs_credentials(srv: Srv, method: str, path: str):
    """Section 7.4: every admin route, without credentials, is 401 with WWW-Authenticate (not 403, not 404,
    and no key is made)."""
    resp = httpx.request(method, f"{srv.url}{path}", json={"agent": "work"} if method == "POST" else None,
                         timeout=WAIT)
    api_error(resp, 401)
    assert "www-authenticate" in resp.headers
    assert listed(srv) == {}


# --- an open server -----------------------------------------------------------------------------------------------


def test_an_open_server_has_no_admin_403_on_every_route(start: Callable[..., Srv]):
    """An open server (no credentials configured: development mode) has no admin principal: every admin route
    answers 403 and says how to configure one; no key is made (so the server stays open: the A2A endpoint
    still answers an anonymous call)."""
    srv = start(secured=False)
    answers = [
        httpx.post(f"{srv.url}/admin/keys", json={"agent": "work"}, timeout=WAIT),
        httpx.get(f"{srv.url}/admin/keys", timeout=WAIT),
        httpx.delete(f"{srv.url}/admin/keys/0123456789abcdef", timeout=WAIT),
        httpx.get(f"{srv.url}/admin/tasks/whatever", timeout=WAIT),
    ]
    for resp in answers:
        msg = api_error(resp, 403)
        assert "admin" in msg and ("admin_key_env" in msg or "--scopes admin" in msg), msg
    assert "pk_" not in answers[0].text
    anonymous = send(srv, "other", "still open", None)
    assert task_of(anonymous)["status"]["state"] == "TASK_STATE_COMPLETED"


# --- bodies -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", None])
def test_a_body_not_declared_json_is_415(srv: Srv, content_type: str | None):
    """As for the A2A bindings (docs/security.md): a body that is not declared JSON (a type a browser may send
    cross-site without a preflight, or no Content-Type at all) is 415, and no key is made."""
    headers = hdr(srv.admin_token)
    if content_type is not None:
        headers["Content-Type"] = content_type
    with httpx.Client(timeout=WAIT) as http:
        req = http.build_request("POST", f"{srv.url}/admin/keys", content=b'{"agent": "work"}', headers=headers)
        if content_type is None:
            req.headers.pop("Content-Type", None)
        resp = http.send(req)
    api_error(resp, 415)
    assert listed(srv) == {}


BAD_BODIES = [
    pytest.param([{"agent": "work"}], "the body must be a JSON object", id="array"),
    pytest.param("work", "the body must be a JSON object", id="string"),
    pytest.param({}, "`agent` must be a non-empty string", id="no-agent"),
    pytest.param({"agent": ""}, "`agent` must be a non-empty string", id="empty-agent"),
    pytest.param({"agent": 7}, "`agent` must be a non-empty string", id="number-agent"),
    pytest.param({"agent": "nosuch"}, "no agent 'nosuch' on this server (it has: work, other)", id="unknown-agent"),
    pytest.param({"agent": "work", "scopes": "a2a"}, "`scopes` must be a list of non-empty strings", id="scopes-str"),
    pytest.param({"agent": "work", "scopes": [""]}, "`scopes` must be a list of non-empty strings", id="scopes-empty"),
    pytest.param({"agent": "work", "scopes": ["a2a", 3]}, "`scopes` must be a list of non-empty strings",
                 id="scopes-number"),
    pytest.param({"agent": "work", "expiresInSeconds": 0}, "`expiresInSeconds` must be a positive integer",
                 id="ttl-zero"),
    pytest.param({"agent": "work", "expiresInSeconds": -60}, "`expiresInSeconds` must be a positive integer",
                 id="ttl-negative"),
    pytest.param({"agent": "work", "expiresInSeconds": 1.5}, "`expiresInSeconds` must be a positive integer",
                 id="ttl-float"),
    pytest.param({"agent": "work", "expiresInSeconds": "3600"}, "`expiresInSeconds` must be a positive integer",
                 id="ttl-string"),
    pytest.param({"agent": "work", "expiresInSeconds": True}, "`expiresInSeconds` must be a positive integer",
                 id="ttl-bool"),
    pytest.param({"agent": "work", "name": 5}, "`name` must be a non-empty string", id="name-number"),
    pytest.param({"agent": "work", "principal": "  "}, "`principal` must be a non-empty string", id="principal-blank"),
]


@pytest.mark.parametrize("body,expected", BAD_BODIES)
def test_a_bad_body_is_400_with_a_precise_message(srv: Srv, body: Any, expected: str):
    """Section 3.3.2 (validation errors: say which parameter failed and why): each bad body of POST /admin/keys
    is 400 with a message naming the field and the rule (an unknown agent: its name and the hosted agents), and
    no key is made."""
    msg = api_error(admin_post(srv, body), 400)
    assert expected in msg, msg
    assert listed(srv) == {}


def test_a_body_that_is_not_json_is_400(srv: Srv):
    """Section 3.3.2: a body declared JSON that does not parse is 400 (a parse error with its position), never a
    500, and no key is made."""
    resp = httpx.post(f"{srv.url}/admin/keys", content=b'{"agent": "work",', timeout=WAIT,
                      headers={**hdr(srv.admin_token), "Content-Type": "application/json"})
    msg = api_error(resp, 400)
    assert re.search(r"parse", msg, re.IGNORECASE), msg
    assert listed(srv) == {}
