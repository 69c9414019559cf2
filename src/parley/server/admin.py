"""The admin HTTP API: API keys (what `parley keys` does, for a running server) and any principal's tasks.

    POST   /admin/keys            {"agent", "name"?, "scopes"?, "principal"?, "expiresInSeconds"?}
                                  -> 201 {"key": {...}, "token": "pk_..."}  (the token is shown once)
    GET    /admin/keys[?agent=A]  -> 200 {"keys": [{...}, ...]}               (never a secret)
    DELETE /admin/keys/{id}       -> 200 {"key": {...}} (revoked), 404 if there is no such key
    GET    /admin/tasks/{id}      -> 200 {"agent", "owner", "task"} for a task of any principal, 404
    POST   /admin/prune           {"maxAgeDays"?, "maxFinished"?} -> 200 {"removed": n, ...}: a retention pass
                                  now (`parley tasks prune URL`; the body overrides [server.retention])

Every call needs an admin principal: a key with the `admin` scope, the admin key from the environment
(`auth.admin_key_env`), a token with the `admin` scope, or a principal listed in `auth.admin_principals`.
No credentials: 401 with `WWW-Authenticate`; authenticated but not admin: 403. An open server (no
credentials configured) has no admin: the API answers 403 until one is configured. Bodies must be JSON
(415 otherwise), as for the A2A bindings.
"""

from __future__ import annotations

import time
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from parley.protocol.codec import loads, to_wire
from parley.protocol.errors import A2AError, InvalidParamsError, PermissionDeniedError, TaskNotFoundError
from parley.protocol.operations import Operation
from parley.runtime import Runtime
from parley.security.keys import ANY_AGENT, ApiKey, KeyProblem, KeyStore
from parley.server.access import Access, Principal
from parley.server.http import credentials_of, read_body, require_json
from parley.tasks.retention import prune, retention_of

MAX_ADMIN_BODY = 16 * 1024


def key_json(key: ApiKey) -> dict[str, Any]:
    """A key's record as the API shows it (never its secret or its hash)."""
    now = time.time()
    state = "revoked" if key.revoked_at else ("expired" if not key.active(now) else "active")
    return {"id": key.id, "agent": key.agent_id, "name": key.name, "scopes": sorted(key.scopes),
            "principal": key.principal, "createdAt": key.created_at, "lastUsedAt": key.last_used_at,
            "expiresAt": key.expires_at, "revokedAt": key.revoked_at, "state": state}


class AdminApi:
    """The admin routes of one runtime (see the module docstring)."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    async def admin(self, request: Request) -> Principal:
        """The caller, if it is an admin; raises UnauthenticatedError / PermissionDeniedError otherwise."""
        security = self.runtime.security
        if not await security.authenticator.secured():
            raise PermissionDeniedError("The admin API needs an admin credential, and this server has none "
                                        "configured (make an admin key: parley keys create '*' --scopes admin, "
                                        "or set auth.admin_key_env)")
        access = Access(ANY_AGENT, Operation.EXTENDED_CARD, "HTTP")
        principal = await security.authenticator.authenticate(access, credentials_of(request))
        if not security.is_admin(principal):
            raise PermissionDeniedError("The admin API needs the admin scope")
        return principal

    async def create_key(self, request: Request) -> Response:
        async def go() -> Response:
            await self.admin(request)
            store = self._store()
            require_json(request)
            body = loads(await read_body(request, MAX_ADMIN_BODY))
            if not isinstance(body, dict):
                raise InvalidParamsError("Invalid params: the body must be a JSON object")
            agent = _text(body, "agent", required=True)
            scopes = body.get("scopes", ["a2a"])
            if not isinstance(scopes, list) or not all(isinstance(s, str) and s.strip() for s in scopes):
                raise InvalidParamsError("Invalid params: `scopes` must be a list of non-empty strings")
            ttl = body.get("expiresInSeconds")
            if ttl is not None and (isinstance(ttl, bool) or not isinstance(ttl, int) or ttl <= 0):
                raise InvalidParamsError("Invalid params: `expiresInSeconds` must be a positive integer")
            key, token = await issue_key(self.runtime, store, agent, name=_text(body, "name") or "",
                                         scopes=frozenset(s.strip() for s in scopes),
                                         principal=_text(body, "principal"), ttl_seconds=ttl)
            return JSONResponse({"key": key_json(key), "token": token}, status_code=201,
                                headers={"Cache-Control": "no-store"})

        return await _answer(go)

    async def list_keys(self, request: Request) -> Response:
        async def go() -> Response:
            await self.admin(request)
            keys = await self._store().list(request.query_params.get("agent") or None)
            return JSONResponse({"keys": [key_json(k) for k in keys]})

        return await _answer(go)

    async def revoke_key(self, request: Request) -> Response:
        async def go() -> Response:
            await self.admin(request)
            key = await self._store().revoke(request.path_params["key_id"])
            if key is None:
                return JSONResponse({"error": {"code": 404, "message": "no such key"}}, status_code=404)
            return JSONResponse({"key": key_json(key)})

        return await _answer(go)

    async def get_task(self, request: Request) -> Response:
        async def go() -> Response:
            await self.admin(request)
            task_id = request.path_params["task_id"]
            rec = await self.runtime.engine.store.get(task_id)
            if rec is None:
                raise TaskNotFoundError(f"Task {task_id!r} not found")
            return JSONResponse({"agent": rec.agent_id, "owner": rec.owner, "task": to_wire(rec.task)})

        return await _answer(go)

    async def prune(self, request: Request) -> Response:
        """A retention pass now: `maxAgeDays` and `maxFinished` override `[server.retention]` for this pass."""
        async def go() -> Response:
            await self.admin(request)
            body: Any = {}
            raw = await read_body(request, MAX_ADMIN_BODY)
            if raw.strip():
                require_json(request)
                body = loads(raw)
            if not isinstance(body, dict):
                raise InvalidParamsError("Invalid params: the body must be a JSON object")
            age, count = body.get("maxAgeDays"), body.get("maxFinished")
            if age is not None and (isinstance(age, bool) or not isinstance(age, int | float) or age <= 0):
                raise InvalidParamsError("Invalid params: `maxAgeDays` must be a positive number")
            if count is not None and (isinstance(count, bool) or not isinstance(count, int) or count < 0):
                raise InvalidParamsError("Invalid params: `maxFinished` must be an integer, 0 or more")
            now = time.time()
            retention = retention_of(self.runtime.settings.retention, now, max_age_days=age, max_finished=count)
            removed = await prune(self.runtime.store, retention, now=now)
            return JSONResponse({"removed": removed, "finishedBefore": retention.finished_before,
                                 "keepFinished": retention.keep_finished})

        return await _answer(go)

    def _store(self) -> Any:
        if self.runtime.security.keys is None:
            raise PermissionDeniedError("API keys are turned off on this server (auth.api_keys = false)")
        return self.runtime.security.keys


async def issue_key(runtime: Runtime, store: KeyStore, agent: str, *, name: str, scopes: frozenset[str],
                    principal: str | None = None, ttl_seconds: float | None = None) -> tuple[ApiKey, str]:
    """Make an API key for one hosted agent (or every agent, `*`): (its record, its token, shown once).
    InvalidParamsError says what is wrong (the admin API and the dashboard's Keys page both make keys here)."""
    if agent != ANY_AGENT and agent not in runtime.agents:
        raise InvalidParamsError(f"Invalid params: no agent {agent!r} on this server "
                                 f"(it has: {', '.join(runtime.agents)})")
    try:
        return await store.create(agent, name=name, scopes=scopes, principal=principal,
                                  expires_at=time.time() + ttl_seconds if ttl_seconds else None)
    except KeyProblem as exc:
        raise InvalidParamsError(f"Invalid params: {exc}") from None


def _text(body: dict[str, Any], name: str, *, required: bool = False) -> str | None:
    value = body.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip():
        raise InvalidParamsError(f"Invalid params: `{name}` must be a non-empty string")
    return value.strip()


async def _answer(handler: Any) -> Response:
    """Run an admin handler; an A2AError becomes its HTTP status with a JSON error and its headers."""
    try:
        return await handler()
    except A2AError as exc:
        return JSONResponse({"error": {"code": exc.http_status, "message": exc.message}},
                            status_code=exc.http_status, headers=exc.headers or None)


__all__ = ["AdminApi", "issue_key", "key_json"]
