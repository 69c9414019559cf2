"""Agent ids the HTTP routes would not reach: the first path segments Parley serves itself.

Every agent is also reachable as `/{agent_id}/...` (the HTTP+JSON tenant form, see
:mod:`parley.server.app`), so an agent whose id is one of the server's own first path
segments would take over, or lose, those paths: an agent called `v1` would answer
the default agent's A2A 0.3 HTTP+JSON API (`/v1/message:send`), one called `tasks`
the default agent's `GET /tasks/{id}`. Such ids are refused when the agent is added
(:meth:`parley.app.Parley.add_agent`, and the hub's config check).
"""

from __future__ import annotations

# First path segment -> what Parley serves there (tests check this against the route tables).
RESERVED_AGENT_IDS: dict[str, str] = {
    "a2a": "every agent's JSON-RPC and HTTP+JSON endpoints (/a2a/{agent_id})",
    "agents": "the list of hosted agents (GET /agents)",
    "healthz": "the liveness check (GET /healthz)",
    "readyz": "the readiness check (GET /readyz)",
    "admin": "the admin API (/admin/keys, /admin/tasks/{id})",
    "tasks": "the default agent's tasks (GET /tasks, /tasks/{id}, traces and push logs)",
    "message:send": "the default agent's SendMessage (POST /message:send)",
    "message:stream": "the default agent's SendStreamingMessage (POST /message:stream)",
    "extendedAgentCard": "the default agent's extended card (GET /extendedAgentCard)",
    "v1": "the default agent's A2A 0.3 HTTP+JSON API (/v1/...)",
    "card": "the 0.3 agent card path (GET /v1/card)",
    ".well-known": "the agent cards and signing keys (/.well-known/...)",
    "ui": "the web dashboard's pages (/ui/...)",
}


def agent_id_problem(agent_id: str) -> str | None:
    """Why `agent_id` cannot name a hosted agent, or None when it can."""
    if not agent_id:
        return "an agent id must not be empty"
    if "/" in agent_id:
        return "an agent id must not contain '/' (it is one segment of the agent's URL)"
    if agent_id in RESERVED_AGENT_IDS:
        return (f"it is reserved: /{agent_id} is {RESERVED_AGENT_IDS[agent_id]}, "
                "which an agent of that id would shadow")
    if ":" in agent_id:
        return ("an agent id must not contain ':' (HTTP+JSON paths use it for methods such as "
                "/message:send and /tasks/{id}:cancel)")
    if agent_id.startswith("."):
        return "an agent id must not start with '.' (like /.well-known/, and the path segments '.' and '..')"
    return None


__all__ = ["RESERVED_AGENT_IDS", "agent_id_problem"]
