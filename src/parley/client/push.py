"""Receiving push notifications: verify that a webhook request really comes from the A2A server, and read it.

    verifier = PushVerifier(jwks_url="https://agents.example.com/.well-known/jwks.json",
                            audience="https://me.example.com/hooks/a2a", token="my-config-token")

    async def webhook(request):                      # any web framework: headers and the raw body
        note = await verifier.verify(request.headers, await request.body())
        print(note.event_id, note.task_id, note.event)
        return Response(status_code=204)

What is checked, as configured:

* `token`: `X-A2A-Notification-Token` equals the token of your push config (constant-time);
* `jwks_url`: `Parley-Signature` is a JWT signed by a key of the server's JWKS (ES256), for your
  webhook (`aud`, when `audience` is given), from the server (`iss`, when `issuer` is given), not
  expired, signed at most `max_age` seconds ago, over this exact body (`body_sha256`), and not seen
  before (its `jti`: a replayed request is refused);
* `webhook_secret`: Standard Webhooks headers (`webhook-id`, `webhook-timestamp`, `webhook-signature`,
  HMAC-SHA256 `v1`), the timestamp within `max_age` seconds, not replayed.

The body is read in both versions: A2A 1.0 `StreamResponse` (Parley's and the official SDK 1.x's
notifications) and a 0.3 Task (0.3 servers). Duplicates are possible (delivery is at least once):
de-duplicate on `event_id`. Anything that fails is :class:`PushVerificationError` (answer 401).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from parley.protocol import models as m
from parley.protocol import v0_3, v1_0
from parley.protocol.errors import A2AError
from parley.protocol.operations import Operation

SIGNATURE_HEADER = "parley-signature"
TOKEN_HEADER = "x-a2a-notification-token"
EVENT_ID_HEADER = "parley-event-id"
REPLAY_MEMORY = 100_000  # ids remembered for replay checks (each for `max_age` seconds)


class PushVerificationError(Exception):
    """The request is not a notification this receiver accepts (say 401, and do not act on it)."""


@dataclass(frozen=True, slots=True)
class PushNotification:
    """A verified notification."""

    event_id: str | None  # `<task id>:<seq>` from Parley (the same on every retry); None from other servers
    task_id: str
    event: m.StreamEvent  # a TaskStatusUpdateEvent / TaskArtifactUpdateEvent (1.0), or the Task (0.3)
    version: str  # "1.0" or "0.3"
    claims: dict[str, Any] | None = None  # the verified signature's claims


class PushVerifier:
    """Verifies and reads the notifications a webhook receives (see the module docs)."""

    def __init__(self, *, jwks_url: str | None = None, issuer: str | None = None, audience: str | None = None,
                 token: str | None = None, webhook_secret: str | None = None, max_age: float = 300.0,
                 clock: Callable[[], float] = time.time) -> None:
        if not (jwks_url or token or webhook_secret):
            raise ValueError("PushVerifier needs something to verify with: jwks_url, token or webhook_secret")
        self.token = token
        self.audience = audience
        self.webhook_secret = webhook_secret
        self.max_age = max_age
        self.clock = clock
        self._seen: OrderedDict[str, float] = OrderedDict()
        self._jwt = None
        if jwks_url:
            from parley.security.jwt import JwtVerifier
            from parley.settings import JwtSettings

            self._jwt = JwtVerifier(JwtSettings(jwks_url=jwks_url, issuer=issuer, audience=[audience] if audience
                                                else [], algorithms=["ES256"], principal_claim="taskId",
                                                leeway_seconds=30), clock=clock)

    async def verify(self, headers: Mapping[str, str], body: bytes) -> PushNotification:
        """The notification `body` carries, once every configured check passed."""
        h = {k.lower(): v for k, v in headers.items()}
        if self.token is not None:
            got = h.get(TOKEN_HEADER, "")
            if not hmac.compare_digest(got.encode(), self.token.encode()):
                raise PushVerificationError("the notification token does not match")
        claims = await self._check_signature(h, body) if self._jwt is not None else None
        if self.webhook_secret is not None:
            self._check_standard_webhook(h, body)
        note = read_notification(body, h.get("content-type", ""), h.get(EVENT_ID_HEADER))
        if claims is not None and claims.get("taskId") != note.task_id:
            raise PushVerificationError("the signature is for another task")
        return PushNotification(note.event_id, note.task_id, note.event, note.version, claims)

    async def aclose(self) -> None:
        if self._jwt is not None:
            await self._jwt.aclose()

    async def _check_signature(self, h: dict[str, str], body: bytes) -> dict[str, Any]:
        token = h.get(SIGNATURE_HEADER)
        if not token:
            raise PushVerificationError("the notification is not signed (no Parley-Signature header)")
        try:
            identity = await self._jwt.verify(token)  # type: ignore[union-attr]
        except A2AError as exc:
            raise PushVerificationError(f"the signature does not verify: {exc.message}") from None
        claims = identity.claims
        digest = base64.urlsafe_b64encode(hashlib.sha256(body).digest()).rstrip(b"=").decode()
        if not hmac.compare_digest(str(claims.get("body_sha256", "")), digest):
            raise PushVerificationError("the body is not the one that was signed")
        iat = claims.get("iat")
        if not isinstance(iat, (int, float)) or abs(self.clock() - iat) > self.max_age:
            raise PushVerificationError("the signature is too old (or from the future)")
        self._once(f"jwt:{claims.get('jti')}")
        return claims

    def _check_standard_webhook(self, h: dict[str, str], body: bytes) -> None:
        msg_id, timestamp, signatures = h.get("webhook-id"), h.get("webhook-timestamp"), h.get("webhook-signature")
        if not (msg_id and timestamp and signatures):
            raise PushVerificationError("the Standard Webhooks headers are missing")
        if not (timestamp.isascii() and timestamp.isdigit()) or abs(self.clock() - int(timestamp)) > self.max_age:
            raise PushVerificationError("the webhook timestamp is too old (or from the future)")
        key = base64.b64decode(self.webhook_secret.removeprefix("whsec_"))  # type: ignore[union-attr]
        expected = base64.b64encode(hmac.new(key, f"{msg_id}.{timestamp}.".encode() + body,
                                             hashlib.sha256).digest()).decode()
        given = [s.partition(",")[2] for s in signatures.split() if s.startswith("v1,")]
        if not any(hmac.compare_digest(expected, g) for g in given):
            raise PushVerificationError("the webhook signature does not match")
        self._once(f"whk:{msg_id}:{timestamp}")

    def _once(self, key: str) -> None:
        """Refuse an id seen within `max_age` seconds (a replay)."""
        now = self.clock()
        while self._seen and (next(iter(self._seen.values())) < now - self.max_age or len(self._seen) > REPLAY_MEMORY):
            self._seen.popitem(last=False)
        if key in self._seen:
            raise PushVerificationError("this notification request was already received (a replay)")
        self._seen[key] = now


def read_notification(body: bytes, content_type: str = "", event_id: str | None = None) -> PushNotification:
    """Parse a notification body: an A2A 1.0 StreamResponse, or a 0.3 Task (PushVerificationError otherwise)."""
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise PushVerificationError("the body is not JSON") from None
    if not isinstance(data, dict):
        raise PushVerificationError("the body is not a JSON object")
    try:
        if {"task", "message", "statusUpdate", "artifactUpdate"} & data.keys():
            event = v1_0.decode_stream_event(data)
            version = "1.0"
        else:
            event = v0_3.decode_result(Operation.GET, data)
            version = "0.3"
    except A2AError as exc:
        raise PushVerificationError(f"the body is not an A2A notification: {exc.message}") from None
    task_id = getattr(event, "task_id", None) or getattr(event, "id", None) or ""
    return PushNotification(event_id, task_id, event, version)


__all__ = ["PushNotification", "PushVerificationError", "PushVerifier", "read_notification"]
