"""Server settings: the one schema behind `parley serve` flags, the `[server]` table of parley.toml
and `Parley(settings=...)`.

Every field has a safe default. The command line overrides only the flags it was
given (:meth:`Settings.merged`), so an app's own settings survive `--app`. The
file and the flags are checked by the same rules (:meth:`Settings.problems`).
"""

from __future__ import annotations

from typing import Any

import msgspec

from parley.protocol import models as m

DEFAULT_DB = ".parley/parley.db"
DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024
MEMORY = "memory"


class CardOptions(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Server-wide facts that appear in every agent card."""

    streaming: bool = True
    push_notifications: bool = False
    extended_card: bool = False
    provider: m.AgentProvider | None = None
    documentation_url: str | None = None


class Settings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """How a Parley server runs. Mutable: the CLI fills in what only it knows (the address it listens on)."""

    host: str = "127.0.0.1"
    port: int = 8000
    # A SQLite file, or "memory". Unset: `parley serve` uses .parley/parley.db, an embedded
    # `Parley().asgi()` keeps tasks in memory.
    db: str | None = None
    public_url: str | None = None  # the base URL clients use (behind a reverse proxy)
    self_url: str | None = None  # how this server reaches itself; default: public_url
    forwarded_allow_ips: list[str] = msgspec.field(default_factory=lambda: ["127.0.0.1", "::1"])
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    keepalive_seconds: float = 15.0  # SSE comment frames on idle streams
    # gRPC (A2A 1.0, needs parley[grpc]): also serve every agent on grpc_host:grpc_port
    grpc_port: int | None = None
    grpc_host: str | None = None  # default: host
    lease_seconds: float = 30.0  # a running task's lease; another process takes over once it expires
    card: CardOptions = msgspec.field(default_factory=CardOptions)

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
        if self.keepalive_seconds <= 0:
            found.append(("keepalive_seconds", "must be positive"))
        if self.lease_seconds < 1:
            found.append(("lease_seconds", "must be at least 1 second"))
        if self.db is not None and not self.db.strip():
            found.append(("db", "must name a SQLite file or be \"memory\""))
        for name in ("public_url", "self_url"):
            value = getattr(self, name)
            if value is not None and not value.startswith(("http://", "https://")):
                found.append((name, f"must be an http:// or https:// URL, got {value!r}"))
        return found

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


__all__ = ["DEFAULT_DB", "DEFAULT_MAX_BODY_BYTES", "MEMORY", "CardOptions", "Settings"]
