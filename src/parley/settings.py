"""Server settings: the one schema behind `parley serve` flags, the `[server]` table of parley.toml
and `Parley(settings=...)`.

Every field has a safe default. The command line overrides only the flags it was
given (:meth:`Settings.merged`), so an app's own settings survive `--app`. The
file and the flags are checked by the same rules (:meth:`Settings.problems`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec

from parley.postgres import is_postgres_url
from parley.protocol import models as m

DEFAULT_DB = ".parley/parley.db"
DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024
MEMORY = "memory"


class CardOptions(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Server-wide facts that appear in every agent card."""

    streaming: bool = True
    push_notifications: bool | None = None  # None: as `[push] enabled` says (True by default); False turns push off
    extended_card: bool = False
    provider: m.AgentProvider | None = None
    documentation_url: str | None = None


class JwtSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Bearer tokens (JWT) from an identity provider: HS256 with a shared secret, or keys from a JWKS."""

    issuer: str | None = None  # the `iss` every token must carry (checked when set)
    audience: list[str] = msgspec.field(default_factory=list)  # accepted `aud` values (one must match)
    secret_env: str | None = None  # the NAME of the variable holding the HS256 secret, never the secret
    jwks_url: str | None = None  # signing keys (RS256, ES256, EdDSA)
    oidc_discovery_url: str | None = None  # .../.well-known/openid-configuration: its jwks_uri is used
    algorithms: list[str] = msgspec.field(default_factory=list)  # default: HS256 with a secret, else RS256/ES256/EdDSA
    leeway_seconds: float = 30.0  # clock skew allowed on exp / nbf / iat
    principal_claim: str = "sub"
    scopes_claim: str = "scope"  # a space-separated string or a list
    jwks_min_refresh_seconds: float = 30.0  # an unknown `kid` refetches the keys at most this often
    jwks_max_age_seconds: float = 3600.0  # keys are refetched at least this often


class AuthSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Who may call: API keys from the store (`parley keys create`), and/or JWT bearer tokens."""

    api_keys: bool = True  # accept the store's keys (X-API-Key, or Authorization: Bearer)
    jwt: JwtSettings | None = None
    admin_key_env: str | None = None  # the NAME of a variable holding an admin key (bootstraps --memory)
    admin_principals: list[str] = msgspec.field(default_factory=list)  # principals with the admin scope


class LimitSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Rate limits, concurrency limits and input limits (None: unlimited)."""

    requests_per_minute: int | None = None  # per principal and agent (a token bucket)
    burst: int | None = None  # bucket size (default: a tenth of a minute's requests, at least 1)
    streams_per_principal: int | None = None  # open SSE/gRPC streams at once
    tasks_per_agent: int | None = None  # tasks running at once
    # of those, how many one principal may run at once (its share of the agent's pool; None: half of
    # tasks_per_agent, rounded up), so one caller cannot take every slot (issue 28 item 9)
    tasks_per_principal: int | None = None
    # failed authentications (a refused key, token or dashboard login) per client address within the window,
    # then 429 + Retry-After for that address (parley.security.failures); None: not counted
    auth_failures: int | None = 20
    auth_failure_window_seconds: float = 60.0
    max_parts: int = 64  # parts in one message
    max_text_bytes: int = 4 * 1024 * 1024  # UTF-8 bytes of text in one message
    max_file_bytes: int = 4 * 1024 * 1024  # inline (raw) file bytes in one message
    max_metadata_bytes: int = 64 * 1024  # encoded size of one metadata object
    max_metadata_depth: int = 16  # nesting of metadata and data parts
    max_json_depth: int = 64  # nesting of a request body
    max_history_length: int = 1000  # messages in one task
    max_subscribers_per_task: int = 100  # streams following one task at once
    # What one request may load and return (issue 28, item 6): the earlier tasks of a context handed to a new
    # task's agent (their stored bytes read, then the newest messages kept), and the stored bytes of a ListTasks
    # page (it ends early, with a nextPageToken; one task alone is always listed).
    max_context_messages: int = 200  # messages of earlier tasks in a context given to a new task's agent
    max_context_bytes: int = 4 * 1024 * 1024  # encoded bytes of those messages (4x this of stored tasks is read)
    max_page_bytes: int = 8 * 1024 * 1024  # stored bytes of the tasks of one ListTasks page
    # A2A 1.1 GetTask(currentGeneration) long-polls (docs/protocol.md): held at most this long, then the task as it
    # is; at most this many held at once per principal (one more: 429 RATE_LIMITED)
    long_poll_seconds: float = 30.0
    long_polls_per_principal: int = 8
    # One agent's own rate and task limits (`[server.limits.agents.<id>]`): requests_per_minute, burst,
    # tasks_per_agent, tasks_per_principal replace the server's for that agent; the input limits are the server's.
    agents: dict[str, LimitSettings] = msgspec.field(default_factory=dict)


class AgentPushSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """One agent's own push options (`[push.agents.<id>]`); unset fields follow `[push]`."""

    sign: bool | None = None
    artifact_updates: bool | None = None


class PushSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Push-notification delivery (docs/push.md): where webhooks may point, retries, signatures."""

    enabled: bool = True  # the card says pushNotifications: true, configs are taken and delivered
    allow: list[str] = msgspec.field(default_factory=list)  # CIDRs webhooks may reach beyond the public internet
    timeout_seconds: float = 10.0  # one delivery attempt
    max_attempts: int = 12  # then the notification is dead-lettered
    max_age_seconds: float = 86400.0  # a notification older than this is dead-lettered instead of retried
    backoff_seconds: float = 1.0  # the first retry; doubled each time (with jitter), at most max_backoff
    max_backoff_seconds: float = 3600.0
    concurrency: int = 64  # deliveries in flight at once (each task's webhook gets one at a time)
    concurrency_per_owner: int = 8  # of those, at most this many for one owner's tasks (fair lanes, docs/push.md)
    poll_seconds: float = 1.0  # the outbox is read this often without a wake-up (rows of other processes)
    artifact_updates: bool = False  # also notify artifact updates (A2A configs have no field to ask for them)
    sign: bool = True  # a JWT signed with the server's key in `Parley-Signature` (JWKS at /.well-known/jwks.json)
    encryption_key_env: str | None = None  # the NAME of a variable holding a Fernet key: configs' secrets encrypted
    webhook_secret_env: str | None = None  # the NAME of a variable holding a Standard Webhooks secret (whsec_...)
    agents: dict[str, AgentPushSettings] = msgspec.field(default_factory=dict)  # per-agent sign / artifact_updates

    def signs(self, agent_id: str | None) -> bool:
        """Whether notifications of `agent_id`'s tasks are signed."""
        own = self.agents.get(agent_id or "")
        return self.sign if own is None or own.sign is None else own.sign

    def artifacts_of(self, agent_id: str) -> bool:
        """Whether `agent_id`'s webhooks are told of artifact updates too."""
        own = self.agents.get(agent_id)
        return self.artifact_updates if own is None or own.artifact_updates is None else own.artifact_updates


class DashboardSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """The web dashboard (docs/dashboard.md): where it is served and how its login sessions are kept."""

    enabled: bool = True
    path: str = "/"  # its home page; the other pages live below it ("/ui/..." when the path is "/")
    # The NAME of a variable holding a Fernet key that seals the login cookie. Replicas behind one address
    # must share it; unset, each process makes its own at start (logins end when it restarts).
    session_key_env: str | None = "PARLEY_SESSION_KEY"
    session_hours: float = 12.0  # a login lasts this long
    # Log in at the OIDC provider of auth.jwt.oidc_discovery_url (authorization code + PKCE): the dashboard's
    # client id there, the NAME of a variable holding its secret (none: a public client), the scopes it asks for
    oidc_client_id: str | None = None
    oidc_client_secret_env: str | None = None
    oidc_scopes: list[str] = msgspec.field(default_factory=lambda: ["openid", "profile"])
    # The inspector (/ui/inspect) reaches only public addresses, and these CIDRs besides (loopback, private)
    inspect_allow: list[str] = msgspec.field(default_factory=list)

    @property
    def root(self) -> str:
        """The prefix of the dashboard's own pages, static files and endpoints (never "/")."""
        path = self.path.rstrip("/")
        return path or "/ui"

    def shadow_problem(self, agent_ids: Iterable[str]) -> str | None:
        """Why the dashboard cannot be served beside these agents (the first segment of its path names one of
        them: its pages would take that agent's HTTP+JSON paths), or None."""
        agent = self.root.strip("/").split("/")[0]
        if not self.enabled or agent not in set(agent_ids):
            return None
        return (f"/{agent} is also the agent {agent!r}: the dashboard's pages would shadow that agent's "
                "HTTP+JSON paths (/{agent}/...); choose another path or agent id")

    def problems(self) -> list[tuple[str, str]]:
        found = []
        if not self.path.startswith("/"):
            found.append(("dashboard.path", "must start with '/'"))
        if self.session_hours <= 0:
            found.append(("dashboard.session_hours", "must be positive"))
        from parley.push.ssrf import parse_allow

        try:
            parse_allow(self.inspect_allow, "dashboard.inspect_allow")
        except ValueError as exc:
            found.append(("dashboard.inspect_allow", str(exc)))
        return found


class RetentionSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """How long finished tasks are kept (docs/operations.md, "Retention"): a background job removes the rest,
    with their logs, idempotency keys, checkpoints, links and push state. Running and waiting tasks stay."""

    max_age_days: float | None = 30.0  # finished longer ago than this: removed (None: no age limit)
    max_finished: int | None = 100_000  # at most this many finished tasks, the newest (None: no count limit)
    interval_seconds: float = 60.0  # how often the job runs
    changes_minutes: float = 60.0  # the change feed (the dashboard's live view) keeps this long

    def problems(self) -> list[tuple[str, str]]:
        found = []
        if self.max_age_days is not None and self.max_age_days <= 0:
            found.append(("retention.max_age_days", "must be positive (leave it out for no age limit)"))
        if self.max_finished is not None and self.max_finished < 0:
            found.append(("retention.max_finished", "must be 0 or more (leave it out for no count limit)"))
        if self.interval_seconds <= 0:
            found.append(("retention.interval_seconds", "must be positive"))
        if self.changes_minutes <= 0:
            found.append(("retention.changes_minutes", "must be positive"))
        return found


class Settings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """How a Parley server runs. Mutable: the CLI fills in what only it knows (the address it listens on)."""

    host: str = "127.0.0.1"
    port: int = 8000
    # A SQLite file, "memory", or a postgresql:// URL (replicas share it). Unset: `parley serve` uses
    # .parley/parley.db, an embedded `Parley().asgi()` keeps tasks in memory.
    db: str | None = None
    # The event bus between replicas: None (in process; "postgres" when db is PostgreSQL), "postgres"
    # (LISTEN/NOTIFY) or a redis:// URL (Redis Streams; rate-limit counters shared too). docs/operations.md.
    bus: str | None = None
    namespace: str = "parley"  # prefix of the bus's Redis keys and PostgreSQL channels (one per deployment)
    public_url: str | None = None  # the base URL clients use (behind a reverse proxy)
    self_url: str | None = None  # how this server reaches itself; default: public_url
    forwarded_allow_ips: list[str] = msgspec.field(default_factory=lambda: ["127.0.0.1", "::1"])
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    keepalive_seconds: float = 15.0  # SSE comment frames on idle streams
    # Slow and idle clients (parley serve): request headers must arrive within header_timeout_seconds; a
    # keep-alive connection idle between requests is closed after idle_timeout_seconds; a response the client
    # stopped reading (an SSE subscriber that reads nothing) is abandoned after stall_timeout_seconds; a request
    # body must arrive within body_timeout_seconds of its headers, plus 1 s per body_min_rate bytes received
    # (a partial body that stops, or one trickled slower than body_min_rate bytes/s, is cut).
    header_timeout_seconds: float = 10.0
    idle_timeout_seconds: float = 5.0
    stall_timeout_seconds: float = 60.0
    body_timeout_seconds: float = 30.0
    body_min_rate: float = 500.0  # bytes per second; 0: the body must arrive within body_timeout_seconds
    # uvicorn's access log: a line per request (`--no-access-log`: none; behind a proxy or load balancer that
    # logs requests anyway, lines nobody reads cost a fifth of a busy server's throughput; bench/RESULTS.md)
    access_log: bool = True
    # gRPC (A2A 1.0, needs parley-a2a[grpc]): also serve every agent on grpc_host:grpc_port
    grpc_port: int | None = None
    grpc_host: str | None = None  # default: host
    lease_seconds: float = 30.0  # a running task's lease; another process takes over once it expires
    # how long a commit is tried again while the database cannot be reached (a dropped connection, a failover);
    # past it the run stops without failing its task, which is resumed once its lease expires
    commit_retry_seconds: float = 30.0
    # SQLite store: a group write less than this long after the previous one waits until this long after it, so
    # that the commits of concurrent streams share a transaction (fewer disk bytes per token); an idle store
    # writes at once. 0: every commit at the next event-loop turn. docs/operations.md, "Group commit".
    group_commit_seconds: float = 0.0
    recheck_seconds: float = 30.0  # how often an unavailable agent (a remote one out of reach) is tried again
    drain_seconds: float = 10.0  # on SIGTERM/SIGINT, how long running tasks may finish before they are handed over
    insecure: bool = False  # serve a non-loopback address with no credentials configured (never in production)
    card: CardOptions = msgspec.field(default_factory=CardOptions)
    auth: AuthSettings = msgspec.field(default_factory=AuthSettings)
    limits: LimitSettings = msgspec.field(default_factory=LimitSettings)
    push: PushSettings = msgspec.field(default_factory=PushSettings)
    retention: RetentionSettings = msgspec.field(default_factory=RetentionSettings)
    dashboard: DashboardSettings = msgspec.field(default_factory=DashboardSettings)

    def merged(self, **overrides: Any) -> Settings:
        """A copy with the given fields replaced; None values leave a field as it is."""
        return msgspec.structs.replace(self, **{k: v for k, v in overrides.items() if v is not None})

    def problems(self) -> list[tuple[str, str]]:
        """What is wrong, as (key, reason) pairs; empty when the settings are usable."""
        found = []
        if not 0 < self.port < 65536:
            found.append(("port", f"must be between 1 and 65535, got {self.port}"))
        if self.grpc_port is not None and not 0 < self.grpc_port < 65536:
            found.append(("grpc_port", f"must be between 1 and 65535, got {self.grpc_port}"))
        if self.grpc_port is not None and self.grpc_port == self.port and (self.grpc_host or self.host) == self.host:
            found.append(("grpc_port", f"must differ from the HTTP port {self.port}"))
        if self.max_body_bytes < 1024:
            found.append(("max_body_bytes", "must be at least 1024"))
        for name in ("keepalive_seconds", "header_timeout_seconds", "idle_timeout_seconds", "stall_timeout_seconds",
                     "body_timeout_seconds"):
            if getattr(self, name) <= 0:
                found.append((name, "must be positive"))
        if self.body_min_rate < 0:
            found.append(("body_min_rate", "must be 0 (no allowance for a long body) or more"))
        if self.recheck_seconds <= 0:
            found.append(("recheck_seconds", "must be positive"))
        if self.drain_seconds < 0:
            found.append(("drain_seconds", "must be 0 (hand running tasks over at once) or more"))
        if self.lease_seconds < 1:
            found.append(("lease_seconds", "must be at least 1 second"))
        if self.commit_retry_seconds < 0:
            found.append(("commit_retry_seconds", "must be 0 (no retry) or more"))
        if not 0 <= self.group_commit_seconds <= 1:
            found.append(("group_commit_seconds", "must be between 0 (off) and 1 second"))
        if self.db is not None and not self.db.strip():
            found.append(("db", "must name a SQLite file, be \"memory\" or a postgresql:// URL"))
        found.extend(_bus_problems(self))
        found.extend(self.retention.problems())
        found.extend(self.dashboard.problems())
        if self.dashboard.oidc_client_id and (self.auth.jwt is None or not self.auth.jwt.oidc_discovery_url):
            found.append(("dashboard.oidc_client_id", "needs auth.jwt.oidc_discovery_url (the provider to log in at)"))
        jwt = self.auth.jwt
        if jwt is not None:
            sources = [x for x in (jwt.secret_env, jwt.jwks_url, jwt.oidc_discovery_url) if x]
            if len(sources) != 1:
                found.append(("auth.jwt", "give exactly one of secret_env (HS256), jwks_url or oidc_discovery_url"))
            if "none" in {a.lower() for a in jwt.algorithms}:
                found.append(("auth.jwt.algorithms", "\"none\" is never accepted"))
            if jwt.leeway_seconds < 0 or jwt.leeway_seconds > 300:
                found.append(("auth.jwt.leeway_seconds", "must be between 0 and 300"))
        for where, limits in (("limits", self.limits),
                              *((f"limits.agents.{a}", lim) for a, lim in self.limits.agents.items())):
            for name in ("requests_per_minute", "burst", "streams_per_principal", "tasks_per_agent",
                         "tasks_per_principal"):
                value = getattr(limits, name)
                if value is not None and value < 1:
                    found.append((f"{where}.{name}", "must be at least 1 (leave it out for no limit)"))
            if where != "limits" and (limits.streams_per_principal is not None or limits.agents):
                reason = ("an agent may set requests_per_minute, burst, tasks_per_agent and tasks_per_principal; "
                          "streams are limited per principal over every agent")
                found.append((where, reason))
        for name, value in (("max_parts", self.limits.max_parts), ("max_text_bytes", self.limits.max_text_bytes),
                            ("max_metadata_bytes", self.limits.max_metadata_bytes),
                            ("max_metadata_depth", self.limits.max_metadata_depth),
                            ("max_json_depth", self.limits.max_json_depth),
                            ("max_history_length", self.limits.max_history_length),
                            ("max_subscribers_per_task", self.limits.max_subscribers_per_task)):
            if value < 1:
                found.append((f"limits.{name}", "must be at least 1"))
        if self.limits.max_file_bytes < 0:
            found.append(("limits.max_file_bytes", "must be 0 (no inline files) or more"))
        if self.limits.max_json_depth > 500:
            found.append(("limits.max_json_depth", "must be at most 500 (deeper JSON could exhaust the stack)"))
        push = self.push
        try:
            from parley.push.ssrf import parse_allow

            parse_allow(push.allow)
        except ValueError as exc:
            found.append(("push.allow", str(exc)))
        for name in ("timeout_seconds", "max_age_seconds", "backoff_seconds", "max_backoff_seconds", "poll_seconds"):
            if getattr(push, name) <= 0:
                found.append((f"push.{name}", "must be positive"))
        for name in ("max_attempts", "concurrency"):
            if getattr(push, name) < 1:
                found.append((f"push.{name}", "must be at least 1"))
        for name in ("public_url", "self_url"):
            value = getattr(self, name)
            if value is not None and not value.startswith(("http://", "https://")):
                found.append((name, f"must be an http:// or https:// URL, got {value!r}"))
        return found

    @property
    def push_enabled(self) -> bool:
        """Whether push notifications are offered (the card's capability) and delivered."""
        return self.push.enabled if self.card.push_notifications is None else self.card.push_notifications

    @property
    def grpc_bind_host(self) -> str:
        """The interface the gRPC server listens on."""
        return self.grpc_host or self.host

    def reachable_self_url(self) -> str:
        """How this server reaches itself over HTTP: self_url, else public_url, else host:port (0.0.0.0 -> loopback)."""
        if self.self_url:
            return self.self_url.rstrip("/")
        if self.public_url:
            return self.public_url.rstrip("/")
        host = "127.0.0.1" if self.host in ("0.0.0.0", "::", "") else self.host
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{self.port}"


    @property
    def listening(self) -> list[tuple[str, str]]:
        """Every address the server listens on, as (the setting that names it, the address): `host` for HTTP,
        and `grpc_host` for gRPC when it is served (`grpc_port`)."""
        found = [("host", self.host)]
        if self.grpc_port is not None:
            found.append(("grpc_host", self.grpc_bind_host))
        return found

    @property
    def loopback(self) -> bool:
        """Whether the server listens on loopback addresses only (every one of :attr:`listening`)."""
        return all(is_loopback_address(address) for _, address in self.listening)

    def open_mode_problem(self) -> str | None:
        """Why this server may not run open (no credentials configured): the first listening address that is not
        loopback, in one line naming its setting and the ways out; None when every address is loopback or
        `insecure` is set. The open-mode rule of `parley serve`, for every listening address (HTTP and gRPC)."""
        if self.insecure:
            return None
        for name, address in self.listening:
            if not is_loopback_address(address):
                return (f"no credentials are configured, so every client of {name} {address} would be trusted: make "
                        "an API key (parley keys create AGENT --db ...), configure [server.auth.jwt], or pass "
                        "--insecure")
        return None


def is_loopback_address(address: str) -> bool:
    """Whether a listening address is this machine's loopback only (`localhost`, 127.0.0.0/8, `::1`)."""
    return address in ("127.0.0.1", "::1", "[::1]", "localhost") or address.startswith("127.")


def is_redis_url(value: str | None) -> bool:
    """Whether a `bus` setting names a Redis server."""
    return bool(value) and value.startswith(("redis://", "rediss://", "unix://"))


def _bus_problems(settings: Settings) -> list[tuple[str, str]]:
    """What is wrong with `db`, `bus` and `namespace` together."""
    found = []
    bus = settings.bus
    if bus is not None and bus not in ("local", "postgres") and not is_redis_url(bus):
        found.append(("bus", f"must be \"local\", \"postgres\" or a redis:// URL, got {bus!r}"))
    elif bus is not None and bus != "local" and not is_postgres_url(settings.db):
        found.append(("bus", ("a shared bus needs a shared database: set db to a postgresql:// URL "
                              f"(db is {settings.db or DEFAULT_DB!r})")))
    elif bus == "local" and is_postgres_url(settings.db):
        found.append(("bus", "replicas sharing a PostgreSQL database need a shared bus: \"postgres\" or redis://"))
    name = settings.namespace
    if not (0 < len(name) <= 40 and all(c in "abcdefghijklmnopqrstuvwxyz0123456789_" for c in name)):
        found.append(("namespace", f"must be 1-40 characters of a-z, 0-9 and _, got {name!r}"))
    return found


__all__ = [
    "DEFAULT_DB",
    "DEFAULT_MAX_BODY_BYTES",
    "MEMORY",
    "AgentPushSettings",
    "AuthSettings",
    "CardOptions",
    "JwtSettings",
    "LimitSettings",
    "PushSettings",
    "RetentionSettings",
    "Settings",
    "is_loopback_address",
    "is_redis_url",
]
