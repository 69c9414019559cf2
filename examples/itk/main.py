"""Start the Parley ITK agent as the a2a-itk kit starts an SDK's agent: `main.py --httpPort P --grpcPort G`.

HTTP (JSON-RPC, HTTP+JSON, both A2A versions) on 127.0.0.1:P, gRPC on 127.0.0.1:G, tasks in memory, webhooks
on loopback allowed (the kit's notification server listens on 127.0.0.1). The kit posts its first call to
`/jsonrpc/` whatever the card says; that path is answered as `/`, the agent's JSON-RPC endpoint.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

import uvicorn
from itk_agent import build

from parley.settings import PushSettings, Settings

Scope = dict[str, Any]


def jsonrpc_alias(app: Any) -> Any:
    """An ASGI app that answers `/jsonrpc` and `/jsonrpc/` as `/` (the kit's entry point)."""

    async def aliased(scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] in ("/jsonrpc", "/jsonrpc/"):
            scope = {**scope, "path": "/", "raw_path": b"/"}
        await app(scope, receive, send)

    return aliased


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--httpPort", type=int, default=10102)
    parser.add_argument("--grpcPort", type=int, default=11002)
    args = parser.parse_args()
    settings = Settings(host="127.0.0.1", port=args.httpPort, grpc_port=args.grpcPort, db="memory",
                        push=PushSettings(allow=["127.0.0.0/8"]))
    app = jsonrpc_alias(build().asgi(settings))
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=args.httpPort, log_level="warning"))
    asyncio.run(server.serve())


if __name__ == "__main__":
    main()
