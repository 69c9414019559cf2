"""Drive a secured A2A server with the official a2a-sdk 0.3.26 client and its AuthInterceptor; print one JSON object.

Runs in its own virtualenv (`.venv-sdk03`: a2a-sdk 0.3.x cannot be installed beside 1.x), so it
imports nothing from Parley or pytest:

    .venv-sdk03/bin/python tests/security/sdk03_auth_driver.py AGENT_URL \
        [--transport JSONRPC|HTTP+JSON] [--scheme NAME --credential VALUE] [--via interceptor|http_kwargs]

The client resolves the card at AGENT_URL/.well-known/agent-card.json with no A2A-Version header
(as a 0.3 client in the wild does), then is built with `ClientFactory.connect(...,
interceptors=[AuthInterceptor(InMemoryContextCredentialStore())])`; the credential is stored for
the security scheme NAME of a session, and every call carries that session in its
`ClientCallContext`. So the SDK itself decides, from the card's `securitySchemes` / `security`,
which header carries the credential (X-API-Key, or `Authorization: Bearer`). Without --scheme
the store is empty and the calls go out without credentials.

`--via http_kwargs`: a2a-sdk 0.3.26's HTTP+JSON transport does not run interceptors
(`RestTransport._apply_interceptors` is a TODO that returns its input), so for that transport the
credential is put where 0.3.26 takes per-call HTTP arguments, `ClientCallContext.state["http_kwargs"]`,
in the header the card's scheme names (the same mapping AuthInterceptor applies).

It sends one message (blocking, no streaming), then reads the task back with `tasks/get`.
The JSON object on stdout holds the card's security, the artifact text, the task id and the state
of the read-back; on an exception it holds `error` {type, message, status, code, traceback}
and the exit status is 1.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import uuid
from pathlib import Path
from typing import Any

import httpx
from a2a.client import A2ACardResolver, ClientCallContext, ClientConfig, ClientFactory
from a2a.client.auth import AuthInterceptor, InMemoryContextCredentialStore
from a2a.types import (
    AgentCard,
    APIKeySecurityScheme,
    HTTPAuthSecurityScheme,
    In,
    Message,
    OAuth2SecurityScheme,
    OpenIdConnectSecurityScheme,
    Part,
    Role,
    Task,
    TaskQueryParams,
    TextPart,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for sdk03_driving (this runs as a script)
from sdk03_driving import WAIT, parts_text, report

SESSION = "driver-session"


def header_for(card: AgentCard, scheme_name: str, credential: str) -> dict[str, str]:
    """The header the card's scheme `scheme_name` puts a credential in (as AuthInterceptor maps it)."""
    scheme = (card.security_schemes or {})[scheme_name].root
    if isinstance(scheme, APIKeySecurityScheme) and scheme.in_ == In.header:
        return {scheme.name: credential}
    if isinstance(scheme, HTTPAuthSecurityScheme) and scheme.scheme.lower() == "bearer":
        return {"Authorization": f"Bearer {credential}"}
    if isinstance(scheme, OAuth2SecurityScheme | OpenIdConnectSecurityScheme):
        return {"Authorization": f"Bearer {credential}"}
    raise ValueError(f"the card's scheme {scheme_name!r} is not one a header can carry: {scheme!r}")


async def run(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    async with httpx.AsyncClient(timeout=WAIT) as http:
        card = await A2ACardResolver(http, args.agent_url).get_agent_card()
        out["card"] = {
            "security": card.security,
            "securitySchemes": {name: scheme.root.model_dump(mode="json", by_alias=True, exclude_none=True)
                                for name, scheme in (card.security_schemes or {}).items()},
            "preferredTransport": card.preferred_transport,
            "transports": [card.preferred_transport] + [i.transport for i in card.additional_interfaces or []],
        }
        store = InMemoryContextCredentialStore()
        context = ClientCallContext(state={"sessionId": SESSION})
        if args.scheme and args.via == "interceptor":
            await store.set_credentials(SESSION, args.scheme, args.credential)
        elif args.scheme:
            context.state["http_kwargs"] = {"headers": header_for(card, args.scheme, args.credential)}
        config = ClientConfig(streaming=False, httpx_client=http, supported_transports=[args.transport])
        client = await asyncio.wait_for(
            ClientFactory.connect(card, client_config=config, interceptors=[AuthInterceptor(store)]), WAIT)
        message = Message(message_id=str(uuid.uuid4()), role=Role.user, parts=[Part(root=TextPart(text=args.text))])
        async with asyncio.timeout(WAIT):
            events = [ev async for ev in client.send_message(message, context=context)]
        first = events[0]
        if isinstance(first, Message):
            out["kind"] = "message"
            out["text"] = parts_text(first.parts)
            return out
        task: Task = first[0]
        out["kind"] = "task"
        out["taskId"] = task.id
        out["state"] = task.status.state.value
        out["text"] = "".join(parts_text(a.parts) for a in task.artifacts or [])
        again = await asyncio.wait_for(client.get_task(TaskQueryParams(id=task.id), context=context), WAIT)
        out["getState"] = again.status.state.value
        out["getText"] = "".join(parts_text(a.parts) for a in again.artifacts or [])
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("agent_url")
    parser.add_argument("--transport", default="JSONRPC", choices=["JSONRPC", "HTTP+JSON"])
    parser.add_argument("--scheme", default=None, help="the card's security scheme name to give a credential for")
    parser.add_argument("--credential", default=None)
    parser.add_argument("--via", default="interceptor", choices=["interceptor", "http_kwargs"],
                        help="how the credential reaches the request (see the module docstring)")
    parser.add_argument("--text", default="hello from 0.3")
    args = parser.parse_args()
    return report(lambda: run(args), {})


if __name__ == "__main__":
    sys.exit(main())
