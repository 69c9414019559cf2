"""Launch Parley's default server (built-in agents, echo the default, SQLite store) for benchmarks.

    python bench/parley_server.py --port 9001 --db /tmp/x/bench.db [--grpc-port 9101]

Equivalent to what `parley serve [--grpc-port N]` does, with the same uvicorn settings
the SDK baseline (bench/sdk_echo_server.py) uses: one worker, default loop/http. It
serves JSON-RPC at /, HTTP+JSON (REST) at /message:send (1.0) and /v1/message:send
(0.3), and with --grpc-port also A2A 1.0 over gRPC (Settings.grpc_port: a grpc.aio
server started in the app's lifespan, on uvicorn's event loop).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path


def main() -> None:
    import uvicorn

    from parley.app import Settings
    from parley.serve import default_app

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=9001)
    ap.add_argument("--db", default=None, help="SQLite file (default: bench.db in a fresh temp dir)")
    ap.add_argument("--grpc-port", type=int, default=None, help="also serve A2A 1.0 over gRPC on this port")
    ap.add_argument("--log-level", default="warning")
    args = ap.parse_args()
    db = args.db or str(Path(tempfile.mkdtemp(prefix="parley-bench-")) / "bench.db")
    settings = Settings(grpc_port=args.grpc_port, grpc_host=args.host)
    uvicorn.run(default_app(db, settings=settings).asgi(), host=args.host, port=args.port, log_level=args.log_level)


if __name__ == "__main__":
    main()
