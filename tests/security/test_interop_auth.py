"""Credentials across implementations: the official A2A SDKs against a secured Parley, and Parley's client
and CLI against a secured official SDK server. Everything runs over real HTTP / gRPC on 127.0.0.1.

* a2a-sdk 1.x (this venv) -> Parley: the SDK's own `AuthInterceptor` with an
  `InMemoryContextCredentialStore` reads Parley's card (`securitySchemes`, `securityRequirements`) and puts
  the credential where the card says (X-API-Key, or `Authorization: Bearer`), over JSON-RPC, HTTP+JSON,
  gRPC and its 0.3 compat transport.
* a2a-sdk 0.3.26 (`.venv-sdk03`, a subprocess running `sdk03_auth_driver.py`) -> Parley's 0.3 interface,
  JSON-RPC (AuthInterceptor) and HTTP+JSON (0.3.26 runs no interceptors there; the driver uses the
  per-call `http_kwargs`, see its docstring).
* Parley's `A2AClient` and the `parley` CLI (a subprocess: `--api-key`, `--token`, PARLEY_API_KEY,
  PARLEY_TOKEN) -> an a2a-sdk 1.x server behind Starlette's `AuthenticationMiddleware` (the mechanism the
  SDK reads `ServerCallContext.user` from), whose card declares both schemes and which answers 401 with a
  challenge otherwise.

The agents on both sides answer "<principal>: <text>", so each test sees which identity the server
derived from the credential, not only that the call went through.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hmac
import json
import os
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.client.auth import AuthInterceptor, InMemoryContextCredentialStore
from a2a.client.client import ClientCallContext
from a2a.client.errors import A2AClientError
from a2a.types import AgentCard, Message, Part, Role, SendMessageRequest
from a2a.types import GetTaskRequest as SdkGetTaskRequest

from parley.app import Parley, Settings
from parley.client import A2AClient
from parley.protocol import models as m
from parley.security.keys import MemoryKeyStore
from parley.settings import AuthSettings, JwtSettings
from support import LiveServer, free_port, needs

from .jwks_server import AUDIENCE, ISSUER, JwksServer, Signer, claims

try:
    import grpc

    HAVE_GRPC = True
except ImportError:  # pragma: no cover - the gRPC extra is part of the dev install
    HAVE_GRPC = False

pytestmark = pytest.mark.interop

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
SDK03_VERSION = "0.3.26"
SDK03_VENV = Path(os.environ.get("PARLEY_SDK03_VENV") or ROOT / ".venv-sdk03")
SDK03_PYTHON = SDK03_VENV / "bin" / "python"
SDK03_DRIVER = HERE / "sdk03_auth_driver.py"
PARLEY_CLI = Path(sys.executable).with_name("parley")
WAIT = 20.0
AGENT = "who"
KEY_PRINCIPAL = "sdk-key-user"
needs_grpc = needs("grpc", "grpc")


# --- a secured Parley: API keys and JWTs from a JWKS ----------------------------------------------


@dataclass
class SecuredParley:
    live: LiveServer
    grpc_target: str | None
    api_key: str  # opens AGENT, principal KEY_PRINCIPAL
    other_agent_key: str  # opens only the agent "other"
    signer: Signer  # the identity provider's key

    @property
    def agent_url(self) -> str:
        return f"{self.live.url}/a2a/{AGENT}"

    def jwt(self, subject: str) -> str:
        return self.signer.sign(claims(subject))


@pytest.fixture(scope="module")
def parley() -> Iterator[SecuredParley]:
    signer = Signer.rsa("interop-rsa")
    with JwksServer() as idp:
        idp.publish(signer)
        jwt = JwtSettings(jwks_url=idp.jwks_url, issuer=ISSUER, audience=[AUDIENCE])
        app = Parley(settings=Settings(db="memory", auth=AuthSettings(jwt=jwt)))

        @app.agent(id=AGENT, description="Says who asked")
        async def who(ctx):
            yield f"{ctx.owner}: {ctx.text}"

        @app.agent(id="other", description="Another agent")
        async def other(ctx):
            yield "other"

        store = MemoryKeyStore()
        _, api_key = asyncio.run(store.create(AGENT, name="sdk interop", principal=KEY_PRINCIPAL))
        _, other_key = asyncio.run(store.create("other", name="other agent only"))
        app.asgi = functools.partial(app.asgi, keys=store)  # type: ignore[method-assign]
        target = None
        if HAVE_GRPC:
            app.settings.grpc_port = free_port()
            target = f"127.0.0.1:{app.settings.grpc_port}"
        live = LiveServer(app).start()
        try:
            yield SecuredParley(live, target, api_key, other_key, signer)
        finally:
            live.stop()


# --- a2a-sdk 1.x client -> Parley -------------------------------------------------------------------


@dataclass
class SdkRun:
    client: Any
    card: AgentCard
    context: ClientCallContext
    headers: list[httpx.Headers] = field(default_factory=list)  # of every A2A request (card fetches excepted)


@asynccontextmanager
async def sdk13(agent_url: str, flavour: str, credentials: dict[str, str]) -> AsyncIterator[SdkRun]:
    """An a2a-sdk 1.x client with AuthInterceptor; `credentials` maps the card's scheme names to credentials."""
    headers: list[httpx.Headers] = []

    async def hook(request: httpx.Request) -> None:
        if not request.url.path.endswith("agent-card.json"):
            headers.append(request.headers)

    store = InMemoryContextCredentialStore()
    session = f"session-{uuid.uuid4().hex}"
    for scheme, credential in credentials.items():
        await store.set_credentials(session, scheme, credential)
    interceptors = [AuthInterceptor(store)]
    async with httpx.AsyncClient(timeout=WAIT, event_hooks={"request": [hook]}) as http:
        if flavour == "0.3-compat":  # the card a 0.3 client sees, only its 0.3 JSON-RPC interface left
            async with httpx.AsyncClient(timeout=WAIT) as plain:
                resolved = await A2ACardResolver(plain, agent_url).get_agent_card()
            card = AgentCard()
            card.CopyFrom(resolved)
            del card.supported_interfaces[:]
            card.supported_interfaces.extend(i for i in resolved.supported_interfaces
                                             if i.protocol_binding == "JSONRPC" and i.protocol_version == "0.3")
            assert len(card.supported_interfaces) == 1, resolved.supported_interfaces
            client = ClientFactory(ClientConfig(streaming=False, httpx_client=http)).create(card, interceptors)
        else:
            config = ClientConfig(streaming=False, httpx_client=http, supported_protocol_bindings=[flavour],
                                  grpc_channel_factory=(lambda url: grpc.aio.insecure_channel(url)) if HAVE_GRPC
                                  else None)
            client = await ClientFactory(config).create_from_url(agent_url, interceptors=interceptors)
            card = client._card
        try:
            yield SdkRun(client, card, ClientCallContext(state={"sessionId": session}), headers)
        finally:
            await client.close()


def sdk_message(text: str) -> Message:
    return Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text=text)])


async def sdk_send(run: SdkRun, text: str) -> Any:
    """The task of a blocking SendMessage."""
    async with asyncio.timeout(WAIT):
        events = [ev async for ev in run.client.send_message(SendMessageRequest(message=sdk_message(text)),
                                                             context=run.context)]
    assert events and events[-1].WhichOneof("payload") == "task", events
    return events[-1].task


def sdk_text(task: Any) -> str:
    return "".join(p.text for a in task.artifacts for p in a.parts if p.WhichOneof("content") == "text")


SDK13_FLAVOURS = ["JSONRPC", "HTTP+JSON", pytest.param("GRPC", marks=needs_grpc), "0.3-compat"]


@pytest.mark.parametrize("flavour", SDK13_FLAVOURS)
@pytest.mark.parametrize("credential", ["api-key", "jwt", "api-key-as-bearer"])
async def test_sdk13_client_authenticates_with_what_the_card_declares(parley: SecuredParley, flavour: str,
                                                                     credential: str) -> None:
    """A2A §7.3 (the client discovers the schemes in `securitySchemes`, obtains credentials out of band, and
    sends them with every request) and §4.5.2 / §4.5.3: the official 1.x SDK's AuthInterceptor reads Parley's
    card and authenticates with an API key (header X-API-Key, as declared), a JWT (HTTP Bearer) or the API key
    given for the bearer scheme (Parley accepts `Bearer pk_...`); the task is the credential's principal's,
    and GetTask with the same credential reads it back."""
    subject = f"jwt-{uuid.uuid4().hex[:8]}"
    creds, principal = {
        "api-key": ({"apiKey": parley.api_key}, KEY_PRINCIPAL),
        "jwt": ({"bearer": parley.jwt(subject)}, subject),
        "api-key-as-bearer": ({"bearer": parley.api_key}, KEY_PRINCIPAL),
    }[credential]
    async with sdk13(parley.agent_url, flavour, creds) as run:
        schemes = dict(run.card.security_schemes)
        assert schemes["apiKey"].api_key_security_scheme.name == "X-API-Key"
        assert schemes["apiKey"].api_key_security_scheme.location == "header"
        assert schemes["bearer"].http_auth_security_scheme.scheme.lower() == "bearer"
        assert {name for req in run.card.security_requirements for name in req.schemes} == {"apiKey", "bearer"}

        task = await sdk_send(run, "hello from sdk 1.x")
        assert sdk_text(task) == f"{principal}: hello from sdk 1.x"
        again = await asyncio.wait_for(run.client.get_task(SdkGetTaskRequest(id=task.id), context=run.context),
                                       WAIT)
        assert again.id == task.id and sdk_text(again) == sdk_text(task)

    if flavour != "GRPC":  # what went on the wire: the header the card's scheme names
        assert len(run.headers) == 2, run.headers
        for sent in run.headers:
            if credential == "api-key":
                assert sent.get("x-api-key") == parley.api_key and "authorization" not in sent
            else:
                assert sent.get("authorization") == f"Bearer {creds['bearer']}" and "x-api-key" not in sent


@pytest.mark.parametrize("flavour", SDK13_FLAVOURS)
@pytest.mark.parametrize("credential", ["none", "wrong-api-key", "forged-jwt"])
async def test_sdk13_client_without_valid_credentials_is_refused(parley: SecuredParley, flavour: str,
                                                                 credential: str) -> None:
    """A2A §7.4 (MUST authenticate every request; SHOULD answer with the binding's authentication error):
    the official 1.x SDK without credentials, with an unknown API key or with a JWT signed by another key
    gets an error (HTTP 401 / gRPC UNAUTHENTICATED)."""
    creds = {
        "none": {},
        "wrong-api-key": {"apiKey": "pk_0123456789abcdef_not-a-real-secret"},
        "forged-jwt": {"bearer": Signer.rsa(parley.signer.kid).sign(claims("mallory"))},
    }[credential]
    async with sdk13(parley.agent_url, flavour, creds) as run:
        with pytest.raises(A2AClientError) as caught:
            await sdk_send(run, "must not run")
    text = str(caught.value)
    assert ("401" in text) if flavour != "GRPC" else ("UNAUTHENTICATED" in text), text


async def test_sdk13_key_for_another_agent_is_forbidden(parley: SecuredParley) -> None:
    """A2A §7.5 (authorization after authentication, per the server's policy): a valid API key made for
    another agent authenticates but may not call this one: HTTP 403, not 401 and not a task."""
    async with sdk13(parley.agent_url, "JSONRPC", {"apiKey": parley.other_agent_key}) as run:
        with pytest.raises(A2AClientError) as caught:
            await sdk_send(run, "not my agent")
    assert "403" in str(caught.value), str(caught.value)


# --- a2a-sdk 0.3.26 client (subprocess) -> Parley's 0.3 interface -----------------------------------


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV") and not k.startswith("PARLEY_")}
    env["PYTHONNOUSERSITE"] = "1"
    env.update(extra)
    return env


@pytest.fixture(scope="session")
def sdk03_python() -> Path:
    """The interpreter of `.venv-sdk03` with a2a-sdk 0.3.26 (built by tests/interop; skipped if absent)."""
    found = None
    if SDK03_PYTHON.exists():
        probe = subprocess.run([str(SDK03_PYTHON), "-c", "import importlib.metadata as m; print(m.version('a2a-sdk'))"],
                               capture_output=True, text=True, timeout=60, env=_clean_env(), check=False)
        found = probe.stdout.strip() if probe.returncode == 0 else None
    if found != SDK03_VERSION:
        reason = f"{SDK03_PYTHON} has a2a-sdk {found!r}, not {SDK03_VERSION} (tests/interop builds it)"
        if os.environ.get("CI", "").strip().lower() == "true":
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    return SDK03_PYTHON


def drive03(python: Path, agent_url: str, *args: str) -> dict[str, Any]:
    """Run the 0.3.26 driver; its JSON output (`result` or `error`)."""
    done = subprocess.run([str(python), str(SDK03_DRIVER), agent_url, *args], capture_output=True, text=True,
                          timeout=120, env=_clean_env(), check=False)
    lines = done.stdout.strip().splitlines()
    assert lines, f"the driver printed nothing (exit {done.returncode}); stderr:\n{done.stderr}"
    out = json.loads(lines[-1])
    assert out["sdkVersion"] == SDK03_VERSION
    assert (done.returncode == 0) == ("result" in out), (done.returncode, out)
    return out


SDK03_CASES = [
    pytest.param("JSONRPC", "apiKey", "interceptor", id="jsonrpc-apikey"),
    pytest.param("JSONRPC", "bearer", "interceptor", id="jsonrpc-jwt"),
    pytest.param("HTTP+JSON", "apiKey", "http_kwargs", id="rest-apikey"),
    pytest.param("HTTP+JSON", "bearer", "http_kwargs", id="rest-jwt"),
]


@pytest.mark.parametrize(("transport", "scheme", "via"), SDK03_CASES)
def test_sdk03_client_authenticates_against_the_03_interface(parley: SecuredParley, sdk03_python: Path,
                                                            transport: str, scheme: str, via: str) -> None:
    """A2A §7.3 with the 0.3 card (`securitySchemes` in 0.3 form, `security`): the a2a-sdk 0.3.26 client
    reads the schemes from Parley's 0.3 card and authenticates with an API key (X-API-Key) or a JWT (Bearer),
    over JSON-RPC and HTTP+JSON; sends a message and reads the task back as the credential's principal."""
    subject = f"jwt03-{uuid.uuid4().hex[:8]}"
    credential, principal = (parley.api_key, KEY_PRINCIPAL) if scheme == "apiKey" else (parley.jwt(subject), subject)
    out = drive03(sdk03_python, parley.agent_url, "--transport", transport, "--scheme", scheme,
                  "--credential", credential, "--via", via, "--text", "hello from 0.3")
    assert "result" in out, out.get("error", {}).get("traceback") or out
    result = out["result"]
    card = result["card"]
    assert {"apiKey": []} in card["security"] and {"bearer": []} in card["security"], card
    assert card["securitySchemes"]["apiKey"]["type"] == "apiKey"
    assert card["securitySchemes"]["apiKey"]["in"] == "header" and card["securitySchemes"]["apiKey"]["name"] == "X-API-Key"
    assert card["securitySchemes"]["bearer"]["type"] == "http"
    assert card["securitySchemes"]["bearer"]["scheme"].lower() == "bearer"
    assert transport in card["transports"], card
    assert result["kind"] == "task" and result["state"] == "completed", result
    assert result["text"] == f"{principal}: hello from 0.3"
    assert result["getState"] == "completed" and result["getText"] == result["text"]


@pytest.mark.parametrize("transport", ["JSONRPC", "HTTP+JSON"])
@pytest.mark.parametrize("credential", ["none", "forged-jwt"])
def test_sdk03_client_without_valid_credentials_gets_401(parley: SecuredParley, sdk03_python: Path,
                                                         transport: str, credential: str) -> None:
    """A2A §7.4: the 0.3.26 client without credentials, or with a JWT signed by a key the provider never
    published, gets HTTP 401 on the 0.3 interface (JSON-RPC and HTTP+JSON)."""
    args = ["--transport", transport]
    if credential == "forged-jwt":
        forged = Signer.rsa(parley.signer.kid).sign(claims("mallory"))
        args += ["--scheme", "bearer", "--credential", forged,
                 "--via", "interceptor" if transport == "JSONRPC" else "http_kwargs"]
    out = drive03(sdk03_python, parley.agent_url, *args)
    assert "error" in out, out
    assert out["error"]["status"] == 401, out["error"]["message"]


# --- Parley's client and CLI -> a secured a2a-sdk 1.x server -----------------------------------------

SDK_KEY = "sdk-server-key-" + uuid.uuid4().hex
SDK_TOKEN = "sdk-server-token-" + uuid.uuid4().hex
SDK_CHALLENGE = 'ApiKey realm="sdk", header="X-API-Key", Bearer realm="sdk"'


def build_secured_sdk_app(base_url: str) -> Any:
    """An a2a-sdk 1.x app (JSON-RPC 1.0 + 0.3 compat at `/`, HTTP+JSON at `/rest`) behind Starlette's
    AuthenticationMiddleware: X-API-Key SDK_KEY is user "key-user", `Bearer SDK_TOKEN` is "token-user";
    anything else but the card gets 401 with a challenge. Its card declares both schemes."""
    from a2a.helpers import new_task_from_user_message
    from a2a.server.agent_execution import AgentExecutor, RequestContext
    from a2a.server.events import EventQueue
    from a2a.server.request_handlers import DefaultRequestHandler
    from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes, create_rest_routes
    from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
    from a2a.types import (
        AgentCapabilities,
        AgentInterface,
        AgentSkill,
        APIKeySecurityScheme,
        HTTPAuthSecurityScheme,
        SecurityRequirement,
        SecurityScheme,
        StringList,
    )
    from starlette.applications import Starlette
    from starlette.authentication import (
        AuthCredentials,
        AuthenticationBackend,
        AuthenticationError,
        SimpleUser,
    )
    from starlette.middleware import Middleware
    from starlette.middleware.authentication import AuthenticationMiddleware
    from starlette.responses import JSONResponse

    class Who(AgentExecutor):
        async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
            if context.current_task is None:
                await event_queue.enqueue_event(new_task_from_user_message(context.message))
            updater = TaskUpdater(event_queue, context.task_id, context.context_id)
            await updater.start_work()
            user = context.call_context.user
            await updater.add_artifact([Part(text=f"{user.user_name}: {context.get_user_input()}")],
                                       artifact_id="who", name="who")
            await updater.complete()

        async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
            await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()

    class KeyOrBearer(AuthenticationBackend):
        async def authenticate(self, conn: Any) -> tuple[AuthCredentials, SimpleUser] | None:
            if conn.url.path.endswith("/agent-card.json"):
                return None  # the public card
            key = conn.headers.get("x-api-key")
            if key is not None and hmac.compare_digest(key.encode(), SDK_KEY.encode()):
                return AuthCredentials(["a2a"]), SimpleUser("key-user")
            scheme, _, value = conn.headers.get("authorization", "").partition(" ")
            if scheme.lower() == "bearer" and hmac.compare_digest(value.strip().encode(), SDK_TOKEN.encode()):
                return AuthCredentials(["a2a"]), SimpleUser("token-user")
            raise AuthenticationError("missing or invalid credentials: send X-API-Key or Authorization: Bearer")

    def refuse(conn: Any, exc: Exception) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=401, headers={"WWW-Authenticate": SDK_CHALLENGE})

    card = AgentCard(
        name="secured-sdk",
        description="an a2a-sdk 1.x agent that requires credentials",
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(url=base_url, protocol_binding="JSONRPC", protocol_version="1.0"),
            AgentInterface(url=f"{base_url}/rest", protocol_binding="HTTP+JSON", protocol_version="1.0"),
            AgentInterface(url=base_url, protocol_binding="JSONRPC", protocol_version="0.3"),
        ],
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="who", name="who", description="says who asked", tags=["test"])],
        security_schemes={
            "apiKey": SecurityScheme(api_key_security_scheme=APIKeySecurityScheme(location="header", name="X-API-Key")),
            "bearer": SecurityScheme(http_auth_security_scheme=HTTPAuthSecurityScheme(scheme="Bearer")),
        },
        security_requirements=[SecurityRequirement(schemes={"apiKey": StringList()}),
                               SecurityRequirement(schemes={"bearer": StringList()})],
    )
    handler = DefaultRequestHandler(agent_executor=Who(), task_store=InMemoryTaskStore(), agent_card=card)
    routes: list[Any] = []
    routes += create_agent_card_routes(card, card_url="/.well-known/agent-card.json")
    routes += create_jsonrpc_routes(handler, rpc_url="/", enable_v0_3_compat=True)
    routes += create_rest_routes(handler, path_prefix="/rest")

    @contextlib.asynccontextmanager
    async def lifespan(_app: Any) -> AsyncIterator[None]:
        yield
        await handler.aclose()

    middleware = [Middleware(AuthenticationMiddleware, backend=KeyOrBearer(), on_error=refuse)]
    return Starlette(routes=routes, middleware=middleware, lifespan=lifespan)


@pytest.fixture(scope="module")
def sdk_server() -> Iterator[str]:
    """The secured a2a-sdk 1.x server on 127.0.0.1; its URL.

    The listening socket is made here and handed to uvicorn, so a request made before uvicorn has finished
    starting waits in the socket's backlog: nothing polls for readiness."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    server = uvicorn.Server(uvicorn.Config(build_secured_sdk_app(url), log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="secured-sdk-server", daemon=True)
    thread.start()
    try:
        yield url
    finally:
        server.should_exit = True
        thread.join(timeout=WAIT)
        sock.close()


def test_the_sdk_server_really_requires_credentials(sdk_server: str) -> None:
    """A2A §7.4 (control for the tests below): the secured SDK server refuses a bare JSON-RPC call with 401 and a
    challenge, serves its card publicly, and the card declares both schemes (§4.5.2, §4.5.3)."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
            "params": {"message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "x"}]}}}
    resp = httpx.post(sdk_server, json=body, headers={"A2A-Version": "1.0"}, timeout=WAIT)
    assert resp.status_code == 401 and resp.headers["www-authenticate"] == SDK_CHALLENGE
    card = httpx.get(f"{sdk_server}/.well-known/agent-card.json", timeout=WAIT).json()
    assert card["securitySchemes"]["apiKey"]["apiKeySecurityScheme"]["name"] == "X-API-Key"
    assert card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"] == "Bearer"


PARLEY_CLIENT_INTERFACES = [("JSONRPC", "1.0"), ("JSONRPC", "0.3"), ("HTTP+JSON", "1.0")]
PARLEY_CLIENT_IDS = ["jsonrpc-1.0", "jsonrpc-0.3", "rest-1.0"]


@pytest.mark.parametrize(("binding", "version"), PARLEY_CLIENT_INTERFACES, ids=PARLEY_CLIENT_IDS)
@pytest.mark.parametrize("credential", ["api-key", "bearer"])
async def test_parley_client_authenticates_against_the_sdk_server(sdk_server: str, binding: str, version: str,
                                                                 credential: str) -> None:
    """A2A §7.3: Parley's A2AClient reads the SDK server's declared schemes from its card and, given the
    credential (X-API-Key or `Authorization: Bearer`), sends it with every request: the message is answered as
    the credential's user, and GetTask with the same client reads the task back."""
    headers, user = ({"X-API-Key": SDK_KEY}, "key-user") if credential == "api-key" else \
        ({"Authorization": f"Bearer {SDK_TOKEN}"}, "token-user")
    async with await A2AClient.connect(sdk_server, version=version, bindings=[binding], headers=headers) as client:
        assert (client.binding, client.version) == (binding, version)
        assert client.card is not None and client.card.security_schemes is not None
        assert set(client.card.security_schemes) == {"apiKey", "bearer"}, client.card.security_schemes
        result = await asyncio.wait_for(client.send("hello sdk"), WAIT)
        assert isinstance(result, m.Task), result
        assert result.status.state is m.TaskState.COMPLETED, result.status
        text = "".join(p.text or "" for a in result.artifacts or [] for p in a.parts)
        assert text == f"{user}: hello sdk"
        again = await asyncio.wait_for(client.get(result.id), WAIT)
        assert again.id == result.id and again.status.state is m.TaskState.COMPLETED


@pytest.mark.parametrize(("binding", "version"), PARLEY_CLIENT_INTERFACES, ids=PARLEY_CLIENT_IDS)
@pytest.mark.parametrize("credential", ["none", "wrong-key"])
async def test_parley_client_without_valid_credentials_fails_clearly(sdk_server: str, binding: str, version: str,
                                                                     credential: str) -> None:
    """A2A §7.4: without credentials (or with a wrong key) the SDK server answers 401; Parley's client raises an
    error that says so (the HTTP status or that authentication is required), not a decoding failure."""
    headers = {"X-API-Key": "wrong"} if credential == "wrong-key" else None
    async with await A2AClient.connect(sdk_server, version=version, bindings=[binding], headers=headers) as client:
        with pytest.raises(Exception) as caught:
            await asyncio.wait_for(client.send("must not run"), WAIT)
    message = str(caught.value)
    assert "401" in message or "authenticat" in message.lower(), f"{type(caught.value).__name__}: {message}"
    assert not isinstance(caught.value, (TimeoutError, AssertionError)), repr(caught.value)


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The `parley` CLI of this venv as a subprocess (wide, colourless output; no PARLEY_* from the caller)."""
    return subprocess.run([str(PARLEY_CLI), *args], capture_output=True, text=True, timeout=60,
                          env=_clean_env(COLUMNS="200", NO_COLOR="1", TERM="dumb", **(env or {})), check=False)


CLI_CASES = [
    pytest.param(["--api-key", SDK_KEY], {}, [], "key-user", id="--api-key"),
    pytest.param(["--token", SDK_TOKEN], {}, [], "token-user", id="--token"),
    pytest.param([], {"PARLEY_API_KEY": SDK_KEY}, [], "key-user", id="PARLEY_API_KEY"),
    pytest.param([], {"PARLEY_TOKEN": SDK_TOKEN}, [], "token-user", id="PARLEY_TOKEN"),
    pytest.param(["--api-key", SDK_KEY], {}, ["--binding", "rest"], "key-user", id="--api-key-rest"),
    pytest.param(["--token", SDK_TOKEN], {}, ["--version", "0.3"], "token-user", id="--token-v0.3"),
]


@pytest.mark.parametrize(("global_args", "env", "send_args", "user"), CLI_CASES)
def test_cli_send_authenticates_against_the_sdk_server(sdk_server: str, global_args: list[str], env: dict[str, str],
                                                       send_args: list[str], user: str) -> None:
    """A2A §7.3 step 3 (credentials in protocol headers with every request): `parley --api-key K send URL TEXT`,
    `--token T`, and the PARLEY_API_KEY / PARLEY_TOKEN environment variables authenticate against the secured
    SDK server (JSON-RPC 1.0, HTTP+JSON and JSON-RPC 0.3); the answer names the credential's user."""
    text = f"cli {uuid.uuid4().hex[:6]}"
    done = run_cli(*global_args, "send", sdk_server, text, *send_args, env=env)
    assert done.returncode == 0, f"exit {done.returncode}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    assert f"{user}: {text}" in done.stdout, done.stdout
    assert "completed" in done.stdout, done.stdout


@pytest.mark.parametrize(("global_args", "send_args"), [
    pytest.param([], [], id="no-credentials"),
    pytest.param([], ["--binding", "rest"], id="no-credentials-rest"),
    pytest.param(["--api-key", "not-the-key"], [], id="wrong-api-key"),
    pytest.param(["--token", "not-the-token"], ["--binding", "rest"], id="wrong-token-rest"),
])
def test_cli_without_valid_credentials_exits_nonzero_with_a_clear_message(sdk_server: str, global_args: list[str],
                                                                          send_args: list[str]) -> None:
    """A2A §7.4: refused with 401, `parley send` exits non-zero and prints one error line saying the request
    was not authenticated (the status or the reason), never a traceback."""
    done = run_cli(*global_args, "send", sdk_server, "must not run", *send_args)
    assert done.returncode != 0, done.stdout
    assert "Traceback" not in done.stderr, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), done.stderr
    assert "401" in lines[0] or "authenticat" in lines[0].lower(), lines[0]
