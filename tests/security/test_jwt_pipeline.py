"""JWT bearer tokens through the whole server path: a live Parley on 127.0.0.1, a real identity provider.

tests/security/test_jwt.py checks `JwtVerifier` on its own (injected clock, every branch). Here the
same checks are made the way a client meets them: a token in `Authorization: Bearer` of a real
HTTP request (JSON-RPC and HTTP+JSON) or in the gRPC metadata, a Parley server configured by
`Settings.auth.jwt` the way `[server.auth.jwt]` configures it, keys served by
`jwks_server.JwksServer` (RS256, ES256 and EdDSA keys made by the suite with `cryptography`).

Three issuers:

* HS256 with the secret in an environment variable (`secret_env`),
* a JWKS URL (`jwks_url`) with an RSA, an EC P-256 and an Ed25519 key,
* an OpenID Connect discovery document (`oidc_discovery_url`) naming the JWKS and the issuer.

The clock is the real one: tokens are made relative to now, with margins far larger than any test
run (expired an hour ago, not valid for another hour, ...). Nothing sleeps: key rotation and the
refresh-rate bound use `jwks_min_refresh_seconds` of 0 (every unknown kid may refetch) or of an hour
(no refetch can be due) and count the JWKS server's requests.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from parley.app import Parley, Settings
from parley.protocol import models as m
from parley.settings import AuthSettings, JwtSettings, LimitSettings
from support import LiveServer, free_port, needs

from .jwks_server import AUDIENCE, ISSUER, JwksServer, Signer, claims, handmade

try:
    import grpc
    from google.protobuf.json_format import MessageToDict

    from parley.grpc import a2a_pb2, a2a_pb2_grpc

    HAVE_GRPC = True
except ImportError:  # pragma: no cover - the gRPC extra is part of the dev install
    HAVE_GRPC = False

AGENT = "who"
SECRET_ENV = "PARLEY_TEST_JWT_PIPELINE_SECRET"
SECRET = "pipeline-shared-secret-of-at-least-32-bytes"
LEEWAY = 10.0
TIMEOUT = 20.0
HOUR = 3600

needs_grpc = needs("grpc", "grpc")
BINDINGS = ["jsonrpc", "rest", pytest.param("grpc", marks=needs_grpc)]


# --- servers ------------------------------------------------------------------------------------


VAULT_SCOPE = "vault:read"
SKILLS = [
    m.AgentSkill(id="plain", name="plain", description="anyone", tags=["test"]),
    m.AgentSkill(id="vault", name="vault", description="needs the vault scope", tags=["test"],
                 security_requirements=[{"schemes": {"bearer": {"list": [VAULT_SCOPE]}}}]),
]


def who_app(jwt: JwtSettings) -> Parley:
    """A Parley app whose one agent answers '<owner>: <text>' (the owner is the authenticated principal);
    its skill "vault" requires the scope VAULT_SCOPE."""
    # limits: bad tokens are sent on purpose, many times; their throttling is test_dashboard_logins's subject
    app = Parley(settings=Settings(db="memory", auth=AuthSettings(jwt=jwt), limits=LimitSettings(auth_failures=None)))

    @app.agent(id=AGENT, description="Says who asked", skills=SKILLS)
    async def who(ctx):
        yield f"{ctx.owner}: {ctx.text}"

    @app.agent(id="recall", description="Repeats what was said earlier in the context")
    async def recall(ctx):
        yield " / ".join(msg.text() for msg in ctx.context_history if msg.role is m.Role.USER)

    return app


@dataclass
class Srv:
    live: LiveServer
    grpc_target: str | None

    @property
    def agent_url(self) -> str:
        return f"{self.live.url}/a2a/{AGENT}"


def start(jwt: JwtSettings, *, with_grpc: bool = False) -> Srv:
    app = who_app(jwt)
    target = None
    if with_grpc and HAVE_GRPC:
        app.settings.grpc_port = free_port()
        target = f"127.0.0.1:{app.settings.grpc_port}"
    return Srv(LiveServer(app).start(), target)


def jwks_settings(idp: JwksServer, **overrides: Any) -> JwtSettings:
    fields: dict[str, Any] = {"jwks_url": idp.jwks_url, "issuer": ISSUER, "audience": [AUDIENCE],
                              "leeway_seconds": LEEWAY, "jwks_min_refresh_seconds": HOUR}
    fields.update(overrides)
    return JwtSettings(**fields)


@pytest.fixture(scope="module")
def keys() -> dict[str, Signer]:
    """The provider's signing keys, one per public-key algorithm."""
    return {"rs256": Signer.rsa("rsa-1"), "es256": Signer.ec("ec-1"), "eddsa": Signer.ed("ed-1")}


@pytest.fixture(scope="module")
def idp(keys: dict[str, Signer]) -> Iterator[JwksServer]:
    with JwksServer() as server:
        server.publish(*keys.values())
        yield server


@pytest.fixture(scope="module")
def jwks_srv(idp: JwksServer) -> Iterator[Srv]:
    """Keys from a JWKS URL; also serves gRPC. No refetch can be due during the module (an hour)."""
    srv = start(jwks_settings(idp), with_grpc=True)
    yield srv
    srv.live.stop()


@pytest.fixture(scope="module")
def oidc_srv(idp: JwksServer) -> Iterator[Srv]:
    """Keys and issuer from an OpenID Connect discovery document (no issuer configured)."""
    srv = start(JwtSettings(oidc_discovery_url=idp.discovery_url, audience=[AUDIENCE], leeway_seconds=LEEWAY))
    yield srv
    srv.live.stop()


@pytest.fixture(scope="module")
def hs_srv() -> Iterator[Srv]:
    """HS256 with the secret in the environment variable `secret_env` names (read when the server is built)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(SECRET_ENV, SECRET)
        srv = start(JwtSettings(secret_env=SECRET_ENV, issuer=ISSUER, audience=[AUDIENCE], leeway_seconds=LEEWAY))
        yield srv
        srv.live.stop()


def hs_token(payload: dict[str, Any], secret: str = SECRET) -> str:
    import jwt

    return jwt.encode(payload, secret, algorithm="HS256")


# --- one request over one binding --------------------------------------------------------------


@dataclass
class Reply:
    """What a server answered, whatever the binding."""

    binding: str
    status: int | str  # the HTTP status, or the gRPC status code's name
    challenge: str | None  # WWW-Authenticate (gRPC: trailing metadata)
    result: Any  # the result JSON (gRPC: MessageToDict of the response)
    error: Any  # the JSON-RPC / REST error object, or the gRPC details
    raw: str = ""

    @property
    def kind(self) -> str:
        """ok / unauthenticated / permission_denied / task_not_found / other (A2A §5.4 mapping per binding)."""
        if self.binding == "grpc":
            return {"OK": "ok", "UNAUTHENTICATED": "unauthenticated", "NOT_FOUND": "task_not_found",
                    "PERMISSION_DENIED": "permission_denied"}.get(str(self.status), "other")
        if self.status == 401:
            return "unauthenticated"
        if self.status == 403:
            return "permission_denied"
        if self.binding == "jsonrpc":
            if self.status == 200 and self.error is None:
                return "ok"
            return "task_not_found" if isinstance(self.error, dict) and self.error.get("code") == -32001 else "other"
        if self.status == 200:
            return "ok"
        return "task_not_found" if self.status == 404 else "other"

    @property
    def task(self) -> dict[str, Any]:
        assert self.kind == "ok", f"expected a result, got {self}"
        return self.result.get("task", self.result)

    def __str__(self) -> str:
        return f"{self.binding}: {self.status} challenge={self.challenge!r} error={self.error!r} {self.raw[:300]}"


def _auth(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token is not None else {}


def _message(text: str, skill: str | None = None, *, task_id: str | None = None,
             context_id: str | None = None) -> dict[str, Any]:
    msg: dict[str, Any] = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": text}]}
    if skill is not None:
        msg["metadata"] = {"parley.skill": skill}
    if task_id is not None:
        msg["taskId"] = task_id
    if context_id is not None:
        msg["contextId"] = context_id
    return msg


def _http_reply(binding: str, resp: httpx.Response) -> Reply:
    try:
        body = resp.json()
    except ValueError:
        body = None
    if binding == "jsonrpc":
        result = body.get("result") if isinstance(body, dict) else None
        error = body.get("error") if isinstance(body, dict) else None
    else:
        result = body if resp.status_code == 200 else None
        error = body.get("error") if isinstance(body, dict) and resp.status_code != 200 else None
    return Reply(binding, resp.status_code, resp.headers.get("www-authenticate"), result, error, resp.text)


def _jsonrpc(srv: Srv, method: str, params: dict[str, Any], token: str | None) -> Reply:
    body = {"jsonrpc": "2.0", "id": str(uuid.uuid4()), "method": method, "params": params}
    resp = httpx.post(srv.agent_url, json=body, headers={"A2A-Version": "1.0", **_auth(token)}, timeout=TIMEOUT)
    return _http_reply("jsonrpc", resp)


def _rest(srv: Srv, method: str, path: str, token: str | None, body: Any = None) -> Reply:
    resp = httpx.request(method, srv.agent_url + path, json=body, headers={"A2A-Version": "1.0", **_auth(token)},
                         timeout=TIMEOUT)
    return _http_reply("rest", resp)


def _grpc(srv: Srv, rpc: str, request: Any, token: str | None) -> Reply:
    assert srv.grpc_target is not None, "this server does not serve gRPC"
    metadata = [("a2a-version", "1.0")] + ([("authorization", f"Bearer {token}")] if token is not None else [])
    with grpc.insecure_channel(srv.grpc_target) as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)
        try:
            response = getattr(stub, rpc)(request, metadata=metadata, timeout=TIMEOUT)
        except grpc.RpcError as exc:
            trailers = {k: v for k, v in (exc.trailing_metadata() or ()) if not k.endswith("-bin")}
            return Reply("grpc", exc.code().name, trailers.get("www-authenticate"), None, exc.details(),
                         f"{exc.code().name}: {exc.details()}")
    return Reply("grpc", "OK", None, MessageToDict(response), None, str(response)[:300])


def send(binding: str, srv: Srv, token: str | None, text: str = "hello", *, skill: str | None = None,
         task_id: str | None = None) -> Reply:
    """SendMessage (blocking) over `binding`; `skill` selects a skill (message metadata "parley.skill")."""
    if binding == "jsonrpc":
        return _jsonrpc(srv, "SendMessage", {"message": _message(text, skill, task_id=task_id)}, token)
    if binding == "rest":
        return _rest(srv, "POST", "/message:send", token, {"message": _message(text, skill, task_id=task_id)})
    msg = a2a_pb2.Message(message_id=str(uuid.uuid4()), role=a2a_pb2.ROLE_USER, parts=[a2a_pb2.Part(text=text)],
                          task_id=task_id or "")
    if skill is not None:
        msg.metadata.update({"parley.skill": skill})
    return _grpc(srv, "SendMessage", a2a_pb2.SendMessageRequest(tenant=AGENT, message=msg), token)


def get_task(binding: str, srv: Srv, token: str | None, task_id: str) -> Reply:
    if binding == "jsonrpc":
        return _jsonrpc(srv, "GetTask", {"id": task_id}, token)
    if binding == "rest":
        return _rest(srv, "GET", f"/tasks/{task_id}", token)
    return _grpc(srv, "GetTask", a2a_pb2.GetTaskRequest(tenant=AGENT, id=task_id), token)


def cancel_task(binding: str, srv: Srv, token: str | None, task_id: str) -> Reply:
    if binding == "jsonrpc":
        return _jsonrpc(srv, "CancelTask", {"id": task_id}, token)
    if binding == "rest":
        return _rest(srv, "POST", f"/tasks/{task_id}:cancel", token)
    return _grpc(srv, "CancelTask", a2a_pb2.CancelTaskRequest(tenant=AGENT, id=task_id), token)


def list_task_ids(binding: str, srv: Srv, token: str | None) -> set[str]:
    if binding == "jsonrpc":
        reply = _jsonrpc(srv, "ListTasks", {}, token)
    elif binding == "rest":
        reply = _rest(srv, "GET", "/tasks", token)
    else:
        reply = _grpc(srv, "ListTasks", a2a_pb2.ListTasksRequest(tenant=AGENT), token)
    assert reply.kind == "ok", str(reply)
    return {t["id"] for t in reply.result.get("tasks", [])}


def task_text(task: dict[str, Any]) -> str:
    return "".join(p.get("text", "") for a in task.get("artifacts", []) for p in a.get("parts", []))


def task_state(task: dict[str, Any]) -> str:
    return task["status"]["state"]


def assert_invalid_token(reply: Reply, token: str | None = None) -> None:
    """401 / UNAUTHENTICATED with an RFC 6750 challenge saying invalid_token, never echoing the token."""
    assert reply.kind == "unauthenticated", str(reply)
    assert reply.challenge is not None, f"no WWW-Authenticate challenge: {reply}"
    assert reply.challenge.startswith("Bearer") or ", Bearer" in reply.challenge, reply.challenge
    assert 'error="invalid_token"' in reply.challenge, reply.challenge
    if token is not None:
        assert token not in reply.raw and token not in reply.challenge, "the token was echoed back"
        signature = token.rsplit(".", 1)[-1]
        if len(signature) > 8:
            assert signature not in reply.raw


def sub() -> str:
    return f"user-{uuid.uuid4().hex[:10]}"


# --- the card -------------------------------------------------------------------------------------


@pytest.mark.parametrize("source", ["hs256", "jwks", "oidc"])
def test_card_declares_the_bearer_scheme_it_enforces(source: str, request: pytest.FixtureRequest,
                                                    idp: JwksServer) -> None:
    """A2A §4.5 (SecurityScheme: HTTPAuthSecurityScheme / OpenIdConnectSecurityScheme) and §7.3 step 1: the card's
    `securitySchemes` declares the bearer scheme the server enforces, and `securityRequirements` lists it; the
    0.3 card (no A2A-Version) declares the same in 0.3 form (`security`, `type: http|openIdConnect`)."""
    srv: Srv = request.getfixturevalue({"hs256": "hs_srv", "jwks": "jwks_srv", "oidc": "oidc_srv"}[source])
    card_url = f"{srv.agent_url}/.well-known/agent-card.json"
    v1 = httpx.get(card_url, headers={"A2A-Version": "1.0"}, timeout=TIMEOUT).json()
    v03 = httpx.get(card_url, timeout=TIMEOUT).json()

    schemes = v1.get("securitySchemes") or {}
    requirements = v1.get("securityRequirements") or []
    if source == "oidc":
        expected_v1 = {"openIdConnectSecurityScheme": {"openIdConnectUrl": idp.discovery_url}}
        expected_v03 = {"type": "openIdConnect", "openIdConnectUrl": idp.discovery_url}
    else:
        expected_v1 = {"httpAuthSecurityScheme": {"scheme": "Bearer", "bearerFormat": "JWT"}}
        expected_v03 = {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"}
    bearer = [name for name, scheme in schemes.items() if {k: v for k, v in scheme.items()} == expected_v1]
    assert len(bearer) == 1, f"no {expected_v1} among securitySchemes {schemes}"
    name = bearer[0]
    assert {"schemes": {name: {"list": []}}} in requirements, requirements
    for req in requirements:  # every requirement names declared schemes only
        assert set(req["schemes"]) <= set(schemes), (req, schemes)

    schemes03 = v03.get("securitySchemes") or {}
    assert {k: v for k, v in schemes03.get(name, {}).items() if k != "description"} == expected_v03, schemes03
    assert {name: []} in (v03.get("security") or []), v03.get("security")


# --- a valid token: the task is its subject's ------------------------------------------------------

VALID_CASES = [
    pytest.param("hs_srv", "hs256", "jsonrpc", id="hs256-jsonrpc"),
    pytest.param("hs_srv", "hs256", "rest", id="hs256-rest"),
    pytest.param("jwks_srv", "rs256", "jsonrpc", id="rs256-jsonrpc"),
    pytest.param("jwks_srv", "rs256", "rest", id="rs256-rest"),
    pytest.param("jwks_srv", "rs256", "grpc", id="rs256-grpc", marks=needs_grpc),
    pytest.param("jwks_srv", "es256", "jsonrpc", id="es256-jsonrpc"),
    pytest.param("jwks_srv", "es256", "rest", id="es256-rest"),
    pytest.param("jwks_srv", "es256", "grpc", id="es256-grpc", marks=needs_grpc),
    pytest.param("jwks_srv", "eddsa", "jsonrpc", id="eddsa-jsonrpc"),
    pytest.param("jwks_srv", "eddsa", "rest", id="eddsa-rest"),
    pytest.param("jwks_srv", "eddsa", "grpc", id="eddsa-grpc", marks=needs_grpc),
    pytest.param("oidc_srv", "es256", "jsonrpc", id="oidc-es256-jsonrpc"),
    pytest.param("oidc_srv", "rs256", "rest", id="oidc-rs256-rest"),
]


@pytest.mark.parametrize(("server", "alg", "binding"), VALID_CASES)
def test_a_valid_token_sends_and_the_task_belongs_to_its_sub(server: str, alg: str, binding: str,
                                                             request: pytest.FixtureRequest,
                                                             keys: dict[str, Signer]) -> None:
    """A2A §7.4 (authenticate every request from its credentials), §7.5 and §13.1 (results scoped to the caller):
    a valid bearer token sends a message as its `sub`; the task is that principal's: it reads and lists it;
    another valid subject gets TaskNotFound (§5.4: -32001 / 404 / NOT_FOUND) for GetTask, CancelTask and a
    message to the task, and sees nothing in its list; the same request without a token is refused with 401."""
    srv: Srv = request.getfixturevalue(server)

    def token(subject: str) -> str:
        return hs_token(claims(subject)) if alg == "hs256" else keys[alg].sign(claims(subject))

    alice, mallory = sub(), sub()
    sent = send(binding, srv, token(alice), "who am i")
    assert sent.kind == "ok", str(sent)
    task = sent.task
    assert task_state(task) == "TASK_STATE_COMPLETED", task
    assert task_text(task) == f"{alice}: who am i"  # the agent ran as the token's sub

    mine = get_task(binding, srv, token(alice), task["id"])
    assert mine.kind == "ok", str(mine)
    assert mine.task["id"] == task["id"] and task_text(mine.task) == f"{alice}: who am i"
    assert task["id"] in list_task_ids(binding, srv, token(alice))

    theirs = get_task(binding, srv, token(mallory), task["id"])
    assert theirs.kind == "task_not_found", str(theirs)
    assert task["id"] not in list_task_ids(binding, srv, token(mallory))
    cancel = cancel_task(binding, srv, token(mallory), task["id"])
    assert cancel.kind == "task_not_found", str(cancel)
    follow_up = send(binding, srv, token(mallory), "let me in", task_id=task["id"])
    assert follow_up.kind == "task_not_found", str(follow_up)
    assert len(get_task(binding, srv, token(alice), task["id"]).task.get("history", [])) == \
        len(mine.task.get("history", [])), "another subject's message reached the task"

    anonymous = get_task(binding, srv, None, task["id"])
    assert anonymous.kind == "unauthenticated", str(anonymous)
    assert anonymous.challenge and "Bearer" in anonymous.challenge, str(anonymous)


def test_a_context_id_does_not_carry_another_subs_conversation(jwks_srv: Srv, keys: dict[str, Signer]) -> None:
    """A2A §13.1 (scope every result to the caller, even when contextId is given) and §3.4.1: a subject that
    sends into another subject's contextId does not get the earlier conversation of that context (the agent's
    context history is per principal), while the owner does."""
    signer = keys["rs256"]
    alice, mallory = signer.sign(claims(sub())), signer.sign(claims(sub()))

    def say(token: str, text: str, context_id: str | None) -> Reply:
        body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
                "params": {"message": _message(text, context_id=context_id)}}
        resp = httpx.post(f"{jwks_srv.live.url}/a2a/recall", json=body, timeout=TIMEOUT,
                          headers={"A2A-Version": "1.0", **_auth(token)})
        return _http_reply("jsonrpc", resp)

    first = say(alice, "my pin is 4711", None)
    assert first.kind == "ok", str(first)
    context_id = first.task["contextId"]
    owner = say(alice, "and again", context_id)
    assert owner.kind == "ok" and "my pin is 4711" in task_text(owner.task), str(owner)
    intruder = say(mallory, "what was said?", context_id)
    assert intruder.kind in ("ok", "task_not_found", "permission_denied"), str(intruder)
    assert "4711" not in intruder.raw, f"another subject read the context: {intruder}"


def test_clock_skew_within_the_leeway_is_accepted(jwks_srv: Srv, keys: dict[str, Signer]) -> None:
    """A2A §7.4: the server validates the token's time claims with the configured clock-skew leeway
    (`leeway_seconds`): a token that expired a moment ago, or becomes valid in a moment, still passes."""
    now = time.time()
    rsa_key = keys["rs256"]
    just_expired = rsa_key.sign(claims(sub(), exp=int(now - LEEWAY / 2), iat=int(now - 600)))
    almost_valid = rsa_key.sign(claims(sub(), nbf=int(now + LEEWAY / 2)))
    for token in (just_expired, almost_valid):
        reply = send("jsonrpc", jwks_srv, token)
        assert reply.kind == "ok", str(reply)


# --- tokens that must be refused ----------------------------------------------------------------


def bad_token(case: str, keys: dict[str, Signer]) -> str:
    now = time.time()
    rsa_key = keys["rs256"]
    if case == "alg_none":
        return handmade({"alg": "none", "typ": "JWT", "kid": rsa_key.kid}, claims(sub()))
    if case == "alg_none_capitalised":
        return handmade({"alg": "None", "typ": "JWT", "kid": rsa_key.kid}, claims(sub()))
    if case == "wrong_signature":  # same kid and alg, signed by a key the provider never published
        return Signer.rsa(rsa_key.kid).sign(claims(sub()))
    if case == "tampered_payload":  # a valid token whose payload was changed afterwards
        header, _, signature = rsa_key.sign(claims("alice")).split(".")
        forged = handmade({"alg": "RS256"}, claims("admin")).split(".")[1]
        return f"{header}.{forged}.{signature}"
    if case == "wrong_issuer":
        return rsa_key.sign(claims(sub(), iss="https://evil.example"))
    if case == "wrong_audience":
        return rsa_key.sign(claims(sub(), aud="https://another-service.example"))
    if case == "expired":
        return rsa_key.sign(claims(sub(), iat=int(now - 2 * HOUR), exp=int(now - HOUR)))
    if case == "no_exp":
        return rsa_key.sign(claims(sub(), exp=None))
    if case == "nbf_in_the_future":
        return rsa_key.sign(claims(sub(), nbf=int(now + HOUR), exp=int(now + 2 * HOUR)))
    if case == "hs256_keyed_with_the_rsa_public_key":  # algorithm confusion
        return handmade({"alg": "HS256", "typ": "JWT", "kid": rsa_key.kid}, claims(sub()), rsa_key.public_pem())
    if case == "hs256_keyed_with_the_jwk_n":  # algorithm confusion with the JWK's modulus as the secret
        return handmade({"alg": "HS256", "typ": "JWT", "kid": rsa_key.kid}, claims(sub()),
                        rsa_key.jwk()["n"].encode())
    if case == "es256_token_naming_the_rsa_kid":  # alg of the token differs from its key's
        return Signer.ec(rsa_key.kid).sign(claims(sub()))
    if case == "unknown_kid":
        return Signer.rsa("never-published").sign(claims(sub()))
    if case == "not_a_jwt":
        return "this-is-not-a-jwt"
    raise AssertionError(case)


REJECTED = ["alg_none", "alg_none_capitalised", "wrong_signature", "tampered_payload", "wrong_issuer",
            "wrong_audience", "expired", "no_exp", "nbf_in_the_future", "hs256_keyed_with_the_rsa_public_key",
            "hs256_keyed_with_the_jwk_n", "es256_token_naming_the_rsa_kid", "unknown_kid", "not_a_jwt"]


@pytest.mark.parametrize("binding", BINDINGS)
@pytest.mark.parametrize("case", REJECTED)
def test_a_bad_token_is_refused_with_401_invalid_token(case: str, binding: str, jwks_srv: Srv,
                                                        keys: dict[str, Signer]) -> None:
    """A2A §7.4 (MUST authenticate every request; SHOULD use the binding's error code and give challenge
    information): a token with no or a wrong signature, the wrong issuer or audience, outside its validity
    (beyond the leeway), an algorithm other than its key's (HS256 keyed with the public key), or a key the
    JWKS does not have is refused: HTTP 401 / gRPC UNAUTHENTICATED with `WWW-Authenticate: Bearer ...
    error="invalid_token"` (RFC 6750), without echoing the token."""
    token = bad_token(case, keys)
    reply = send(binding, jwks_srv, token, text=f"must not run {case}")
    assert_invalid_token(reply, token)


@pytest.mark.parametrize("interface", ["jsonrpc-0.3", "rest-0.3"])
@pytest.mark.parametrize("case", ["alg_none", "wrong_signature", "expired", "hs256_keyed_with_the_rsa_public_key",
                                  "unknown_kid"])
def test_the_03_interface_refuses_bad_tokens_the_same_way(case: str, interface: str, jwks_srv: Srv,
                                                           keys: dict[str, Signer]) -> None:
    """A2A §7.4 on the 0.3 interface Parley also serves (JSON-RPC `message/send` without A2A-Version, HTTP+JSON
    `/v1/message:send`): the same tokens are refused with 401 and the invalid_token challenge; a valid one
    passes (so the check is not a blanket refusal of the 0.3 interface)."""

    def post(token: str) -> Reply:
        if interface == "jsonrpc-0.3":
            message = {"messageId": str(uuid.uuid4()), "role": "user", "kind": "message",
                       "parts": [{"kind": "text", "text": "hi"}]}
            resp = httpx.post(jwks_srv.agent_url, json={"jsonrpc": "2.0", "id": 1, "method": "message/send",
                                                        "params": {"message": message}},
                              headers=_auth(token), timeout=TIMEOUT)
            return _http_reply("jsonrpc", resp)
        message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "content": [{"text": "hi"}]}
        resp = httpx.post(jwks_srv.agent_url + "/v1/message:send", json={"message": message}, headers=_auth(token),
                          timeout=TIMEOUT)
        return _http_reply("rest", resp)

    token = bad_token(case, keys)
    assert_invalid_token(post(token), token)
    good = post(keys["rs256"].sign(claims(sub())))
    assert good.kind == "ok", str(good)


def test_trace_endpoint_refuses_like_the_a2a_endpoints(jwks_srv: Srv, keys: dict[str, Signer]) -> None:
    """A2A §7.4 (SHOULD give authentication challenge information with the rejection; RFC 7235 §3.1: a 401 MUST
    carry WWW-Authenticate) and §13.1, for Parley's task trace endpoint, which the same credentials guard: the
    owner reads the trace, another sub gets 404, and a missing or bad token gets 401 with a Bearer challenge."""
    signer = keys["rs256"]
    alice = signer.sign(claims(sub()))
    task = send("jsonrpc", jwks_srv, alice, "traced").task
    url = f"{jwks_srv.agent_url}/tasks/{task['id']}/trace"
    mine = httpx.get(url, headers=_auth(alice), timeout=TIMEOUT)
    assert mine.status_code == 200 and mine.json()["taskId"] == task["id"], mine.text[:300]
    theirs = httpx.get(url, headers=_auth(signer.sign(claims(sub()))), timeout=TIMEOUT)
    assert theirs.status_code == 404, theirs.text[:300]
    forged = bad_token("wrong_audience", keys)
    for token in (None, forged):
        resp = httpx.get(url, headers=_auth(token), timeout=TIMEOUT)
        assert resp.status_code == 401, resp.text[:300]
        challenge = resp.headers.get("www-authenticate")
        assert challenge is not None and "Bearer" in challenge, \
            f"401 from the trace endpoint without a WWW-Authenticate challenge (token={'bad' if token else 'none'})"
        if token is not None:
            assert 'error="invalid_token"' in challenge, challenge


@pytest.mark.parametrize("binding", ["jsonrpc", "rest"])
@pytest.mark.parametrize("case", ["wrong_secret", "rs256_token", "alg_none", "wrong_issuer"])
def test_hs256_server_refuses_other_keys_and_algorithms(case: str, binding: str, hs_srv: Srv,
                                                       keys: dict[str, Signer]) -> None:
    """A2A §7.4: with an HS256 shared secret (`secret_env`), only tokens MACed with that secret, for the
    configured issuer, pass; another secret, a public-key algorithm or `none` gets 401 invalid_token."""
    token = {
        "wrong_secret": lambda: hs_token(claims(sub()), secret="another-secret-of-at-least-32-bytes!!"),
        "rs256_token": lambda: keys["rs256"].sign(claims(sub())),
        "alg_none": lambda: handmade({"alg": "none", "typ": "JWT"}, claims(sub())),
        "wrong_issuer": lambda: hs_token(claims(sub(), iss="https://evil.example")),
    }[case]()
    assert_invalid_token(send(binding, hs_srv, token), token)


@pytest.mark.parametrize("binding", ["jsonrpc", "rest"])
def test_oidc_server_takes_the_issuer_from_discovery(binding: str, oidc_srv: Srv, keys: dict[str, Signer]) -> None:
    """A2A §4.5.5 (OpenIdConnectSecurityScheme) and §7.4: with only a discovery URL configured, the issuer is the
    provider's `issuer`: its tokens pass, a token from any other issuer is refused with 401 invalid_token."""
    good = send(binding, oidc_srv, keys["eddsa"].sign(claims("oidc-user")))
    assert good.kind == "ok", str(good)
    assert task_text(good.task) == "oidc-user: hello"
    token = keys["eddsa"].sign(claims(sub(), iss="https://evil.example"))
    assert_invalid_token(send(binding, oidc_srv, token), token)


def test_streaming_requests_are_refused_before_any_stream(jwks_srv: Srv, keys: dict[str, Signer]) -> None:
    """A2A §7.4 and §3.1.2: SendStreamingMessage with an expired token is a 401 with its challenge (JSON-RPC and
    HTTP+JSON), not an event stream that fails later."""
    now = time.time()
    token = keys["rs256"].sign(claims(sub(), iat=int(now - 2 * HOUR), exp=int(now - HOUR)))
    headers = {"A2A-Version": "1.0", "Accept": "text/event-stream", **_auth(token)}
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage", "params": {"message": _message("x")}}
    for url, payload in ((jwks_srv.agent_url, body), (jwks_srv.agent_url + "/message:stream", {"message": _message("x")})):
        with httpx.stream("POST", url, json=payload, headers=headers, timeout=TIMEOUT) as resp:
            resp.read()
            assert resp.status_code == 401, (url, resp.status_code, resp.text[:300])
            assert not resp.headers.get("content-type", "").startswith("text/event-stream")
            assert 'error="invalid_token"' in (resp.headers.get("www-authenticate") or ""), resp.headers


def test_extended_card_needs_a_valid_token(jwks_srv: Srv, keys: dict[str, Signer]) -> None:
    """A2A §6.9 and §3.1.11 (GetExtendedAgentCard with `Authorization: Bearer`): the public card says
    `extendedAgentCard: true`; with a valid token the extended card is returned over JSON-RPC and HTTP+JSON;
    without a token, or with a bad one, the server answers 401."""
    public = httpx.get(f"{jwks_srv.agent_url}/.well-known/agent-card.json", headers={"A2A-Version": "1.0"},
                       timeout=TIMEOUT).json()
    assert public["capabilities"].get("extendedAgentCard") is True, public["capabilities"]
    token = keys["es256"].sign(claims(sub()))
    rpc = _jsonrpc(jwks_srv, "GetExtendedAgentCard", {}, token)
    assert rpc.kind == "ok", str(rpc)
    assert rpc.result["name"] == public["name"]
    rest = _rest(jwks_srv, "GET", "/extendedAgentCard", token)
    assert rest.kind == "ok", str(rest)
    assert rest.result["name"] == public["name"]
    assert _jsonrpc(jwks_srv, "GetExtendedAgentCard", {}, None).kind == "unauthenticated"
    assert _rest(jwks_srv, "GET", "/extendedAgentCard", None).kind == "unauthenticated"
    forged = bad_token("wrong_signature", keys)
    assert_invalid_token(_rest(jwks_srv, "GET", "/extendedAgentCard", forged), forged)


@pytest.mark.parametrize("binding", BINDINGS)
def test_token_scopes_decide_which_skills_a_caller_may_use(binding: str, jwks_srv: Srv,
                                                            keys: dict[str, Signer]) -> None:
    """A2A §7.5 (authorization MAY consider the skill requested and OAuth scopes): the token's scopes (`scope`,
    space-separated, or `scp`, a list) are the principal's: a skill whose requirement names VAULT_SCOPE runs for
    a token holding it and is refused with 403 / PERMISSION_DENIED for a valid token without it."""
    signer = keys["es256"]
    allowed = send(binding, jwks_srv, signer.sign(claims(sub(), scope=f"a2a {VAULT_SCOPE}")), "open", skill="vault")
    assert allowed.kind == "ok", str(allowed)
    as_list = send(binding, jwks_srv, signer.sign(claims(sub(), scope=None, scp=[VAULT_SCOPE])), "open", skill="vault")
    assert as_list.kind == "ok", str(as_list)
    denied = send(binding, jwks_srv, signer.sign(claims(sub(), scope="a2a")), "open", skill="vault")
    assert denied.kind == "permission_denied", str(denied)
    plain = send(binding, jwks_srv, signer.sign(claims(sub(), scope="a2a")), "open", skill="plain")
    assert plain.kind == "ok", str(plain)


def test_extended_card_lists_the_skills_the_token_may_use(jwks_srv: Srv, keys: dict[str, Signer]) -> None:
    """A2A §13.3 (the extended card MAY differ with the caller's authorization level; MUST check permissions
    before returning privileged information) and §6.9: with a token holding VAULT_SCOPE the extended card lists
    the vault skill; with a token without it, it does not."""
    signer = keys["rs256"]
    with_scope = _rest(jwks_srv, "GET", "/extendedAgentCard", signer.sign(claims(sub(), scope=f"a2a {VAULT_SCOPE}")))
    without = _rest(jwks_srv, "GET", "/extendedAgentCard", signer.sign(claims(sub(), scope="a2a")))
    assert with_scope.kind == "ok" and without.kind == "ok", (str(with_scope), str(without))
    assert [s["id"] for s in with_scope.result["skills"]] == ["plain", "vault"]
    assert [s["id"] for s in without.result["skills"]] == ["plain"]


@pytest.mark.parametrize("scheme", ["bearer", "BEARER", "Bearer"])
def test_the_auth_scheme_name_is_case_insensitive(scheme: str, jwks_srv: Srv, keys: dict[str, Signer]) -> None:
    """A2A §7.3 step 3 (credentials in the protocol's standard headers): `Authorization: <scheme> <token>` with
    the scheme name in any case is a bearer token (RFC 7235 §2.1: auth-scheme is case-insensitive)."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": _message("case")}}
    token = keys["eddsa"].sign(claims("case-user"))
    resp = httpx.post(jwks_srv.agent_url, json=body, timeout=TIMEOUT,
                      headers={"A2A-Version": "1.0", "Authorization": f"{scheme} {token}"})
    reply = _http_reply("jsonrpc", resp)
    assert reply.kind == "ok", str(reply)
    assert task_text(reply.task) == "case-user: case"


def _sse_events(resp: httpx.Response) -> list[dict[str, Any]]:
    events = []
    for line in resp.iter_lines():
        if line.startswith("data:"):
            events.append(json.loads(line[5:].strip()))
    return events


def test_a_valid_token_streams_as_its_sub(jwks_srv: Srv, keys: dict[str, Signer]) -> None:
    """A2A §3.1.2 and §7.4 (every request authenticated, streaming ones included): SendStreamingMessage with a
    valid token streams the task to its end over JSON-RPC and HTTP+JSON, the agent running as the token's sub."""
    for url, wrap in ((jwks_srv.agent_url, True), (jwks_srv.agent_url + "/message:stream", False)):
        subject = sub()
        token = keys["rs256"].sign(claims(subject))
        payload: dict[str, Any] = {"message": _message("streamed")}
        if wrap:
            payload = {"jsonrpc": "2.0", "id": 7, "method": "SendStreamingMessage", "params": payload}
        headers = {"A2A-Version": "1.0", "Accept": "text/event-stream", **_auth(token)}
        with httpx.stream("POST", url, json=payload, headers=headers, timeout=TIMEOUT) as resp:
            assert resp.status_code == 200, resp.read()
            assert resp.headers["content-type"].startswith("text/event-stream")
            events = [ev["result"] if wrap else ev for ev in _sse_events(resp)]
        texts = "".join(p.get("text", "") for ev in events if "artifactUpdate" in ev
                        for p in ev["artifactUpdate"]["artifact"].get("parts", []))
        assert texts == f"{subject}: streamed", events
        assert events[-1].get("statusUpdate", {}).get("status", {}).get("state") == "TASK_STATE_COMPLETED", events


@needs_grpc
def test_grpc_streaming_with_a_bad_token_is_unauthenticated(jwks_srv: Srv, keys: dict[str, Signer]) -> None:
    """A2A §10.6 and §7.4: a gRPC SendStreamingMessage with an expired token ends with UNAUTHENTICATED and the
    Bearer challenge in the trailing metadata, before any event."""
    now = time.time()
    token = keys["rs256"].sign(claims(sub(), iat=int(now - 2 * HOUR), exp=int(now - HOUR)))
    assert jwks_srv.grpc_target is not None
    msg = a2a_pb2.Message(message_id=str(uuid.uuid4()), role=a2a_pb2.ROLE_USER, parts=[a2a_pb2.Part(text="x")])
    with grpc.insecure_channel(jwks_srv.grpc_target) as channel:
        stream = a2a_pb2_grpc.A2AServiceStub(channel).SendStreamingMessage(
            a2a_pb2.SendMessageRequest(tenant=AGENT, message=msg), timeout=TIMEOUT,
            metadata=[("a2a-version", "1.0"), ("authorization", f"Bearer {token}")])
        with pytest.raises(grpc.RpcError) as caught:
            events = list(stream)
            raise AssertionError(f"the stream was served: {events}")
    assert caught.value.code() is grpc.StatusCode.UNAUTHENTICATED, caught.value
    trailers = {k: v for k, v in caught.value.trailing_metadata() or () if not k.endswith("-bin")}
    assert 'error="invalid_token"' in trailers.get("www-authenticate", ""), trailers


def test_an_unreachable_jwks_at_first_use_refuses_tokens_and_recovers() -> None:
    """A2A §7.4: when the identity provider's keys cannot be fetched (JWKS endpoint down before the first token),
    tokens are refused with 401 invalid_token, never a 5xx or an acceptance; once the endpoint is back, the
    next token (after `jwks_min_refresh_seconds`, here 0) fetches the keys and passes."""
    signer = Signer.ed("cold-ed")
    with JwksServer() as idp:
        idp.publish(signer)
        idp.stop()
        srv = start(jwks_settings(idp, jwks_min_refresh_seconds=0))
        try:
            token = signer.sign(claims("cold"))
            for binding in ("jsonrpc", "rest"):
                assert_invalid_token(send(binding, srv, token), token)
            idp.start()
            reply = send("rest", srv, token)
            assert reply.kind == "ok", str(reply)
            assert task_text(reply.task) == "cold: hello"
            assert idp.fetches() == 1
        finally:
            srv.live.stop()


# --- the keys: rotation, outage, refresh rate ---------------------------------------------------


def test_key_rotation_and_cached_keys_while_the_jwks_is_down() -> None:
    """A2A §7.4 (authenticate with the declared scheme's keys): a token signed with a key the provider started
    publishing after the server fetched its JWKS is accepted (an unknown kid refetches the keys); while the
    JWKS endpoint is down the cached keys keep verifying; once it is back, a retired key stops working."""
    with JwksServer() as idp:
        old, new, newest = Signer.rsa("2024-rsa"), Signer.ec("2025-ec"), Signer.ed("2026-ed")
        idp.publish(old)
        srv = start(jwks_settings(idp, jwks_min_refresh_seconds=0, jwks_max_age_seconds=HOUR))
        try:
            first = send("jsonrpc", srv, old.sign(claims("rotating")))
            assert first.kind == "ok", str(first)
            assert idp.fetches() == 1
            again = send("rest", srv, old.sign(claims("rotating")))
            assert again.kind == "ok", str(again)
            assert idp.fetches() == 1, "a known kid must be served from the cache"

            idp.publish(old, new)  # rotation: the provider adds a key and signs with it
            rotated = send("rest", srv, new.sign(claims("rotating")))
            assert rotated.kind == "ok", str(rotated)
            assert task_text(rotated.task) == "rotating: hello"
            assert idp.fetches() == 2, "the unknown kid must have refetched the JWKS once"

            idp.stop()  # the JWKS endpoint goes down: connection refused
            for signer in (old, new):
                cached = send("jsonrpc", srv, signer.sign(claims("outage")))
                assert cached.kind == "ok", f"{signer.kid} while the JWKS is down: {cached}"
            unknown = newest.sign(claims("outage"))
            assert_invalid_token(send("jsonrpc", srv, unknown), unknown)  # cannot be fetched: refused, not a 5xx

            idp.start()  # back, with `old` retired and `newest` added
            idp.publish(new, newest)
            back = send("jsonrpc", srv, newest.sign(claims("back")))
            assert back.kind == "ok", str(back)
            assert send("jsonrpc", srv, new.sign(claims("back"))).kind == "ok"
            assert idp.fetches() == 3
            retired = old.sign(claims("back"))  # the fetch just made replaced the cached set: `old` is gone
            assert_invalid_token(send("jsonrpc", srv, retired), retired)
        finally:
            srv.live.stop()


async def test_unknown_kids_refetch_the_keys_at_most_once_per_min_interval() -> None:
    """A2A §7.4 and §13.4 (general security practice): tokens naming unknown kids cannot make the server hammer
    the identity provider: within `jwks_min_refresh_seconds` many such tokens, concurrent or not, over JSON-RPC
    and HTTP+JSON, cause at most one fetch beyond the first; valid tokens keep working meanwhile."""
    with JwksServer() as idp:
        good = Signer.rsa("good")
        idp.publish(good)
        srv = start(jwks_settings(idp, jwks_min_refresh_seconds=HOUR))
        try:
            rogue = Signer.rsa("rogue")
            async with httpx.AsyncClient(timeout=TIMEOUT) as http:

                async def post(i: int, token: str) -> httpx.Response:
                    headers = {"A2A-Version": "1.0", **_auth(token)}
                    if i % 2:
                        return await http.post(srv.agent_url + "/message:send", json={"message": _message("x")},
                                               headers=headers)
                    body = {"jsonrpc": "2.0", "id": i, "method": "SendMessage", "params": {"message": _message("x")}}
                    return await http.post(srv.agent_url, json=body, headers=headers)

                # a cold cache: valid and unknown-kid tokens at once
                tokens = [good.sign(claims(f"ok-{i}")) for i in range(6)]
                tokens += [rogue.sign(claims(f"x-{i}"), kid=f"unknown-{i}") for i in range(30)]
                replies = await asyncio.gather(*(post(i, t) for i, t in enumerate(tokens)))
                assert [r.status_code for r in replies[:6]] == [200] * 6, [r.text[:200] for r in replies[:6]]
                assert {r.status_code for r in replies[6:]} == {401}
                assert all('error="invalid_token"' in r.headers.get("www-authenticate", "") for r in replies[6:])
                after_burst = idp.fetches()
                assert 1 <= after_burst <= 2, f"{after_burst} JWKS fetches for one burst"

                # the provider rotates; a stream of unknown kids still refetches at most once in the interval
                idp.publish(good, Signer.ec("fresh"))
                for i in range(40):
                    reply = await post(i, rogue.sign(claims("y"), kid=f"later-{i}"))
                    assert reply.status_code == 401, reply.text[:200]
                assert idp.fetches() <= 2, f"{idp.fetches()} JWKS fetches within jwks_min_refresh_seconds"
                still = await post(0, good.sign(claims("still")))
                assert still.status_code == 200, still.text[:300]
                assert json.loads(still.text)["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
        finally:
            srv.live.stop()
