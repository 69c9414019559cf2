"""The HTTP server: ASGI app, JSON-RPC binding, cards, SSE."""
